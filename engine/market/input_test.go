package market

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

func TestToFloat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want float64
	}{
		{"0", 0}, {"1", 1}, {"-2.5", -2.5}, {"0.1", 0.1}, {"96500.5", 96500.5},
		{"0.000123456789012345", 0.000123456789012345}, {"123456789012345", 123456789012345},
		{"1e30", 1e30}, {"-0.0000000000000000000000001", -1e-25},
	}
	for _, tt := range tests {
		got := ToFloat(dec(tt.in))
		if got != tt.want && math.Abs(got-tt.want) > math.Abs(tt.want)*1e-15 {
			t.Errorf("ToFloat(%s) = %v, want %v", tt.in, got, tt.want)
		}
	}
	// 16 to 18 digits, past 2^53: the nearest float64, as InexactFloat64
	// gives it (the margin model's grid reads these floats as its own).
	for _, s := range []string{"1234.56789012345678", "90071992.54740993", "123456789.12345679", "-999999999.999999999", "9007199254740993"} {
		d := dec(s)
		if got, want := ToFloat(d), d.InexactFloat64(); got != want {
			t.Errorf("ToFloat(%s) = %v, want %v", d, got, want)
		}
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// reader is a Reader of fixed answers.
type reader struct {
	pos []exchange.Position
	idx map[string]decimal.Decimal
	tr  *exchange.Trades
}

func (r *reader) Positions(context.Context) ([]exchange.Position, error) { return r.pos, nil }
func (r *reader) IndexPrices(context.Context) (map[string]decimal.Decimal, error) {
	return r.idx, nil
}
func (r *reader) Trades(context.Context) (*exchange.Trades, error) { return r.tr, nil }

// A view joins each position once with its symbol and index price: an
// unknown symbol id or a missing index leaves its part empty, an empty
// position needs only its key, index names map a symbol to its index.
func TestViewJoin(t *testing.T) {
	t.Parallel()
	sym := func(id int64, name, base string) exchange.ContractSymbol {
		return exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: id, Name: name, BaseName: base}}
	}
	r := &reader{
		pos: []exchange.Position{
			{ID: "1_1", SymbolID: 1, Direction: exchange.Long},
			{ID: "1_2", SymbolID: 2, Direction: exchange.Short},
			{ID: "1_3", SymbolID: 3, Direction: exchange.Long},
			{ID: "1_9", SymbolID: 9, Direction: exchange.Long},
			{ID: "1_4", SymbolID: 4, Empty: true},
		},
		idx: map[string]decimal.Decimal{"BTC_USD": dec("100000"), "ETH": dec("3000")},
		tr:  &exchange.Trades{ContractsSymbols: []exchange.ContractSymbol{sym(1, "XBTC", "BTC"), sym(2, "XETH", "ETH"), sym(3, "XSOL", "SOL"), sym(4, "XDOT", "DOT")}},
	}
	sr := NewSnapshotReader(r, time.Hour, nil)
	snap, err := sr.Read(context.Background(), time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	var v View
	v.Join(snap, sr, map[string]string{"XBTC": "BTC_USD"})
	want := []struct {
		key        Key
		sym, index string
		has        bool
		f          float64
	}{
		{Key{"1_1", "LONG"}, "XBTC", "BTC_USD", true, 100000},
		{Key{"1_2", "SHORT"}, "XETH", "ETH", true, 3000},
		{Key{"1_3", "LONG"}, "XSOL", "SOL", false, 0},
		{Key{"1_9", "LONG"}, "", "", false, 0},
		{Key{ID: "1_4"}, "", "", false, 0},
	}
	if len(v.Rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(v.Rows), len(want))
	}
	for i, w := range want {
		r := v.Rows[i]
		name := ""
		if r.Sym != nil {
			name = r.Sym.Name
			if r.SymEnv == nil || r.SymEnv.Name != name {
				t.Errorf("row %d: SymEnv %+v, want the rules' %s", i, r.SymEnv, name)
			}
		}
		if r.Key != w.key || name != w.sym || r.IndexName != w.index || r.HasIndex != w.has || r.IndexF != w.f {
			t.Errorf("row %d = key %v sym %q index %q has %t %v, want %+v", i, r.Key, name, r.IndexName, r.HasIndex, r.IndexF, w)
		}
	}
	// Index names change on a reload: Forget, then the next join uses them.
	v.Forget()
	v.Join(snap, sr, nil)
	if v.Rows[0].IndexName != "BTC" || v.Rows[0].HasIndex {
		t.Errorf("after Forget: %+v", v.Rows[0])
	}
}

