package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
)

func TestFaults(t *testing.T) {
	t.Parallel()
	const prices = "/v1/market/indexPrices"
	tests := []struct {
		name  string
		route string
		fault sim.Fault
		check func(t *testing.T, r reply)
	}{
		{"status 500", prices, sim.Fault{Status: 500}, func(t *testing.T, r reply) {
			wantError(t, r, 500, sim.CodeInternalError, "")
		}},
		{"status 503", "*", sim.Fault{Status: 503}, func(t *testing.T, r reply) {
			wantError(t, r, 503, sim.CodeServiceUnavailable, "")
		}},
		{"rate limited", prices, sim.Fault{RetryAfter: 1500 * time.Millisecond}, func(t *testing.T, r reply) {
			wantError(t, r, 429, sim.CodeRateLimited, "")
			if got := r.header.Get("Retry-After"); got != "2" {
				t.Errorf("Retry-After = %q, want 2", got)
			}
		}},
		{"custom body", prices, sim.Fault{Status: 400, Body: `{"success":false,"error":"X"}`}, func(t *testing.T, r reply) {
			if r.status != 400 || r.env.Error != "X" {
				t.Errorf("status %d body %s", r.status, r.raw)
			}
		}},
		{"malformed", prices, sim.Fault{Malformed: true}, func(t *testing.T, r reply) {
			if r.status != 200 || r.jsonErr == nil {
				t.Errorf("status %d, body %q decodes", r.status, r.raw)
			}
		}},
		{"html", prices, sim.Fault{HTML: true}, func(t *testing.T, r reply) {
			if r.status != 502 || r.header.Get("Content-Type") != "text/html" || r.jsonErr == nil {
				t.Errorf("status %d type %q body %s", r.status, r.header.Get("Content-Type"), r.raw)
			}
		}},
		{"concrete path", "/v1/market/ticks/XBTC", sim.Fault{Status: 500}, func(t *testing.T, r reply) {
			if r.status != 200 {
				t.Errorf("a fault on another path hit %s: %d", prices, r.status)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, sim.Config{})
			v.sim.InjectFault(tc.route, tc.fault)
			tc.check(t, v.do(call{method: http.MethodGet, path: prices, unsigned: true}))
			v.sim.ClearFaults()
			v.ok(call{method: http.MethodGet, path: prices, unsigned: true}, nil)
		})
	}
}

func TestFaultTimes(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.InjectFault("/v1/contracts/positions/{symbol}/settings", sim.Fault{Status: 502, Times: 2})
	var statuses []int
	for range 3 {
		r := v.do(call{method: http.MethodPost, path: settingsOf("XSOL"), body: `{"cross":false,"leverage":10}`})
		statuses = append(statuses, r.status)
	}
	if statuses[0] != 502 || statuses[1] != 502 || statuses[2] != 200 {
		t.Errorf("statuses = %v, want [502 502 200]", statuses)
	}
	// The failed calls did not change the position.
	if p, _ := v.sim.Position("XSOL"); p.Version != 2 || p.Leverage != 10 {
		t.Errorf("position = %+v", p)
	}
	// Times 0: until cleared.
	v.sim.InjectFault("*", sim.Fault{Status: 500})
	for range 3 {
		if r := v.do(call{method: http.MethodGet, path: "/v1/contracts/positions"}); r.status != 500 {
			t.Errorf("status = %d, want 500", r.status)
		}
	}
	v.sim.ClearFaults()
	v.ok(call{method: http.MethodGet, path: "/v1/contracts/positions"}, nil)
}

