package market

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
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
	// 16 to 18 digits: within one part in 10^15.
	d := dec("1234.56789012345678")
	if got := ToFloat(d); math.Abs(got-1234.56789012345678) > 1e-12 {
		t.Errorf("ToFloat(%s) = %v", d, got)
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