func TestKeyText(t *testing.T) {
	t.Parallel()
	for _, k := range []Key{{"1_1", "LONG"}, {ID: "1_1"}, {"a/b", "SHORT"}} {
		if got := ParseKey(k.String()); got != k {
			t.Errorf("ParseKey(%q) = %+v, want %+v", k.String(), got, k)
		}
	}
}

// A row's numbers are the position's decimals converted, whether the
// reader hands over the same decimals again (converted once, kept by
// place) or new ones, at the same place or another; FillRow fills the
// environment FillEnv fills.
func TestViewNumbers(t *testing.T) {
	t.Parallel()
	sym := exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: 1, Name: "XBTC", BaseName: "BTC"}}
	pos := func(id, entry, liq string) exchange.Position {
		return exchange.Position{ID: id, SymbolID: 1, Direction: exchange.Long, EntryPrice: dec(entry), LiquidationPrice: dec(liq),
			Quantity: dec("2.5"), Margin: dec("1000.25"), EntryValue: dec("250000"),
			RiskLimit: exchange.RiskLimit{InitialMarginRate: dec("0.01"), MaintenanceMarginRate: dec("0.005"), MaxQuantity: dec("100")}}
	}
	a, b := pos("1_1", "100000", "80000"), pos("1_2", "3000.5", "2500")
	r := &reader{idx: map[string]decimal.Decimal{"BTC": dec("99000")}, tr: &exchange.Trades{ContractsSymbols: []exchange.ContractSymbol{sym}}}
	sr := NewSnapshotReader(r, time.Hour, nil)
	now := time.Unix(1000, 0)
	var v View
	for step, list := range [][]exchange.Position{
		{a, b},
		{a, b},                            // the same decimals: kept
		{b, a},                            // swapped places
		{a, pos("1_2", "3000.5", "2400")}, // a new decimal of another value at a kept place
		{a, pos("1_2", "3000.5", "2400")}, // new decimals of the same values
		{a},                               // a place gone
		{{ID: "1_3", SymbolID: 1, Direction: exchange.Short}}, // zero decimals
	} {
		r.pos = list
		snap, err := sr.Read(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		v.Join(snap, sr, nil)
		for i := range v.Rows {
			row := &v.Rows[i]
			p := row.P
			if row.N == nil {
				continue // empty, or an unknown symbol
			}
			var want numsMemo
			if *row.N != *want.of(p) {
				t.Errorf("step %d row %d: numbers %+v, want %+v", step, i, *row.N, *want.of(p))
			}
			if row.N.LiquidationPrice != ToFloat(p.LiquidationPrice) || row.IndexF != 99000 {
				t.Errorf("step %d row %d: liquidation price %v, index %v", step, i, row.N.LiquidationPrice, row.IndexF)
			}
			var got, ref rules.Env
			FillRow(&got, row, true, now)
			FillEnv(&ref, p, row.SymEnv, row.Index, true, now)
			if got != ref {
				t.Errorf("step %d row %d: FillRow %+v, FillEnv %+v", step, i, got, ref)
			}
		}
		// The rows reused from the last tick are those a fresh view makes.
		var fresh View
		fresh.Join(snap, sr, nil)
		for i := range fresh.Rows {
			g, w := v.Rows[i], fresh.Rows[i]
			if (g.N == nil) != (w.N == nil) || (g.N != nil && *g.N != *w.N) {
				t.Errorf("step %d row %d: numbers %v, a fresh view's %v", step, i, g.N, w.N)
			}
			if (g.SymEnv == nil) != (w.SymEnv == nil) || (g.SymEnv != nil && *g.SymEnv != *w.SymEnv) {
				t.Errorf("step %d row %d: symbol %v, a fresh view's %v", step, i, g.SymEnv, w.SymEnv)
			}
			g.N, w.N, g.SymEnv, w.SymEnv = nil, nil, nil, nil
			if g != w {
				t.Errorf("step %d row %d: %+v, a fresh view's %+v", step, i, g, w)
			}
		}
		if len(v.memo) != len(list) {
			t.Errorf("step %d: %d places kept, want %d", step, len(v.memo), len(list))
		}
	}
}