func TestFaultStale(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	read := func() map[string]json.Number {
		var m map[string]json.Number
		v.ok(call{method: http.MethodGet, path: "/v1/market/indexPrices", unsigned: true}, &m)
		return m
	}
	first := read()
	v.sim.InjectFault("/v1/market/indexPrices", sim.Fault{Stale: true, Times: 2})
	v.sim.SetIndexPrice("BTC", dec("50000"))
	for range 2 {
		if got := read(); got["BTC"] != first["BTC"] {
			t.Errorf("stale BTC = %s, want the frozen %s", got["BTC"], first["BTC"])
		}
	}
	if got := read(); got["BTC"] != "50000" {
		t.Errorf("BTC = %s after the fault, want 50000", got["BTC"])
	}

	// Stale private data: the positions of before the liquidation.
	v.get("/v1/contracts/positions", "", nil)
	v.sim.InjectFault("/v1/contracts/positions", sim.Fault{Stale: true})
	v.sim.SetIndexPrice("SOL", dec("100"))
	var ps []struct{ Empty bool }
	v.get("/v1/contracts/positions", "", &ps)
	if ps[2].Empty {
		t.Errorf("stale positions show the liquidation")
	}
	// Auth still applies to a stale answer.
	wantError(t, v.do(call{method: http.MethodGet, path: "/v1/contracts/positions", secret: "x"}), 401, sim.CodeSignatureInvalid, "API-Signature")
}

func TestFaultTruncated(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.InjectFault("/v1/contracts/orders/{symbol}/cancel", sim.Fault{Truncated: true, Times: 1})
	req, _ := http.NewRequest(http.MethodPost, v.srv.URL+"/v1/contracts/orders/XBTC/cancel", nil)
	req.Header.Set("Content-Type", "application/json")
	sign(req, call{})
	res, err := v.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(res.Body)
	res.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read error = %v, want unexpected EOF", err)
	}
	// The request was processed: the orders are gone, the answer lost.
	if n := v.sim.OpenOrders("XBTC"); n != 0 {
		t.Errorf("open orders = %d, want 0", n)
	}
}

func TestFaultLatency(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.InjectFault("/v1/market/timestamp", sim.Fault{Latency: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, v.srv.URL+"/v1/market/timestamp", nil)
	_, err := v.srv.Client().Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline", err)
	}
	// The handler gives up with the client: otherwise the server's Close
	// in the test cleanup would wait an hour.

	// A short latency delays and then answers normally.
	v.sim.InjectFault("/v1/market/timestamp", sim.Fault{Latency: 30 * time.Millisecond, Times: 1})
	began := time.Now()
	v.ok(call{method: http.MethodGet, path: "/v1/market/timestamp", unsigned: true}, nil)
	if d := time.Since(began); d < 30*time.Millisecond {
		t.Errorf("answered in %s, want at least 30ms", d)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				switch (g + i) % 4 {
				case 0:
					v.do(call{method: http.MethodGet, path: "/v1/contracts/positions"})
				case 1:
					v.do(call{method: http.MethodGet, path: "/v1/market/indexPrices", unsigned: true})
				case 2:
					v.do(call{method: http.MethodPost, path: settingsOf("XETH"), body: `{"cross":false,"leverage":19}`})
				default:
					v.sim.Step(t0.Add(time.Duration(g*20+i) * time.Second))
					v.sim.Positions()
				}
			}
		}()
	}
	wg.Wait()
	if n := len(v.sim.Calls()); n != 120 {
		t.Errorf("%d calls logged, want 120", n)
	}
}

func TestFaultOnEveryRoute(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	concrete := map[string]string{
		"{symbol}": "XBTC",
		"{type}":   "1m",
		"{name}":   "BTC",
	}
	for _, route := range v.sim.Routes() {
		t.Run(route, func(t *testing.T) {
			path := route
			for k, val := range concrete {
				path = strings.ReplaceAll(path, k, val)
			}
			method := http.MethodGet
			body := ""
			if strings.HasSuffix(route, "/settings") || strings.HasSuffix(route, "/cancel") {
				method, body = http.MethodPost, `{"cross":true,"leverage":10}`
				if strings.HasSuffix(route, "/cancel") {
					body = "{}"
				}
			}
			if strings.HasSuffix(route, "/create") {
				method, body = http.MethodPost, `{"side":"SELL","type":"MARKET","quantity":"0.001","flags":24}`
			}
			query := ""
			if route == "/v1/contracts/orders/closed" {
				query = q("range", "202611")
			}
			c := call{method: method, path: path, query: query, body: body}
			v.ok(c, nil)
			v.sim.InjectFault(route, sim.Fault{Status: http.StatusServiceUnavailable, Times: 1})
			wantError(t, v.do(c), http.StatusServiceUnavailable, sim.CodeServiceUnavailable, "")
			v.ok(c, nil)
		})
	}
}

