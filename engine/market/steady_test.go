package market

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// A view is steady since a join while its rows keep the same symbols and
// positions, each decimal the same copy: a change of any field of a
// position but its risk level moves it, and so does a decimal of the
// same value made afresh (as a decoded answer's are), a symbol list read
// again or a position added; an index price or a risk level does not.
// The model positions of a steady view, refreshed in place, are those a
// fresh view builds, and so are the rows' numbers.
func TestViewSteady(t *testing.T) {
	t.Parallel()
	sym := func(id int64, name, base string) exchange.ContractSymbol {
		return exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: id, Name: name, BaseName: base, QuoteScale: 2}}
	}
	base := []exchange.Position{
		{ID: "1_1", UserID: 1, SymbolID: 1, Direction: exchange.Long, Quantity: dec("2"), EntryPrice: dec("100"), EntryValue: dec("200"),
			Leverage: 10, Margin: dec("20"), LiquidationPrice: dec("80"), RealizedPNL: dec("1"), RiskLevel: 3, Version: 2,
			CreatedAt: 5, UpdatedAt: 6, MinimumMaintenanceMarginRate: dec("0.005"), MinQuantity: dec("0.01"), MaxQuantity: dec("1000"),
			RiskLimit: exchange.RiskLimit{ID: 1, InitialMarginRate: dec("0.05"), MaintenanceMarginRate: dec("0.005"), MarginRateStep: dec("0.001"),
				MaxLeverage: 20, RiskLimitBase: dec("1000"), RiskLimitStep: dec("500"), MaxRiskLimitSteps: 3, MaxQuantity: dec("1000"), CreatedAt: 7}},
		{ID: "1_2", UserID: 1, SymbolID: 2, Direction: exchange.Short, Quantity: dec("4"), EntryPrice: dec("10"), Leverage: 5, Cross: true},
	}
	r := &reader{
		pos: append([]exchange.Position(nil), base...),
		idx: map[string]decimal.Decimal{"BTC": dec("99"), "ETH": dec("11")},
		tr:  &exchange.Trades{ContractsSymbols: []exchange.ContractSymbol{sym(1, "XBTC", "BTC"), sym(2, "XETH", "ETH")}},
	}
	sr := NewSnapshotReader(r, time.Hour, nil)
	join := func(v *View) {
		t.Helper()
		snap, err := sr.Read(context.Background(), time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		v.Join(snap, sr, nil)
	}
	// agrees checks v's model and numbers against a view that joins the
	// same snapshot afresh.
	agrees := func(name string, v *View) {
		t.Helper()
		var fresh View
		fresh.Join(v.Snap, sr, nil)
		ps, rep := v.Model()
		wps, wrep := fresh.Model()
		if !reflect.DeepEqual(ps, wps) || !reflect.DeepEqual(rep, wrep) {
			t.Errorf("%s: model %+v %+v, afresh %+v %+v", name, ps, rep, wps, wrep)
		}
		for i := range v.Rows {
			got, want := v.Rows[i].N, fresh.Rows[i].N
			if (got == nil) != (want == nil) || (got != nil && *got != *want) || v.Rows[i].IndexF != fresh.Rows[i].IndexF {
				t.Errorf("%s: row %d numbers %+v, afresh %+v", name, i, got, want)
			}
		}
	}

	// Every field of a position, and of its risk limit, changed in turn.
	type change struct {
		name   string
		set    func(p *exchange.Position)
		steady bool
	}
	var changes []change
	other := func(f reflect.Value) {
		switch x := f.Addr().Interface().(type) {
		case *decimal.Decimal:
			*x = x.Add(dec("1"))
		case *string:
			*x += "x"
		case *int:
			*x++
		case *int64:
			*x++
		case *bool:
			*x = !*x
		default:
			t.Fatalf("a field of type %s: say how to change it", f.Type())
		}
	}
	pt, rt := reflect.TypeFor[exchange.Position](), reflect.TypeFor[exchange.RiskLimit]()
	for i := range pt.NumField() {
		if pt.Field(i).Name == "RiskLimit" {
			for j := range rt.NumField() {
				changes = append(changes, change{name: "RiskLimit." + rt.Field(j).Name,
					set: func(p *exchange.Position) { other(reflect.ValueOf(&p.RiskLimit).Elem().Field(j)) }})
			}
			continue
		}
		changes = append(changes, change{name: pt.Field(i).Name, steady: pt.Field(i).Name == "RiskLevel",
			set: func(p *exchange.Position) { other(reflect.ValueOf(p).Elem().Field(i)) }})
	}
	changes = append(changes,
		change{name: "the same quantity made afresh", set: func(p *exchange.Position) { p.Quantity = dec("2") }},
		change{name: "an index price", steady: true, set: func(*exchange.Position) { r.idx = map[string]decimal.Decimal{"BTC": dec("98"), "ETH": dec("11")} }},
		change{name: "an index gone", steady: true, set: func(*exchange.Position) { r.idx = map[string]decimal.Decimal{"ETH": dec("11")} }},
		change{name: "nothing", steady: true, set: func(*exchange.Position) {}},
	)
	for _, c := range changes {
		r.pos = append([]exchange.Position(nil), base...)
		r.idx = map[string]decimal.Decimal{"BTC": dec("99"), "ETH": dec("11")}
		var v View
		join(&v)
		v.Model() // built before the change: the steady view refreshes it
		at := v.Joins()
		join(&v)
		if !v.Steady(at) {
			t.Fatalf("%s: a view read again unchanged is not steady", c.name)
		}
		r.pos = append([]exchange.Position(nil), base...)
		c.set(&r.pos[0])
		join(&v)
		if got := v.Steady(at); got != c.steady {
			t.Errorf("%s: steady %v, want %v", c.name, got, c.steady)
		}
		agrees(c.name, &v)
		// Steady from the join after the change on, the model refreshed.
		at = v.Joins()
		v.Model()
		join(&v)
		if !v.Steady(at) {
			t.Errorf("%s: not steady after it", c.name)
		}
		agrees(c.name+", then read again", &v)
	}

	// A position added, or the symbols read again.
	var v View
	r.pos = append([]exchange.Position(nil), base...)
	join(&v)
	at := v.Joins()
	r.pos = append(append([]exchange.Position(nil), base...), exchange.Position{ID: "1_3", SymbolID: 3, Empty: true})
	join(&v)
	if v.Steady(at) {
		t.Error("steady after a position was added")
	}
	at = v.Joins()
	tr := *r.tr
	r.tr, sr.byID = &tr, nil // the same symbols, read again
	join(&v)
	if v.Steady(at) {
		t.Error("steady after the symbols were read again")
	}
	if v.Steady(0) {
		t.Error("steady since no join")
	}
}
