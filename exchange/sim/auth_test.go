package sim_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

func TestAuthentication(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	closed := "/v1/contracts/orders/closed"
	query := "range=202611&offsetId=0&limit=5"
	tests := []struct {
		name  string
		c     call
		code  string
		field string
	}{
		{name: "valid GET", c: call{method: http.MethodGet, path: closed, query: query}},
		{name: "valid POST", c: call{method: http.MethodPost, path: "/v1/contracts/orders/XBTC/cancel", body: "{}"}},
		{name: "timestamp 59s behind", c: call{method: http.MethodGet, path: closed, query: query, at: t0.Add(-59 * time.Second)}},
		{name: "timestamp 59s ahead", c: call{method: http.MethodGet, path: closed, query: query, at: t0.Add(59 * time.Second)}},
		{name: "header names in lower case", c: call{method: http.MethodGet, path: "/v1/contracts/positions", edit: func(r *http.Request) {
			for _, h := range []string{exchange.HeaderKey, exchange.HeaderSignature} {
				val := r.Header.Get(h)
				r.Header.Del(h)
				r.Header[lower(h)] = []string{val}
			}
		}}},
		{name: "no auth headers", c: call{method: http.MethodGet, path: closed, query: query, unsigned: true},
			code: sim.CodeAPIKeyInvalid, field: exchange.HeaderKey},
		{name: "unknown key", c: call{method: http.MethodGet, path: closed, query: query, key: "other-key"},
			code: sim.CodeAPIKeyInvalid, field: exchange.HeaderKey},
		{name: "missing signature", c: call{method: http.MethodGet, path: closed, query: query,
			edit: func(r *http.Request) { r.Header.Del(exchange.HeaderSignature) }},
			code: sim.CodeAPIKeyInvalid, field: exchange.HeaderSignature},
		{name: "wrong secret", c: call{method: http.MethodGet, path: closed, query: query, secret: "guess"},
			code: sim.CodeSignatureInvalid, field: exchange.HeaderSignature},
		{name: "query changed after signing", c: call{method: http.MethodGet, path: closed, query: query,
			edit: func(r *http.Request) { r.URL.RawQuery = "range=202611&offsetId=0&limit=6" }},
			code: sim.CodeSignatureInvalid, field: exchange.HeaderSignature},
		{name: "body changed after signing", c: call{method: http.MethodPost, path: "/v1/contracts/positions/XBTC/settings",
			body: `{"cross":true,"leverage":10}`, edit: func(r *http.Request) {
				r.Body = http.NoBody
				r.ContentLength = 0
			}},
			code: sim.CodeSignatureInvalid, field: exchange.HeaderSignature},
		{name: "unsupported method", c: call{method: http.MethodGet, path: closed, query: query,
			edit: func(r *http.Request) { r.Header.Set(exchange.HeaderSignatureMethod, "HmacSHA1") }},
			code: sim.CodeSignatureInvalid, field: exchange.HeaderSignatureMethod},
		{name: "unsupported version", c: call{method: http.MethodGet, path: closed, query: query,
			edit: func(r *http.Request) { r.Header.Set(exchange.HeaderSignatureVersion, "2") }},
			code: sim.CodeSignatureInvalid, field: exchange.HeaderSignatureVersion},
		{name: "timestamp 61s behind", c: call{method: http.MethodGet, path: closed, query: query, at: t0.Add(-61 * time.Second)},
			code: sim.CodeTimestampExpired, field: exchange.HeaderTimestamp},
		{name: "timestamp 61s ahead", c: call{method: http.MethodGet, path: closed, query: query, at: t0.Add(61 * time.Second)},
			code: sim.CodeTimestampExpired, field: exchange.HeaderTimestamp},
		{name: "timestamp in seconds", c: call{method: http.MethodGet, path: closed, query: query,
			edit: func(r *http.Request) { r.Header.Set(exchange.HeaderTimestamp, "1763700000.5") }},
			code: sim.CodeTimestampExpired, field: exchange.HeaderTimestamp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := v.do(tc.c)
			if tc.code == "" {
				if r.status != http.StatusOK || !r.env.Success {
					t.Fatalf("status %d body %s", r.status, r.raw)
				}
				return
			}
			wantError(t, r, http.StatusUnauthorized, tc.code, tc.field)
		})
	}
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func TestSpecVectorsVerify(t *testing.T) {
	t.Parallel()
	// The two signatures of issue 2, computed from the spec, are accepted
	// by an exchange with that key pair, host and clock.
	at := time.UnixMilli(1763700000000)
	v := newEnv(t, sim.Config{Key: "k-123", Secret: "s3cret", Now: func() time.Time { return at }})
	tests := []struct {
		method, path, query, body, sig string
	}{
		{http.MethodGet, "/v1/contracts/orders/closed", "range=202611&offsetId=0&limit=50", "",
			"50f9a7e4e0255d1018ada2b2ca4790457e4db68346c06dd359b1c3448a3e9a5d"},
		{http.MethodPost, "/v1/contracts/positions/XBTC/settings", "", `{"cross":false,"leverage":5}`,
			"d48b6d75370fa9c8ce04ef78af88d9f857a8fb1865f72404baffa268960c3e01"},
	}
	for _, tc := range tests {
		t.Run(tc.method, func(t *testing.T) {
			r := v.do(call{method: tc.method, path: tc.path, query: tc.query, body: tc.body, unsigned: true,
				edit: func(r *http.Request) {
					r.Host = "api.example.com:443"
					r.Header.Set(exchange.HeaderKey, "k-123")
					r.Header.Set(exchange.HeaderSignatureMethod, exchange.SignatureMethod)
					r.Header.Set(exchange.HeaderSignatureVersion, exchange.SignatureVersion)
					r.Header.Set(exchange.HeaderTimestamp, "1763700000000")
					r.Header.Set(exchange.HeaderSignature, tc.sig)
				}})
			if r.status != http.StatusOK {
				t.Fatalf("status %d body %s", r.status, r.raw)
			}
		})
	}
}

