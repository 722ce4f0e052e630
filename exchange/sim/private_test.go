package sim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

const settingsPath = "/v1/contracts/positions/%s/settings"

func settingsOf(sym string) string { return strings.Replace(settingsPath, "%s", sym, 1) }

func TestPositionsListing(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	r := v.do(call{method: http.MethodGet, path: "/v1/contracts/positions"})
	if r.status != http.StatusOK {
		t.Fatalf("status %d body %s", r.status, r.raw)
	}
	// Private decimals are JSON strings, the risk limit's included.
	for _, frag := range []string{`"entryValue":"51360"`, `"liquidationPrice":"33101"`, `"maintenanceMarginRate":"0.005"`,
		`"id":"1_101"`, `"direction":"SHORT"`, `"empty":true`} {
		if !strings.Contains(string(r.env.Data), frag) {
			t.Errorf("positions lack %s: %s", frag, r.env.Data)
		}
	}
	var ps []exchange.Position
	mustDecode(t, r.env.Data, &ps)
	if len(ps) != 4 {
		t.Fatalf("got %d positions, want 4", len(ps))
	}
	want := []struct {
		symbolID                int64
		direction               string
		leverage, maxLeverage   int
		cross, empty            bool
		margin, liq, entryValue string
		riskLevel               int
	}{
		{101, exchange.Long, 10, 20, true, false, "5136", "33101", "51360", 1},
		{102, exchange.Short, 20, 25, false, false, "1830", "3172", "36600", 16},
		{103, exchange.Long, 15, 10, false, false, "4053.33333333", "144.907", "60800", 38},
		{104, exchange.Long, 3, 5, false, true, "0", "0", "0", 0},
	}
	for i, w := range want {
		p := ps[i]
		if p.SymbolID != w.symbolID || p.Direction != w.direction || p.Leverage != w.leverage ||
			p.RiskLimit.MaxLeverage != w.maxLeverage || p.Cross != w.cross || p.Empty != w.empty || p.RiskLevel != w.riskLevel {
			t.Errorf("position %d = %+v", i, p)
		}
		wantDec(t, "margin", p.Margin, w.margin)
		wantDec(t, "liquidationPrice", p.LiquidationPrice, w.liq)
		wantDec(t, "entryValue", p.EntryValue, w.entryValue)
	}
	// The HTTP view and the Go view agree.
	direct := v.sim.Positions()
	for i := range ps {
		if !ps[i].Margin.Equal(direct[i].Margin) || ps[i].Version != direct[i].Version || ps[i].UpdatedAt != direct[i].UpdatedAt {
			t.Errorf("position %d: HTTP %+v, Positions() %+v", i, ps[i], direct[i])
		}
	}
}

func TestSpotBalances(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	var bs []struct {
		Currency          string
		Available, Frozen decimal.Decimal
	}
	v.get("/v1/spots/balances", "", &bs)
	if len(bs) != 5 || bs[0].Currency != "USDT" || !bs[0].Available.Equal(dec("25000")) || !bs[4].Available.IsZero() {
		t.Errorf("balances = %+v", bs)
	}
}

// settingsReply posts settings and decodes the position.
func settingsReply(t *testing.T, v *env, sym, body string) (reply, exchange.Position) {
	t.Helper()
	r := v.do(call{method: http.MethodPost, path: settingsOf(sym), body: body})
	var p exchange.Position
	if r.status == http.StatusOK {
		mustDecode(t, r.env.Data, &p)
	}
	return r, p
}

