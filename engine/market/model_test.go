package market

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// The view's model positions are its open rows with a symbol, in order,
// at their index prices (margin.PositionOf's figures); the cross
// signature moves with a cross position's version and with nothing
// isolated; both are built once per join.
func TestViewModel(t *testing.T) {
	t.Parallel()
	sym := func(id int64, name, base string) exchange.ContractSymbol {
		return exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: id, Name: name, BaseName: base}}
	}
	pos := func() []exchange.Position {
		return []exchange.Position{
			{ID: "1_1", SymbolID: 1, Direction: exchange.Long, Quantity: dec("2"), EntryPrice: dec("100"), Leverage: 10, Cross: true, Version: 3,
				Margin: dec("20"), LiquidationPrice: dec("80")},
			{ID: "1_2", SymbolID: 2, Direction: exchange.Short, Quantity: dec("0"), Leverage: 5},           // nothing held
			{ID: "1_3", SymbolID: 3, Direction: exchange.Short, Quantity: dec("4"), EntryPrice: dec("10")}, // leverage 0, no index
			{ID: "1_9", SymbolID: 9, Direction: exchange.Long, Quantity: dec("1"), EntryPrice: dec("5")},   // unknown symbol
			{ID: "1_4", SymbolID: 4, Empty: true},
		}
	}
	r := &reader{
		pos: pos(),
		idx: map[string]decimal.Decimal{"BTC": dec("99")},
		tr:  &exchange.Trades{ContractsSymbols: []exchange.ContractSymbol{sym(1, "XBTC", "BTC"), sym(2, "XETH", "ETH"), sym(3, "XSOL", "SOL"), sym(4, "XDOT", "DOT")}},
	}
	sr := NewSnapshotReader(r, time.Hour, nil)
	read := func() *Snapshot {
		t.Helper()
		snap, err := sr.Read(context.Background(), time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	var v View
	v.Join(read(), sr, nil)
	var open []bool
	for _, row := range v.Rows {
		open = append(open, row.Open)
	}
	if want := []bool{true, false, true, true, false}; !slices.Equal(open, want) {
		t.Errorf("open %v, want %v", open, want)
	}
	ps, rep := v.Model()
	if len(ps) != 2 || len(rep) != 2 || ps[0].Symbol != "XBTC" || ps[1].Symbol != "XSOL" {
		t.Fatalf("model %+v", ps)
	}
	if !ps[0].Index.Equal(dec("99")) || !ps[1].Index.IsZero() || ps[1].Leverage != 1 || !ps[0].Cross {
		t.Errorf("model %+v", ps)
	}
	if !rep[0].Margin.Equal(dec("20")) || !rep[0].Liquidation.Equal(dec("80")) {
		t.Errorf("reported %+v", rep[0])
	}
	if again, _ := v.Model(); &again[0] != &ps[0] {
		t.Error("the model was built twice in one join")
	}
	sig := v.CrossSig()
	// An isolated position's new version leaves the signature; a cross
	// position's moves it.
	r.pos = pos()
	r.pos[2].Version = 7
	v.Join(read(), sr, nil)
	if got := v.CrossSig(); got != sig {
		t.Error("an isolated position moved the cross signature")
	}
	r.pos[0].Version = 4
	v.Join(read(), sr, nil)
	if got := v.CrossSig(); got == sig {
		t.Error("a cross position's new version left the cross signature")
	}
}
