// Package deploy holds the files that run riskguard in production: the
// systemd unit, the Dockerfile, the Prometheus alerts and their tests, and
// the Grafana dashboard. It has no code; its tests check those files
// against the real daemon: the unit with systemd-analyze and the daemon's
// environment, the Dockerfile's build for a static binary, the alerts with
// promtool, and every metric the alerts and dashboard query against what
// the daemon exports.
package deploy
