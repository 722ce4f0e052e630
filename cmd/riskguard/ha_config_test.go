package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The ha section: the deploy examples load, the environment overrides
// apply, and every mistake is named at its line.
func TestHAConfig(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../deploy/ha/riskguard-ha.yaml", "../../deploy/ha/riskguard-compose.yaml"} {
		cfg, err := loadConfig(path, func(string) string { return "" })
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if cfg.HA == nil || len(cfg.HA.Endpoints) != 3 || cfg.HA.LeaseTTL != 5*time.Second || cfg.HA.Account != "default" {
			t.Errorf("%s: ha = %+v", path, cfg.HA)
		}
	}
	env := map[string]string{"RISKGUARD_HA_HOST": "n2", "RISKGUARD_HA_ENDPOINTS": "http://a:2379,http://b:2379", "RISKGUARD_HA_LEASE_TTL": "3s"}
	cfg, err := loadConfig("../../deploy/ha/riskguard-compose.yaml", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HA.Host != "n2" || len(cfg.HA.Endpoints) != 2 || cfg.HA.LeaseTTL != 3*time.Second {
		t.Errorf("overrides not applied: %+v", cfg.HA)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"ha:\n  lease_ttl: 5s\n", "ha.etcd.endpoints: at least one etcd endpoint"},
		{"ha:\n  etcd: {endpoints: [http://x:2379]}\n  lease_ttl: 1s\n", "ha.lease_ttl: 1s is too short"},
		{"ha:\n  etcd: {endpoints: [http://x:2379]}\n  lease_ttl: 2500ms\n", "whole seconds"},
		{"ha:\n  etcd: {endpoints: [http://x:2379], cert_file: c}\n", "cert_file and key_file go together"},
		{"ha:\n  etcd: {endpoints: [http://x:2379], username: u}\n", "username needs password_file"},
		{"ha:\n  etcd: {endpoints: [http://x:2379], endpoint: y}\n", `ha.etcd.endpoint`},
		{"ha:\n  etcd: {endpoints: [http://x:2379]}\n  leader_ttl: 5s\n", "ha.leader_ttl"},
		{"ha:\n  etcd: {endpoints: [http://x:2379]}\n  prefix: riskguard\n", "must start with /"},
		{"ha: 5\n", "ha: expected a mapping"},
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		body := "exchange:\n  base_url: http://127.0.0.1:1\n" + tc.yaml + "rules:\n" + overMaxRule
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(path, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