func TestSettingsRecompute(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, symbol, body string
		// expected position and free balance after
		leverage             int
		cross                bool
		margin, liq, balance string
		version              int64
	}{
		{name: "lower isolated long's leverage: liquidation moves down", symbol: "XSOL", body: `{"cross":false,"leverage":10}`,
			leverage: 10, margin: "6080", liq: "139.84", balance: "17973.33333333", version: 2},
		{name: "raise isolated short's leverage releases margin", symbol: "XETH", body: `{"cross":false,"leverage":25}`,
			leverage: 25, margin: "1464", liq: "3141.5", balance: "20366", version: 2},
		{name: "lower isolated short's leverage: liquidation moves up", symbol: "XETH", body: `{"cross":false,"leverage":10}`,
			leverage: 10, margin: "3660", liq: "3324.5", balance: "18170", version: 2},
		// XSOL joins XBTC's cross pool: free 17,973.33 + margins 6,080 and
		// 5,136 + XBTC's PNL 0.8·(65,000 − 64,200) = 640, less the
		// maintenance margins 1,216 and 256.8: 152 − 28,356.53/400.
		{name: "isolated to cross moves liquidation away", symbol: "XSOL", body: `{"cross":true,"leverage":10}`,
			leverage: 10, cross: true, margin: "6080", liq: "81.109", balance: "17973.33333333", version: 2},
		{name: "cross leverage leaves the cross liquidation price", symbol: "XBTC", body: `{"cross":true,"leverage":5}`,
			leverage: 5, cross: true, margin: "10272", liq: "33101", balance: "14864", version: 2},
		{name: "cross to isolated brings liquidation closer", symbol: "XBTC", body: `{"cross":false,"leverage":10}`,
			leverage: 10, margin: "5136", liq: "58101", balance: "20000", version: 2},
		{name: "same values are a no-op", symbol: "XETH", body: `{"cross":false,"leverage":20}`,
			leverage: 20, margin: "1830", liq: "3172", balance: "20000", version: 1},
		{name: "current leverage above the limit is kept", symbol: "XSOL", body: `{"cross":false,"leverage":15}`,
			leverage: 15, margin: "4053.33333333", liq: "144.907", balance: "20000", version: 1},
		{name: "empty position", symbol: "XDOGE", body: `{"cross":true,"leverage":5}`,
			leverage: 5, cross: true, margin: "0", liq: "0", balance: "20000", version: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, sim.Config{})
			v.clock.Set(t0.Add(time.Minute))
			r, p := settingsReply(t, v, tc.symbol, tc.body)
			if r.status != http.StatusOK {
				t.Fatalf("status %d body %s", r.status, r.raw)
			}
			if p.Leverage != tc.leverage || p.Cross != tc.cross || p.Version != tc.version {
				t.Errorf("leverage %d cross %v version %d, want %d %v %d", p.Leverage, p.Cross, p.Version, tc.leverage, tc.cross, tc.version)
			}
			wantDec(t, "margin", p.Margin, tc.margin)
			wantDec(t, "liquidationPrice", p.LiquidationPrice, tc.liq)
			wantDec(t, "balance", v.sim.Balance(), tc.balance)
			wantUpdated := t0.UnixMilli()
			if tc.version > 1 {
				wantUpdated = t0.Add(time.Minute).UnixMilli()
			}
			if p.UpdatedAt != wantUpdated {
				t.Errorf("updatedAt = %d, want %d", p.UpdatedAt, wantUpdated)
			}
			// The response is what the exchange now holds.
			held, _ := v.sim.Position(tc.symbol)
			if !held.LiquidationPrice.Equal(p.LiquidationPrice) || held.Version != p.Version {
				t.Errorf("held %+v, answered %+v", held, p)
			}
			// Idempotent: the same call again changes nothing.
			_, again := settingsReply(t, v, tc.symbol, tc.body)
			if again.Version != p.Version || !again.Margin.Equal(p.Margin) {
				t.Errorf("repeat: version %d margin %s, want %d %s", again.Version, again.Margin, p.Version, p.Margin)
			}
		})
	}
}

func TestSettingsMovesCrossPositions(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	// Lowering XSOL's leverage takes 2026.67 from the free balance, which
	// backs the cross XBTC position: its liquidation price moves up.
	settingsReply(t, v, "XSOL", `{"cross":false,"leverage":10}`)
	p, _ := v.sim.Position("XBTC")
	// 64200 − (5136 + 17973.33333333 − 256.8)/0.8, rounded up to 0.1
	wantDec(t, "XBTC liquidationPrice", p.LiquidationPrice, "35634.4")
	if p.Version != 2 {
		t.Errorf("XBTC version = %d, want 2", p.Version)
	}
}

func TestSettingsRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, symbol, body string
		setup              func(v *env)
		status             int
		code, field        string
	}{
		{"unknown symbol", "XNOPE", `{"cross":false,"leverage":5}`, nil, 404, sim.CodeSymbolNotFound, "symbol"},
		{"spot symbol", "BTC_USDT", `{"cross":false,"leverage":5}`, nil, 404, sim.CodeSymbolNotFound, "symbol"},
		{"leverage 0", "XBTC", `{"cross":true,"leverage":0}`, nil, 400, sim.CodeParameterInvalid, "leverage"},
		{"leverage negative", "XBTC", `{"cross":true,"leverage":-3}`, nil, 400, sim.CodeParameterInvalid, "leverage"},
		{"leverage above max", "XBTC", `{"cross":true,"leverage":21}`, nil, 400, sim.CodeParameterInvalid, "leverage"},
		{"raise above lowered limit", "XSOL", `{"cross":false,"leverage":16}`, nil, 400, sim.CodeParameterInvalid, "leverage"},
		{"leverage not an integer", "XBTC", `{"cross":true,"leverage":2.5}`, nil, 400, sim.CodeParameterInvalid, "leverage"},
		{"leverage a string", "XBTC", `{"cross":true,"leverage":"5"}`, nil, 400, sim.CodeParameterInvalid, "leverage"},
		{"cross a string", "XBTC", `{"cross":"true","leverage":5}`, nil, 400, sim.CodeParameterInvalid, "cross"},
		{"missing cross", "XBTC", `{"leverage":5}`, nil, 400, sim.CodeParameterInvalid, "cross"},
		{"missing leverage", "XBTC", `{"cross":true}`, nil, 400, sim.CodeParameterInvalid, "leverage"},
		{"unknown field", "XBTC", `{"cross":true,"leverage":5,"margin":1}`, nil, 400, sim.CodeParameterInvalid, "margin"},
		{"not JSON", "XBTC", `cross=true`, nil, 400, sim.CodeParameterInvalid, "body"},
		{"trailing data", "XBTC", `{"cross":true,"leverage":5}{}`, nil, 400, sim.CodeParameterInvalid, "body"},
		{"empty body", "XBTC", ``, nil, 400, sim.CodeParameterInvalid, "body"},
		{"insufficient balance", "XETH", `{"cross":false,"leverage":2}`,
			func(v *env) { v.sim.SetBalance(dec("100")) }, 400, sim.CodeInsufficientBalance, "leverage"},
		{"isolating would liquidate", "XBTC", `{"cross":false,"leverage":10}`,
			func(v *env) { v.sim.SetIndexPrice("BTC", dec("58000")) }, 400, sim.CodeInsufficientMargin, "cross"},
		{"raising leverage would liquidate", "XETH", `{"cross":false,"leverage":25}`,
			func(v *env) { v.sim.SetIndexPrice("ETH", dec("3150")) }, 400, sim.CodeInsufficientMargin, "leverage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, sim.Config{})
			if tc.setup != nil {
				tc.setup(v)
			}
			before := v.sim.Positions()
			balance := v.sim.Balance()
			r, _ := settingsReply(t, v, tc.symbol, tc.body)
			wantError(t, r, tc.status, tc.code, tc.field)
			after := v.sim.Positions()
			for i := range before {
				if before[i].Version != after[i].Version || !before[i].Margin.Equal(after[i].Margin) {
					t.Errorf("a rejected call changed %s: %+v", after[i].ID, after[i])
				}
			}
			if !v.sim.Balance().Equal(balance) {
				t.Errorf("balance %s, want %s", v.sim.Balance(), balance)
			}
		})
	}
}