// Single-item faults: one element of a real answer corrupted, a valid
// empty answer, a settings call answered as if applied but not applied.
func TestFaultItems(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	var whole []map[string]any
	v.get("/v1/contracts/positions", "", &whole)

	v.sim.InjectFault("/v1/contracts/positions", sim.Fault{Item: &sim.ItemFault{Path: "1.riskLevel", Value: `"x"`}, Times: 1})
	var one []map[string]any
	v.get("/v1/contracts/positions", "", &one)
	if len(one) != len(whole) || one[1]["riskLevel"] != "x" || one[0]["riskLevel"] != whole[0]["riskLevel"] {
		t.Errorf("item fault: got %v, want only the second riskLevel changed of %v", one, whole)
	}

	v.sim.InjectFault("/v1/market/indexPrices", sim.Fault{Item: &sim.ItemFault{Path: "ETH", Value: `"NaN"`}, Times: 1})
	var prices map[string]any
	v.ok(call{method: http.MethodGet, path: "/v1/market/indexPrices", unsigned: true}, &prices)
	if prices["ETH"] != "NaN" || prices["BTC"] == "NaN" || prices["BTC"] == nil {
		t.Errorf("index prices = %v, want ETH NaN and BTC as it is", prices)
	}

	v.sim.InjectFault("/v1/contracts/positions", sim.Fault{Empty: true, Times: 1})
	var none []map[string]any
	v.get("/v1/contracts/positions", "", &none)
	if none == nil || len(none) != 0 {
		t.Errorf("empty fault: %v, want []", none)
	}
	v.get("/v1/contracts/positions", "", &none)
	if len(none) != len(whole) {
		t.Errorf("after the one empty answer: %d positions, want %d", len(none), len(whole))
	}

	before, _ := v.sim.Position("XSOL")
	v.sim.InjectFault(settingsOf("XSOL"), sim.Fault{NotApplied: true})
	var got struct{ Leverage int }
	v.ok(call{method: http.MethodPost, path: settingsOf("XSOL"), body: `{"cross":false,"leverage":3}`}, &got)
	if after, _ := v.sim.Position("XSOL"); got.Leverage != before.Leverage || after.Leverage != before.Leverage {
		t.Errorf("not applied: answered %d, position %d, want both %d", got.Leverage, after.Leverage, before.Leverage)
	}
}

func TestFaultEvery(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.InjectFault("/v1/contracts/positions", sim.Fault{Empty: true, Every: 3})
	var sizes []int
	for range 6 {
		var ps []map[string]any
		v.get("/v1/contracts/positions", "", &ps)
		sizes = append(sizes, len(ps))
	}
	if sizes[0] == 0 || sizes[1] == 0 || sizes[2] != 0 || sizes[3] == 0 || sizes[4] == 0 || sizes[5] != 0 {
		t.Errorf("positions per call = %v, want every third empty", sizes)
	}
}

// LeaveOutEmpty lists the open positions only: a liquidated one is no
// longer listed, rather than listed empty.
func TestLeaveOutEmptyFault(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.SetIndexPrice("SOL", dec("144.5")) // XSOL liquidated
	count := func() (open, empty int) {
		var ps []struct {
			Empty bool `json:"empty"`
		}
		v.get("/v1/contracts/positions", "", &ps)
		for _, p := range ps {
			if p.Empty {
				empty++
			} else {
				open++
			}
		}
		return open, empty
	}
	if open, empty := count(); empty == 0 {
		t.Fatalf("without the fault: %d open, %d empty; want XSOL listed empty", open, empty)
	}
	v.sim.InjectFault("/v1/contracts/positions", sim.Fault{LeaveOutEmpty: true})
	if open, empty := count(); empty != 0 || open == 0 {
		t.Fatalf("with the fault: %d open, %d empty; want the open ones only", open, empty)
	}
}
