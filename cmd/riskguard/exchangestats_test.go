package main

import (
	"errors"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/web"
)

// Compile-time checks that the engine, its control service and the
// client's figures are what the web server reads and actuates.
var (
	_ web.Guard         = (*engine.Engine)(nil)
	_ web.Controls      = (*control.Service)(nil)
	_ web.ExchangeStats = (*exchangeStats)(nil)
)

// The status page's exchange figures: the last latency, a moving average
// over about 20 requests, and the last error (an HTTP status or a
// transport error).
func TestExchangeStats(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	var s exchangeStats
	if got := s.Snapshot(); got != (web.ExchangeStatus{}) {
		t.Errorf("before any request: %+v, want zeros", got)
	}
	s.observe(exchange.RequestInfo{Method: "GET", Route: "/v1/contracts/positions", Status: 200, Duration: 40 * time.Millisecond}, t0)
	s.observe(exchange.RequestInfo{Method: "GET", Route: "/v1/contracts/positions", Status: 503, Duration: 60 * time.Millisecond}, t0.Add(time.Second))
	if got, want := s.Snapshot(), (web.ExchangeStatus{Requests: 2, Errors: 1, LastLatencyMs: 60, AvgLatencyMs: 41,
		LastError: "GET /v1/contracts/positions: Service Unavailable", LastErrorAt: t0.Add(time.Second)}); got != want {
		t.Errorf("after a 503:\n got %+v\nwant %+v", got, want)
	}
	s.observe(exchange.RequestInfo{Method: "POST", Route: "/v1/contracts/positions/{symbol}/leverage", Duration: 1500 * time.Microsecond,
		Err: errors.New("dial tcp: connection refused")}, t0.Add(2*time.Second))
	if got, want := s.Snapshot(), (web.ExchangeStatus{Requests: 3, Errors: 2, LastLatencyMs: 1.5, AvgLatencyMs: 39.025,
		LastError: "POST /v1/contracts/positions/{symbol}/leverage: dial tcp: connection refused", LastErrorAt: t0.Add(2 * time.Second)}); got != want {
		t.Errorf("after a transport error:\n got %+v\nwant %+v", got, want)
	}
}

// The daemon is healthy while its last complete snapshot is at most three
// intervals old, and never less than ten seconds.
func TestHealthMaxAge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ interval, want time.Duration }{
		{100 * time.Millisecond, 10 * time.Second},
		{3 * time.Second, 10 * time.Second},
		{4 * time.Second, 12 * time.Second},
		{time.Minute, 3 * time.Minute},
	} {
		if got := healthMaxAge(tc.interval); got != tc.want {
			t.Errorf("healthMaxAge(%s) = %s, want %s", tc.interval, got, tc.want)
		}
	}
}