func TestSettingsCreatesPosition(t *testing.T) {
	t.Parallel()
	sc := sim.DefaultScenario()
	sc.Positions = sc.Positions[:1]
	v := newEnv(t, sim.Config{Scenario: sc})
	_, p := settingsReply(t, v, "XETH", `{"cross":true,"leverage":7}`)
	if !p.Empty || p.Leverage != 7 || !p.Cross || p.SymbolID != 102 || p.ID != "1_102" {
		t.Errorf("position = %+v", p)
	}
	if len(v.sim.Positions()) != 2 {
		t.Errorf("positions = %d, want 2", len(v.sim.Positions()))
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	type cancelled struct {
		Symbol    string
		Cancelled int
	}
	var got cancelled
	v.post("/v1/contracts/orders/XSOL/cancel", "", &got)
	if got != (cancelled{"XSOL", 5}) || v.sim.OpenOrders("XSOL") != 0 {
		t.Fatalf("first cancel = %+v, open orders %d", got, v.sim.OpenOrders("XSOL"))
	}
	v.post("/v1/contracts/orders/XSOL/cancel", "{}", &got)
	if got.Cancelled != 0 {
		t.Errorf("second cancel = %+v, want 0", got)
	}
	if v.sim.OpenOrders("XBTC") != 3 {
		t.Errorf("XBTC orders = %d, want 3 (untouched)", v.sim.OpenOrders("XBTC"))
	}
	v.sim.AddOrders("XSOL", 2)
	v.post("/v1/contracts/orders/XSOL/cancel", "{}", &got)
	if got.Cancelled != 2 {
		t.Errorf("after AddOrders = %+v, want 2", got)
	}
	// The cancelled orders are closed orders now.
	var page exchange.ClosedOrdersPage
	v.get("/v1/contracts/orders/closed", q("range", "202611", "offsetId", "120", "limit", "100"), &page)
	if len(page.Results) != 7 || page.HasMore {
		t.Fatalf("closed after 120: %d, hasMore %v", len(page.Results), page.HasMore)
	}
	var o struct {
		Symbol, Status string
		FilledQuantity decimal.Decimal
	}
	mustDecode(t, page.Results[0], &o)
	if o.Symbol != "XSOL" || o.Status != "CANCELLED" || !o.FilledQuantity.IsZero() {
		t.Errorf("cancelled order = %+v", o)
	}

	for _, tc := range []struct {
		name, path, body string
		status           int
		code, field      string
	}{
		{"unknown symbol", "/v1/contracts/orders/XNOPE/cancel", "", 404, sim.CodeSymbolNotFound, "symbol"},
		{"unexpected field", "/v1/contracts/orders/XBTC/cancel", `{"all":true}`, 400, sim.CodeParameterInvalid, "all"},
		{"not JSON", "/v1/contracts/orders/XBTC/cancel", `all`, 400, sim.CodeParameterInvalid, "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, v.do(call{method: http.MethodPost, path: tc.path, body: tc.body}), tc.status, tc.code, tc.field)
		})
	}
	if v.sim.OpenOrders("XBTC") != 3 {
		t.Errorf("rejected cancels changed XBTC orders: %d", v.sim.OpenOrders("XBTC"))
	}
}

