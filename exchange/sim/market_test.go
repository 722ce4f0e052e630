package sim_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

func TestMarketEndpoints(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{Seed: 7})
	// Ten seconds of history for the history-based endpoints.
	for i := 1; i <= 10; i++ {
		v.sim.Step(t0.Add(time.Duration(i) * time.Second))
	}
	v.clock.Set(t0.Add(10 * time.Second))
	btc, _ := v.sim.IndexPrice("BTC")

	tests := []struct {
		path, query string
		check       func(t *testing.T, data json.RawMessage)
	}{
		{"/v1/market/trades", "", func(t *testing.T, data json.RawMessage) {
			var tr exchange.Trades
			mustDecode(t, data, &tr)
			if len(tr.Currencies) != 5 || len(tr.SpotsSymbols) != 3 || len(tr.ContractsSymbols) != 4 {
				t.Errorf("got %d currencies, %d spots, %d contracts", len(tr.Currencies), len(tr.SpotsSymbols), len(tr.ContractsSymbols))
			}
			x := tr.ContractsSymbols[0]
			if x.Name != "XBTC" || x.BaseName != "BTC" || x.Type != "FUTURES" || x.RiskLimit.MaxLeverage != 20 {
				t.Errorf("XBTC = %+v", x)
			}
			wantDec(t, "XBTC maintenanceMarginRate", x.RiskLimit.MaintenanceMarginRate, "0.005")
			// Market decimals are JSON numbers, the risk limit's included.
			for _, frag := range []string{`"maintenanceMarginRate":0.005`, `"quoteMinimumIncrement":0.5`, `"riskLimitBase":2000000`} {
				if !strings.Contains(string(data), frag) {
					t.Errorf("trades lacks %s", frag)
				}
			}
		}},
		{"/v1/market/timestamp", "", func(t *testing.T, data json.RawMessage) {
			var ms int64
			mustDecode(t, data, &ms)
			if want := t0.Add(10 * time.Second).UnixMilli(); ms != want {
				t.Errorf("timestamp = %d, want %d", ms, want)
			}
		}},
		{"/v1/market/ticks/XBTC", q("limit", "3"), func(t *testing.T, data json.RawMessage) {
			var ticks [][2]decimal.Decimal
			mustDecode(t, data, &ticks)
			if len(ticks) != 3 {
				t.Fatalf("got %d ticks, want 3", len(ticks))
			}
			last := ticks[2]
			if last[0].IntPart() != t0.Add(10*time.Second).UnixMilli() || !last[1].Equal(btc) {
				t.Errorf("last tick = %v, want [%d %s]", last, t0.Add(10*time.Second).UnixMilli(), btc)
			}
		}},
		{"/v1/market/prices", "", func(t *testing.T, data json.RawMessage) {
			var p map[string][]decimal.Decimal
			mustDecode(t, data, &p)
			x := p["XBTC"]
			if len(x) != 3 || !x[2].Equal(btc) || !x[0].LessThan(btc) || !x[1].GreaterThan(btc) {
				t.Errorf("XBTC = %v around %s", x, btc)
			}
			if _, ok := p["ETH_USDT"]; !ok || len(p) != 7 {
				t.Errorf("prices = %v, want 7 symbols with ETH_USDT", p)
			}
		}},
		{"/v1/market/bars/XBTC/1m", "", func(t *testing.T, data json.RawMessage) {
			var bars [][6]decimal.Decimal
			mustDecode(t, data, &bars)
			if len(bars) != 1 {
				t.Fatalf("got %d bars, want 1: %s", len(bars), data)
			}
			b := bars[0]
			if b[0].IntPart() != t0.UnixMilli() || !b[4].Equal(btc) || b[5].IntPart() != 11 || b[2].LessThan(b[3]) {
				t.Errorf("bar = %v", b)
			}
		}},
		{"/v1/market/orderBook/XETH", q("depth", "5"), func(t *testing.T, data json.RawMessage) {
			var b struct {
				Time       int64
				Bids, Asks [][2]decimal.Decimal
			}
			mustDecode(t, data, &b)
			if len(b.Bids) != 5 || len(b.Asks) != 5 || !b.Bids[0][0].LessThan(b.Asks[0][0]) || !b.Bids[1][0].LessThan(b.Bids[0][0]) {
				t.Errorf("book = %+v", b)
			}
		}},
		{"/v1/market/indexes", "", func(t *testing.T, data json.RawMessage) {
			var list []struct {
				Name  string
				Price decimal.Decimal
			}
			mustDecode(t, data, &list)
			var names []string
			for _, l := range list {
				names = append(names, l.Name)
			}
			if !slices.Equal(names, []string{"BTC", "DOGE", "ETH", "SOL"}) {
				t.Errorf("names = %v", names)
			}
		}},
		{"/v1/market/indexes/BTC", q("from", "0"), func(t *testing.T, data json.RawMessage) {
			var h [][]decimal.Decimal
			mustDecode(t, data, &h)
			if len(h) != 11 || !h[0][1].Equal(dec("65000")) || h[0][0].IntPart() != t0.UnixMilli() {
				t.Errorf("history = %v, want 11 samples from 65000", h)
			}
		}},
		{"/v1/market/indexes/indexValue", "", func(t *testing.T, data json.RawMessage) {
			var n decimal.Decimal
			mustDecode(t, data, &n)
			if n.LessThan(dec("900")) || n.GreaterThan(dec("1100")) || strings.HasPrefix(string(data), `"`) {
				t.Errorf("indexValue = %s", data)
			}
		}},
		{"/v1/market/indexPrices", "", func(t *testing.T, data json.RawMessage) {
			var p map[string]decimal.Decimal
			mustDecode(t, data, &p)
			if len(p) != 4 || !p["BTC"].Equal(btc) {
				t.Errorf("indexPrices = %v", p)
			}
			if !strings.Contains(string(data), `"BTC":`+btc.String()) {
				t.Errorf("BTC not a JSON number: %s", data)
			}
		}},
		{"/v1/market/errorCodes", "", func(t *testing.T, data json.RawMessage) {
			var codes map[string]string
			mustDecode(t, data, &codes)
			for _, c := range []string{sim.CodeParameterInvalid, sim.CodeAPIKeyInvalid, sim.CodeSignatureInvalid,
				sim.CodeTimestampExpired, sim.CodeSymbolNotFound, sim.CodeIndexNotFound, sim.CodeInsufficientBalance,
				sim.CodeInsufficientMargin, sim.CodeNotFound, sim.CodeMethodNotAllowed, sim.CodeRateLimited,
				sim.CodeInternalError, sim.CodeServiceUnavailable, sim.CodeForbidden} {
				if codes[c] == "" {
					t.Errorf("errorCodes lacks %s", c)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			// Public: no auth headers.
			r := v.do(call{method: http.MethodGet, path: tc.path, query: tc.query, unsigned: true})
			if r.status != http.StatusOK || r.jsonErr != nil || !r.env.Success {
				t.Fatalf("status %d body %s", r.status, r.raw)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			tc.check(t, r.env.Data)
		})
	}
}

func mustDecode(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}

func TestMarketErrors(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	tests := []struct {
		name, path, query string
		status            int
		code, field       string
	}{
		{"unknown symbol ticks", "/v1/market/ticks/NOPE", "", 404, sim.CodeSymbolNotFound, "symbol"},
		{"unknown symbol bars", "/v1/market/bars/NOPE/1m", "", 404, sim.CodeSymbolNotFound, "symbol"},
		{"bad bar type", "/v1/market/bars/XBTC/2m", "", 400, sim.CodeParameterInvalid, "type"},
		{"unknown symbol book", "/v1/market/orderBook/NOPE", "", 404, sim.CodeSymbolNotFound, "symbol"},
		{"bad depth", "/v1/market/orderBook/XBTC", q("depth", "0"), 400, sim.CodeParameterInvalid, "depth"},
		{"unknown index", "/v1/market/indexes/NOPE", "", 404, sim.CodeIndexNotFound, "name"},
		{"bad from", "/v1/market/indexes/BTC", q("from", "yesterday"), 400, sim.CodeParameterInvalid, "from"},
		{"bad limit", "/v1/market/indexes/BTC", q("limit", "5001"), 400, sim.CodeParameterInvalid, "limit"},
		{"from after to", "/v1/market/indexes/BTC", q("from", "10", "to", "5"), 400, sim.CodeParameterInvalid, "from"},
		{"unknown route", "/v1/market/nothing", "", 404, sim.CodeNotFound, ""},
		{"trailing slash", "/v1/market/trades/", "", 404, sim.CodeNotFound, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, v.do(call{method: http.MethodGet, path: tc.path, query: tc.query, unsigned: true}), tc.status, tc.code, tc.field)
		})
	}
	t.Run("wrong method", func(t *testing.T) {
		r := v.do(call{method: http.MethodPost, path: "/v1/market/trades", unsigned: true})
		wantError(t, r, http.StatusMethodNotAllowed, sim.CodeMethodNotAllowed, "")
		r = v.do(call{method: http.MethodGet, path: "/v1/contracts/positions/XBTC/settings"})
		wantError(t, r, http.StatusMethodNotAllowed, sim.CodeMethodNotAllowed, "")
	})
}

