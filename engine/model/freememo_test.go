package model

import (
	"reflect"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// The free balance's inputs are the same only when every field the
// inference reads is: decoded again (fresh decimals of the same values)
// they are; any field changed, or a decimal written with another exponent,
// they are not.
func TestFreeInputsSame(t *testing.T) {
	t.Parallel()
	// A field added to margin.Position must be compared by same too.
	if n := reflect.TypeFor[margin.Position]().NumField(); n != 12 {
		t.Fatalf("margin.Position has %d fields: compare the new ones in freeInputs.same and count them here", n)
	}
	pos := func() []margin.Position {
		return []margin.Position{
			{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("2"), Entry: dec("100000"), Leverage: 10, Cross: true,
				RiskLimit: riskLimit(50), Index: dec("99000"), Scale: 1, Held: dec("20000"), Value: dec("200000"), MM: dec("1000")},
			{Symbol: "XETH", Direction: exchange.Short, Quantity: dec("5"), Entry: dec("3000"), Leverage: 5,
				RiskLimit: riskLimit(50), Index: dec("3100"), Scale: 2, Held: dec("3000"), Value: dec("15000"), MM: dec("75")},
		}
	}
	liqs := func() []decimal.Decimal { return []decimal.Decimal{dec("90500.5"), dec("3550")} }
	var in freeInputs
	if in.same(pos(), liqs()) {
		t.Fatal("nothing kept, yet the same")
	}
	in.keep(pos(), liqs())
	if !in.same(pos(), liqs()) {
		t.Fatal("the same figures decoded again: not the same")
	}
	for name, change := range map[string]func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal){
		"liquidation price": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ls[0] = dec("90500.6")
			return ps, ls
		},
		"index": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ps[1].Index = dec("3101")
			return ps, ls
		},
		"held": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ps[0].Held = dec("20001")
			return ps, ls
		},
		"mm": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ps[0].MM = dec("999")
			return ps, ls
		},
		"leverage": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ps[1].Leverage = 6
			return ps, ls
		},
		"mode": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ps[1].Cross = true
			return ps, ls
		},
		"quantity": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ps[0].Quantity = dec("2.1")
			return ps, ls
		},
		"risk limit": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ps[0].RiskLimit.MaintenanceMarginRate = dec("0.006")
			return ps, ls
		},
		"exponent": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			ls[1] = dec("3550.0")
			return ps, ls
		},
		"a position closed": func(ps []margin.Position, ls []decimal.Decimal) ([]margin.Position, []decimal.Decimal) {
			return ps[:1], ls[:1]
		},
	} {
		if ps, ls := change(pos(), liqs()); in.same(ps, ls) {
			t.Errorf("%s changed: still the same", name)
		}
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func riskLimit(maxLev int) exchange.RiskLimit {
	return exchange.RiskLimit{ID: 1, InitialMarginRate: dec("0.01"), MaintenanceMarginRate: dec("0.005"), MaxLeverage: maxLev, MaxQuantity: dec("100")}
}