func TestClosedOrdersPaging(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{Seed: 3})
	seen := map[int64]bool{}
	last := int64(0)
	offset := int64(0)
	pages := 0
	for pages < 10 {
		var page exchange.ClosedOrdersPage
		v.get("/v1/contracts/orders/closed", q("range", "202611", "offsetId", decimal.NewFromInt(offset).String(), "limit", "50"), &page)
		pages++
		if page.Range != "202611" {
			t.Errorf("range = %q", page.Range)
		}
		for _, raw := range page.Results {
			var o struct {
				ID        int64
				Status    string
				Price     string
				UpdatedAt int64
			}
			mustDecode(t, raw, &o)
			if o.ID <= last || seen[o.ID] {
				t.Errorf("id %d after %d", o.ID, last)
			}
			if _, err := decimal.NewFromString(o.Price); err != nil || (o.Status != "FILLED" && o.Status != "CANCELLED") {
				t.Errorf("order = %s", raw)
			}
			if !strings.Contains(string(raw), `"price":"`) {
				t.Errorf("price is not a string: %s", raw)
			}
			seen[o.ID] = true
			last = o.ID
		}
		if !page.HasMore {
			break
		}
		if page.NextOffsetID != last {
			t.Errorf("nextOffsetId = %d, want %d", page.NextOffsetID, last)
		}
		offset = page.NextOffsetID
	}
	if pages != 3 || len(seen) != 120 {
		t.Errorf("read %d orders in %d pages, want 120 in 3", len(seen), pages)
	}

	// A month with no orders.
	var empty exchange.ClosedOrdersPage
	v.get("/v1/contracts/orders/closed", q("range", "202510"), &empty)
	if empty.HasMore || len(empty.Results) != 0 || empty.NextOffsetID != 0 {
		t.Errorf("empty month = %+v", empty)
	}
	raw := v.do(call{method: http.MethodGet, path: "/v1/contracts/orders/closed", query: q("range", "202510")})
	if !strings.Contains(string(raw.env.Data), `"results":[]`) {
		t.Errorf("results of an empty page must be [], got %s", raw.env.Data)
	}

	for _, tc := range []struct{ query, field string }{
		{q("offsetId", "0"), "range"},
		{q("range", "2026-11"), "range"},
		{q("range", "202613"), "range"},
		{q("range", "202611", "offsetId", "-1"), "offsetId"},
		{q("range", "202611", "offsetId", "x"), "offsetId"},
		{q("range", "202611", "limit", "0"), "limit"},
		{q("range", "202611", "limit", "101"), "limit"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			r := v.do(call{method: http.MethodGet, path: "/v1/contracts/orders/closed", query: tc.query})
			wantError(t, r, http.StatusBadRequest, sim.CodeParameterInvalid, tc.field)
		})
	}
}

func TestLiquidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, index, price, symbol string
		loss, balance              string
		also                       []string // other symbols liquidated in the cascade
	}{
		{name: "isolated long at its price", index: "SOL", price: "144.907", symbol: "XSOL", loss: "4053.33333333", balance: "20000"},
		{name: "isolated long below", index: "SOL", price: "120", symbol: "XSOL", loss: "4053.33333333", balance: "20000"},
		{name: "isolated short", index: "ETH", price: "3172", symbol: "XETH", loss: "1830", balance: "20000"},
		{name: "cross long takes the free balance", index: "BTC", price: "33000", symbol: "XBTC", loss: "25136", balance: "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, sim.Config{})
			before, _ := v.sim.Position(tc.symbol)
			v.sim.SetIndexPrice(tc.index, dec(tc.price))
			liq := v.sim.Liquidations()
			if len(liq) != 1 || liq[0].Symbol != tc.symbol || !liq[0].Price.Equal(dec(tc.price)) || liq[0].Position.Empty {
				t.Fatalf("liquidations = %+v", liq)
			}
			var ps []exchange.Position
			v.get("/v1/contracts/positions", "", &ps)
			var p exchange.Position
			for _, x := range ps {
				if x.SymbolID == before.SymbolID {
					p = x
				}
			}
			if !p.Empty || !p.Quantity.IsZero() || !p.Margin.IsZero() || p.Version != before.Version+1 {
				t.Errorf("after liquidation = %+v", p)
			}
			wantDec(t, "realizedPNL", p.RealizedPNL, "-"+tc.loss)
			wantDec(t, "balance", v.sim.Balance(), tc.balance)
			// Nothing more happens on the way back.
			v.sim.SetIndexPrice(tc.index, before.EntryPrice)
			if len(v.sim.Liquidations()) != 1 {
				t.Errorf("liquidated twice")
			}
		})
	}

	t.Run("safe move liquidates nothing", func(t *testing.T) {
		t.Parallel()
		v := newEnv(t, sim.Config{})
		v.sim.SetIndexPrice("SOL", dec("144.908"))
		v.sim.SetIndexPrice("ETH", dec("3171.99"))
		if n := len(v.sim.Liquidations()); n != 0 {
			t.Errorf("%d liquidations", n)
		}
	})

	t.Run("by Step on a scripted path", func(t *testing.T) {
		t.Parallel()
		v := newEnv(t, sim.Config{})
		// The default SOL path crosses 144.907 between 45 s and 70 s.
		var at time.Duration
		for i := 1; i <= 120 && at == 0; i++ {
			v.sim.Step(t0.Add(time.Duration(i) * time.Second))
			if len(v.sim.Liquidations()) > 0 {
				at = time.Duration(i) * time.Second
			}
		}
		if at != 65*time.Second {
			t.Errorf("liquidated at %s, want 65s", at)
		}
		if l := v.sim.Liquidations(); len(l) != 1 || l[0].Symbol != "XSOL" || !l[0].Time.Equal(t0.Add(at)) {
			t.Errorf("liquidations = %+v", l)
		}
	})

	t.Run("guarded position survives", func(t *testing.T) {
		t.Parallel()
		v := newEnv(t, sim.Config{})
		settingsReply(t, v, "XSOL", `{"cross":false,"leverage":10}`)
		v.sim.Step(t0.Add(2 * time.Minute))
		for _, l := range v.sim.Liquidations() {
			if l.Symbol == "XSOL" {
				t.Errorf("XSOL liquidated at 10x: %+v", l)
			}
		}
	})

	// Two cross shorts in a rally share one pool: they are liquidated
	// together once it is spent, and the account never ends below zero
	// with its positions alive (the old model let each count the whole
	// free balance: equity −1,235 and nothing liquidated).
	t.Run("two cross shorts in a rally", func(t *testing.T) {
		t.Parallel()
		sc := sim.DefaultScenario()
		sc.Positions = []sim.PositionSpec{
			{Symbol: "XBTC", Direction: exchange.Short, Quantity: dec("0.5"), EntryPrice: dec("65000"), Leverage: 10, Cross: true},
			{Symbol: "XETH", Direction: exchange.Short, Quantity: dec("10"), EntryPrice: dec("3010"), Leverage: 10, Cross: true},
		}
		sc.Balance = dec("3000")
		v := newEnv(t, sim.Config{Scenario: sc})
		for pct := 1; pct <= 15 && len(v.sim.Liquidations()) == 0; pct++ {
			f := decimal.NewFromInt(int64(100 + pct)).Div(decimal.NewFromInt(100))
			v.sim.SetIndexPrice("BTC", dec("65000").Mul(f))
			v.sim.SetIndexPrice("ETH", dec("3010").Mul(f))
		}
		l := v.sim.Liquidations()
		if len(l) != 2 || !l[0].Time.Equal(l[1].Time) {
			t.Fatalf("liquidations = %+v, want both cross shorts together", l)
		}
		wantDec(t, "balance", v.sim.Balance(), "0")
	})

	t.Run("cross cascade", func(t *testing.T) {
		t.Parallel()
		sc := sim.DefaultScenario()
		sc.Positions = []sim.PositionSpec{
			{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("1"), EntryPrice: dec("65000"), Leverage: 10, Cross: true},
			{Symbol: "XETH", Direction: exchange.Short, Quantity: dec("10"), EntryPrice: dec("3010"), Leverage: 10, Cross: true},
		}
		sc.Balance = dec("1000")
		v := newEnv(t, sim.Config{Scenario: sc})
		// One pool: 1,000 + margins 6,500 and 3,010, both at their entry;
		// maintenance 325 + 301. XBTC: 65,000 − (10,510 − 626) = 55,116.
		// XETH: 3,010 + (10,510 − 626)/10 = 3,998.4.
		p, _ := v.sim.Position("XBTC")
		wantDec(t, "XBTC liquidation", p.LiquidationPrice, "55116")
		p, _ = v.sim.Position("XETH")
		wantDec(t, "XETH liquidation", p.LiquidationPrice, "3998.4")
		// XBTC's loss of 7,175 is the pool's: XETH's liquidation price
		// comes down to 3,010 + (3,335 − 626)/10 = 3,280.9.
		v.sim.SetIndexPrice("BTC", dec("57825"))
		p, _ = v.sim.Position("XETH")
		wantDec(t, "XETH liquidation after", p.LiquidationPrice, "3280.9")
		if n := len(v.sim.Liquidations()); n != 0 {
			t.Fatalf("%d liquidations before the pool is exhausted", n)
		}
		// ETH at 3,300 exhausts the pool: both go together, with the free
		// balance.
		v.sim.SetIndexPrice("ETH", dec("3300"))
		l := v.sim.Liquidations()
		if len(l) != 2 || l[0].Symbol != "XBTC" || l[1].Symbol != "XETH" || !l[0].Time.Equal(l[1].Time) {
			t.Errorf("liquidations = %+v", l)
		}
		wantDec(t, "balance", v.sim.Balance(), "0")
	})
}