func TestHistoryWindow(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	// Three minutes of 1 s samples: 181 of them.
	v.sim.Step(t0.Add(3 * time.Minute))
	v.clock.Set(t0.Add(3 * time.Minute))
	ms := func(d time.Duration) string { return decimal.NewFromInt(t0.Add(d).UnixMilli()).String() }
	tests := []struct {
		name, path, query string
		want              int
		first             time.Duration
	}{
		{"latest by default", "/v1/market/indexes/ETH", q("limit", "10"), 10, 171 * time.Second},
		{"earliest from from", "/v1/market/indexes/ETH", q("from", ms(0), "limit", "10"), 10, 0},
		{"window", "/v1/market/indexes/ETH", q("from", ms(5*time.Second), "to", ms(9*time.Second)), 5, 5 * time.Second},
		{"all", "/v1/market/indexes/ETH", "", 181, 0},
		{"bars 1m", "/v1/market/bars/XETH/1m", "", 4, 0},
		{"bars 1m last two", "/v1/market/bars/XETH/1m", q("limit", "2"), 2, 2 * time.Minute},
		{"bars from", "/v1/market/bars/XETH/1m", q("from", ms(time.Minute+30*time.Second)), 3, time.Minute},
		{"bars 1h", "/v1/market/bars/XETH/1h", "", 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rows [][]decimal.Decimal
			v.ok(call{method: http.MethodGet, path: tc.path, query: tc.query, unsigned: true}, &rows)
			if len(rows) != tc.want {
				t.Fatalf("got %d rows, want %d", len(rows), tc.want)
			}
			if got, want := rows[0][0].IntPart(), t0.Add(tc.first).UnixMilli(); got != want {
				t.Errorf("first time = %d, want %d", got, want)
			}
		})
	}
}