func TestPostContentType(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	tests := []struct {
		contentType string
		ok          bool
	}{
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"-", false},
		{"text/plain", false},
		{"application/x-www-form-urlencoded", false},
	}
	for _, tc := range tests {
		t.Run(tc.contentType, func(t *testing.T) {
			r := v.do(call{method: http.MethodPost, path: "/v1/contracts/orders/XBTC/cancel", body: "{}", contentType: tc.contentType})
			if tc.ok {
				if r.status != http.StatusOK {
					t.Fatalf("status %d body %s", r.status, r.raw)
				}
				return
			}
			wantError(t, r, http.StatusUnsupportedMediaType, sim.CodeParameterInvalid, "Content-Type")
		})
	}
}

func TestClockOffset(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.SetClockOffset(5 * time.Minute)
	var ms int64
	v.ok(call{method: http.MethodGet, path: "/v1/market/timestamp", unsigned: true}, &ms)
	if want := t0.Add(5 * time.Minute).UnixMilli(); ms != want {
		t.Fatalf("timestamp = %d, want %d", ms, want)
	}
	// A client that signs with its own clock is five minutes off…
	r := v.do(call{method: http.MethodGet, path: "/v1/contracts/positions"})
	wantError(t, r, http.StatusUnauthorized, sim.CodeTimestampExpired, exchange.HeaderTimestamp)
	// …and one that applies the measured offset is accepted.
	v.ok(call{method: http.MethodGet, path: "/v1/contracts/positions", at: time.UnixMilli(ms)}, nil)
	v.sim.SetClockOffset(0)
	v.ok(call{method: http.MethodGet, path: "/v1/contracts/positions"}, nil)
}

// A key without a permission (Config.Forbidden): its route answers 403
// FORBIDDEN before the request is looked at, and changes nothing; a
// wrong signature is still 401, and the other routes answer as ever. A
// route the exchange does not serve signed is refused by New.
func TestForbiddenRoutes(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{Forbidden: []string{exchange.DefaultOrderPath, exchange.RouteSettings}})
	before, _ := v.sim.Position("XSOL")
	for _, c := range []struct {
		name   string
		c      call
		status int
		code   string
	}{
		{"order", call{method: http.MethodPost, path: "/v1/contracts/orders/XSOL/create", body: `{"side":"SELL","type":"MARKET","quantity":"1","flags":24}`},
			http.StatusForbidden, sim.CodeForbidden},
		{"settings", call{method: http.MethodPost, path: "/v1/contracts/positions/XSOL/settings", body: `{"cross":false,"leverage":10}`},
			http.StatusForbidden, sim.CodeForbidden},
		{"settings, wrong secret", call{method: http.MethodPost, path: "/v1/contracts/positions/XSOL/settings", body: `{"cross":false,"leverage":10}`, secret: "guess"},
			http.StatusUnauthorized, sim.CodeSignatureInvalid},
		{"cancel", call{method: http.MethodPost, path: "/v1/contracts/orders/XSOL/cancel"}, http.StatusOK, ""},
	} {
		r := v.do(c.c)
		if r.status != c.status || r.env.Error != c.code {
			t.Errorf("%s: %d %s, want %d %s: %s", c.name, r.status, r.env.Error, c.status, c.code, r.raw)
		}
	}
	if after, _ := v.sim.Position("XSOL"); after.Leverage != before.Leverage || !after.Quantity.Equal(before.Quantity) {
		t.Errorf("XSOL changed: %dx %s → %dx %s", before.Leverage, before.Quantity, after.Leverage, after.Quantity)
	}
	for _, route := range []string{"/v1/market/trades", "/v1/contracts/orders/{symbol}/delete"} {
		if _, err := sim.New(sim.Config{Key: "k", Secret: "s", Forbidden: []string{route}}); err == nil || !strings.Contains(err.Error(), "not a private route the exchange serves") {
			t.Errorf("Forbidden %s: %v", route, err)
		}
	}
}
