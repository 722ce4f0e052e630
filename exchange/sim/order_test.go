package sim_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

const orderPath = "/v1/contracts/orders/%s/create"

func orderOf(sym string) string { return strings.Replace(orderPath, "%s", sym, 1) }

// A reduce-only IOC order halves the default XBTC (long 0.8 @ 64,200 ×10,
// cross, margin 5,136, free 20,000) at the index 62,000: 2,200·0.4 = 880
// realised as a loss, half the margin released, the rest at the same entry,
// the order listed among the closed ones; the liquidation price moves away.
func TestOrderReducesPosition(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.SetIndexPrice("BTC", dec("62000"))
	before, _ := v.sim.Position("XBTC")
	var o exchange.Order
	v.ok(call{method: http.MethodPost, path: orderOf("XBTC"), body: `{"side":"SELL","type":"MARKET","quantity":"0.4","flags":24}`}, &o)
	if o.Status != "FILLED" || o.Side != exchange.Sell || o.Flags != exchange.ReduceOnly|exchange.ImmediateOrCancel || o.Symbol != "XBTC" || o.ID == 0 {
		t.Errorf("order = %+v", o)
	}
	wantDec(t, "order price", o.Price, "62000")
	wantDec(t, "filled", o.FilledQuantity, "0.4")
	after, _ := v.sim.Position("XBTC")
	wantDec(t, "quantity", after.Quantity, "0.4")
	wantDec(t, "margin", after.Margin, "2568")
	wantDec(t, "entry price", after.EntryPrice, "64200")
	wantDec(t, "entry value", after.EntryValue, "25680")
	wantDec(t, "realised PNL", after.RealizedPNL, before.RealizedPNL.Sub(dec("880")).String())
	wantDec(t, "free balance", v.sim.Balance(), "21688")
	if after.Version != before.Version+1 || after.Empty {
		t.Errorf("version %d → %d, empty %t", before.Version, after.Version, after.Empty)
	}
	if !after.LiquidationPrice.LessThan(before.LiquidationPrice) {
		t.Errorf("liquidation %s → %s: want further from the index", before.LiquidationPrice, after.LiquidationPrice)
	}
	var page struct {
		Results []exchange.Order `json:"results"`
	}
	v.ok(call{method: http.MethodGet, path: "/v1/contracts/orders/closed", query: q("range", t0.UTC().Format("200601"), "offsetId", "120")}, &page)
	if len(page.Results) != 1 || page.Results[0].ID != o.ID || page.Results[0].Status != "FILLED" {
		t.Errorf("closed orders after = %+v, want the fill", page.Results)
	}
}

// A short is reduced by a BUY, and closing it wholly empties it.
func TestOrderClosesShort(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.SetIndexPrice("ETH", dec("3000"))
	bal := v.sim.Balance()
	v.ok(call{method: http.MethodPost, path: orderOf("XETH"), body: `{"side":"BUY","type":"MARKET","quantity":"12","flags":24}`}, nil)
	p, _ := v.sim.Position("XETH")
	if !p.Empty || !p.Quantity.IsZero() || !p.Margin.IsZero() || !p.LiquidationPrice.IsZero() {
		t.Errorf("closed position = %+v", p)
	}
	// margin 1,830 back and (3,050 − 3,000)·12 = 600 gained
	wantDec(t, "free balance", v.sim.Balance(), bal.Add(dec("2430")).String())
}

func TestOrderRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, sym, body string
		status          int
		code, field     string
	}{
		{"the side that grows", "XBTC", `{"side":"BUY","type":"MARKET","quantity":"0.1","flags":24}`, 400, sim.CodeReduceOnlyRejected, "side"},
		{"more than held", "XBTC", `{"side":"SELL","type":"MARKET","quantity":"0.9","flags":24}`, 400, sim.CodeReduceOnlyRejected, "quantity"},
		{"not reduce-only", "XBTC", `{"side":"SELL","type":"MARKET","quantity":"0.1","flags":8}`, 400, sim.CodeParameterInvalid, "flags"},
		{"not immediate", "XBTC", `{"side":"SELL","type":"MARKET","quantity":"0.1","flags":16}`, 400, sim.CodeParameterInvalid, "flags"},
		{"off the increment", "XBTC", `{"side":"SELL","type":"MARKET","quantity":"0.0005","flags":24}`, 400, sim.CodeParameterInvalid, "quantity"},
		{"zero", "XBTC", `{"side":"SELL","type":"MARKET","quantity":"0","flags":24}`, 400, sim.CodeParameterInvalid, "quantity"},
		{"limit", "XBTC", `{"side":"SELL","type":"LIMIT","quantity":"0.1","flags":24}`, 400, sim.CodeParameterInvalid, "type"},
		{"no side", "XBTC", `{"type":"MARKET","quantity":"0.1","flags":24}`, 400, sim.CodeParameterInvalid, "side"},
		{"unknown field", "XBTC", `{"side":"SELL","type":"MARKET","quantity":"0.1","flags":24,"price":"1"}`, 400, sim.CodeParameterInvalid, "price"},
		{"empty position", "XDOGE", `{"side":"SELL","type":"MARKET","quantity":"1","flags":24}`, 400, sim.CodeReduceOnlyRejected, "symbol"},
		{"unknown symbol", "XNOPE", `{"side":"SELL","type":"MARKET","quantity":"1","flags":24}`, 404, sim.CodeSymbolNotFound, "symbol"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newEnv(t, sim.Config{})
			before := v.sim.Positions()
			wantError(t, v.do(call{method: http.MethodPost, path: orderOf(tt.sym), body: tt.body}), tt.status, tt.code, tt.field)
			after := v.sim.Positions()
			for i := range before {
				if !before[i].Quantity.Equal(after[i].Quantity) || before[i].Version != after[i].Version {
					t.Errorf("position %d changed by a refused order: %+v → %+v", i, before[i], after[i])
				}
			}
		})
	}
}