// TestHistoryLimit: each index keeps at most Config.HistoryLimit samples,
// the latest ones, whether its path or SetIndexPrice moves it. A full history
// drops its oldest quarter, so it holds between 3/4 of the limit and the
// limit.
func TestHistoryLimit(t *testing.T) {
	t.Parallel()
	// One sample at the start and one per step: 11.
	tests := []struct {
		limit, want int
	}{
		{limit: 1, want: 1},
		{limit: 4, want: 4},  // 4, then 3+1 at every later sample
		{limit: 8, want: 7},  // 8, 6+1, 7+1, 6+1
		{limit: 0, want: 11}, // the default keeps them all
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, sim.Config{Seed: 7, HistoryLimit: tc.limit})
			for i := 1; i <= 10; i++ {
				v.sim.Step(t0.Add(time.Duration(i) * time.Second))
			}
			v.clock.Set(t0.Add(10 * time.Second))
			v.sim.SetIndexPrice("BTC", dec("1")) // the last step's millisecond: replaces its sample
			var h [][]decimal.Decimal
			v.get("/v1/market/indexes/BTC", q("from", "0"), &h)
			if len(h) != tc.want {
				t.Fatalf("got %d samples, want %d", len(h), tc.want)
			}
			for i, s := range h {
				if want := t0.Add(time.Duration(11-tc.want+i) * time.Second).UnixMilli(); s[0].IntPart() != want {
					t.Errorf("sample %d at %s, want %d: %v", i, s[0], want, h)
				}
			}
			if last := h[len(h)-1]; !last[1].Equal(dec("1")) {
				t.Errorf("last sample = %v, want the price just set", last)
			}
		})
	}
}