// A refresh of the symbols (which fills the reader's map in place) leaves
// the reader as a new reader of the same list: a symbol dropped is unknown,
// one added or moved is found at its place in the new list, and the view
// joins the positions with it.
func TestSymbolsRefresh(t *testing.T) {
	t.Parallel()
	sym := func(id int64, name, base string) exchange.ContractSymbol {
		return exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: id, Name: name, BaseName: base}}
	}
	lists := []*exchange.Trades{
		{ContractsSymbols: []exchange.ContractSymbol{sym(1, "XBTC", "BTC"), sym(2, "XETH", "ETH"), sym(3, "XSOL", "SOL")}},
		{ContractsSymbols: []exchange.ContractSymbol{sym(3, "XSOL2", "SOL"), sym(1, "XBTC", "BTC")}},
		{ContractsSymbols: []exchange.ContractSymbol{sym(4, "XDOT", "DOT"), sym(2, "XETH", "ETH")}},
	}
	r := &reader{
		pos: []exchange.Position{{ID: "1_1", SymbolID: 1, Direction: exchange.Long}, {ID: "1_3", SymbolID: 3, Direction: exchange.Long}},
		idx: map[string]decimal.Decimal{"BTC": dec("100000")},
	}
	sr := NewSnapshotReader(r, time.Minute, nil)
	var v View
	for i, tr := range lists {
		r.tr = tr
		now := time.Unix(int64(60*i), 0) // every read refreshes
		snap, err := sr.Read(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		fr := NewSnapshotReader(&reader{pos: r.pos, idx: r.idx, tr: tr}, time.Minute, nil)
		if _, err := fr.Read(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		for id := int64(0); id <= 5; id++ {
			got, gok := sr.Symbol(id)
			want, wok := fr.Symbol(id)
			if gok != wok || gok && got != want {
				t.Errorf("list %d: Symbol(%d) = %v, %t; a new reader's %v, %t", i, id, got, gok, want, wok)
			}
		}
		v.Join(snap, sr, nil)
		for k, row := range v.Rows {
			want, ok := fr.Symbol(r.pos[k].SymbolID)
			if ok != (row.Sym != nil) || ok && row.Sym != want {
				t.Errorf("list %d, row %d: joined with %v, want %v", i, k, row.Sym, want)
			}
		}
	}
}

// failingReader fails its positions read.
type failingReader struct{ reader }

func (failingReader) Positions(context.Context) ([]exchange.Position, error) {
	return nil, errors.New("positions down")
}

// ReadInto reads what Read reads, into the snapshot it is given, and
// leaves that snapshot as it was when it returns none.
func TestReadInto(t *testing.T) {
	t.Parallel()
	sym := exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: 1, Name: "XBTC", BaseName: "BTC"}}
	r := reader{
		pos: []exchange.Position{{ID: "1_1", SymbolID: 1, Direction: exchange.Long}},
		idx: map[string]decimal.Decimal{"BTC": dec("100000")},
		tr:  &exchange.Trades{ContractsSymbols: []exchange.ContractSymbol{sym}},
	}
	ctx := context.Background()
	var dst Snapshot
	for i := range 3 {
		now := time.Unix(int64(i), 0)
		want, err := NewSnapshotReader(&r, time.Hour, nil).Read(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		got, err := NewSnapshotReader(&r, time.Hour, nil).ReadInto(ctx, now, &dst)
		if err != nil {
			t.Fatal(err)
		}
		if got != &dst || !reflect.DeepEqual(*got, *want) {
			t.Fatalf("ReadInto = %p %+v, want %p %+v", got, got, &dst, want)
		}
	}
	kept := dst
	if got, err := NewSnapshotReader(&failingReader{r}, time.Hour, nil).ReadInto(ctx, time.Unix(9, 0), &dst); got != nil || err == nil {
		t.Fatalf("a failed read returned %+v, %v", got, err)
	}
	if !reflect.DeepEqual(dst, kept) {
		t.Errorf("a failed read wrote %+v into the snapshot it was given, which held %+v", dst, kept)
	}
}