// The Grows fault answers FILLED and grows the position: what the guard's
// read-back must catch.
func TestOrderGrowsFault(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.InjectFault(exchange.DefaultOrderPath, sim.Fault{Grows: true, Times: 1})
	v.ok(call{method: http.MethodPost, path: orderOf("XBTC"), body: `{"side":"SELL","type":"MARKET","quantity":"0.4","flags":24}`}, nil)
	p, _ := v.sim.Position("XBTC")
	wantDec(t, "quantity", p.Quantity, "1.2")
	v.ok(call{method: http.MethodPost, path: orderOf("XBTC"), body: `{"side":"SELL","type":"MARKET","quantity":"0.4","flags":24}`}, nil)
	p, _ = v.sim.Position("XBTC")
	wantDec(t, "quantity once the fault is spent", p.Quantity, "0.8")
}

// The in-process client refuses as the HTTP endpoint does.
func TestLocalPlaceOrder(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	l := v.sim.Local()
	_, err := l.PlaceOrder(context.Background(), "XBTC", exchange.ReduceOnlyIOC(exchange.Buy, dec("0.1")))
	var ae *exchange.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != sim.CodeReduceOnlyRejected {
		t.Fatalf("err = %v, want a REDUCE_ONLY_REJECTED APIError", err)
	}
	o, err := l.PlaceOrder(context.Background(), "XBTC", exchange.ReduceOnlyIOC(exchange.Sell, dec("0.2")))
	if err != nil || o.Status != "FILLED" {
		t.Fatalf("order = %+v, %v", o, err)
	}
	p, _ := v.sim.Position("XBTC")
	wantDec(t, "quantity", p.Quantity, "0.6")
}

// With Config.ClientOrderIDField the order endpoint takes a client order
// id: the first order with an id fills, a second with the same id is
// refused and fills nothing, a new id fills; a malformed id is refused.
// Without it the field is unknown, as any other.
func TestOrderClientOrderID(t *testing.T) {
	t.Parallel()
	body := func(id string) string {
		return `{"side":"SELL","type":"MARKET","quantity":"0.1","flags":24,"clientOrderId":` + id + `}`
	}
	v := newEnv(t, sim.Config{ClientOrderIDField: "clientOrderId"})
	v.ok(call{method: http.MethodPost, path: orderOf("XBTC"), body: body(`"rg1"`)}, nil)
	wantError(t, v.do(call{method: http.MethodPost, path: orderOf("XBTC"), body: body(`"rg1"`)}), 400, sim.CodeDuplicateClientOrderID, "clientOrderId")
	p, _ := v.sim.Position("XBTC")
	wantDec(t, "quantity after the repeat", p.Quantity, "0.7")
	v.ok(call{method: http.MethodPost, path: orderOf("XBTC"), body: body(`"rg2"`)}, nil)
	v.ok(call{method: http.MethodPost, path: orderOf("XBTC"), body: `{"side":"SELL","type":"MARKET","quantity":"0.1","flags":24}`}, nil)
	p, _ = v.sim.Position("XBTC")
	wantDec(t, "quantity after a new id and none", p.Quantity, "0.5")
	for _, bad := range []string{`""`, `12`, `"` + strings.Repeat("x", 65) + `"`} {
		wantError(t, v.do(call{method: http.MethodPost, path: orderOf("XBTC"), body: body(bad)}), 400, sim.CodeParameterInvalid, "clientOrderId")
	}
	plain := newEnv(t, sim.Config{})
	wantError(t, plain.do(call{method: http.MethodPost, path: orderOf("XBTC"), body: body(`"rg1"`)}), 400, sim.CodeParameterInvalid, "clientOrderId")
}

// The ListingLags fault fills the order and lists the account as it was
// before it for the next reads: a read model behind the matching engine.
func TestOrderListingLagsFault(t *testing.T) {
	t.Parallel()
	v := newEnv(t, sim.Config{})
	v.sim.InjectFault(exchange.DefaultOrderPath, sim.Fault{ListingLags: 2, Times: 1})
	v.ok(call{method: http.MethodPost, path: orderOf("XBTC"), body: `{"side":"SELL","type":"MARKET","quantity":"0.4","flags":24}`}, nil)
	p, _ := v.sim.Position("XBTC")
	wantDec(t, "quantity at the exchange", p.Quantity, "0.4")
	listed := func() string {
		var ps []struct {
			SymbolID int64  `json:"symbolId"`
			Quantity string `json:"quantity"`
			Empty    bool   `json:"empty"`
		}
		v.ok(call{method: http.MethodGet, path: "/v1/contracts/positions"}, &ps)
		for _, lp := range ps {
			if lp.SymbolID == p.SymbolID {
				return lp.Quantity
			}
		}
		return "none"
	}
	for i, want := range []string{"0.8", "0.8", "0.4", "0.4"} {
		if got := listed(); got != want {
			t.Errorf("read %d lists XBTC %s, want %s", i+1, got, want)
		}
	}
}