func TestPutPosition(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	err := v.sim.PutPosition(sim.PositionSpec{Symbol: "XBTC", Direction: exchange.Short, Quantity: dec("2"),
		EntryPrice: dec("60000"), Leverage: 10})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := v.sim.Position("XBTC")
	wantDec(t, "margin", p.Margin, "12000")
	// 60000 · (1 + 1/10 − 0.005)
	wantDec(t, "liquidationPrice", p.LiquidationPrice, "65700")
	if p.Version != 2 || p.Direction != exchange.Short {
		t.Errorf("position = %+v", p)
	}
	wantDec(t, "balance untouched", v.sim.Balance(), "20000")
	for _, bad := range []sim.PositionSpec{
		{Symbol: "XNOPE", Quantity: dec("1"), EntryPrice: dec("1"), Leverage: 1},
		{Symbol: "XBTC", Direction: "UP", Quantity: dec("1"), EntryPrice: dec("1")},
		{Symbol: "XBTC", Quantity: dec("0"), EntryPrice: dec("1")},
		{Symbol: "XBTC", Quantity: dec("1"), EntryPrice: dec("1"), Leverage: -1},
	} {
		if err := v.sim.PutPosition(bad); err == nil {
			t.Errorf("PutPosition(%+v) accepted", bad)
		}
	}
}

func TestCallsLog(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.get("/v1/contracts/positions", "", nil)
	v.do(call{method: http.MethodGet, path: "/v1/market/indexPrices", unsigned: true})
	v.post("/v1/contracts/orders/XBTC/cancel", "{}", nil)
	v.do(call{method: http.MethodGet, path: "/nowhere", unsigned: true})
	calls := v.sim.Calls()
	want := []sim.Call{
		{Time: t0, Method: "GET", Path: "/v1/contracts/positions", Route: "/v1/contracts/positions", Status: 200},
		{Time: t0, Method: "GET", Path: "/v1/market/indexPrices", Route: "/v1/market/indexPrices", Status: 200},
		{Time: t0, Method: "POST", Path: "/v1/contracts/orders/XBTC/cancel", Route: "/v1/contracts/orders/{symbol}/cancel",
			Status: 200, Mutating: true, Body: "{}"},
		{Time: t0, Method: "GET", Path: "/nowhere", Status: 404},
	}
	if len(calls) != len(want) {
		t.Fatalf("calls = %+v", calls)
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("call %d = %+v, want %+v", i, calls[i], want[i])
		}
	}
	v.sim.ResetCalls()
	if n := len(v.sim.Calls()); n != 0 {
		t.Errorf("%d calls after reset", n)
	}
}

// TestPositionWireRoundTrip checks that every field of a position the sim
// serves decodes back to the value it holds.
func TestPositionWireRoundTrip(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	var ps []exchange.Position
	v.get("/v1/contracts/positions", "", &ps)
	direct := v.sim.Positions()
	for i := range ps {
		a, _ := json.Marshal(ps[i])
		b, _ := json.Marshal(direct[i])
		if string(a) != string(b) {
			t.Errorf("position %d:\nHTTP   %s\ndirect %s", i, a, b)
		}
	}
}
