package act

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// reducePlan is a cross long of qty at 64,200 and 10x (min quantity
// minQ, increment inc) with the index at 62,000 and 20,000 free, and a
// plan asking to reduce it by asked.
func reducePlan(t *testing.T, dir, qty, minQ, inc, asked string) (*Model, *Plan, decimal.Decimal) {
	t.Helper()
	rl := exchange.RiskLimit{ID: 1, MaintenanceMarginRate: dec("0.005"), MaxLeverage: 20}
	q := dec(qty)
	ev := q.Mul(dec("64200"))
	pos := &exchange.Position{ID: "1_1", SymbolID: 1, Direction: dir, Cross: true, Leverage: 10, Quantity: q, EntryPrice: dec("64200"),
		EntryValue: ev, Margin: margin.Margin(ev, 10), RiskLimit: rl, MinQuantity: dec(minQ)}
	mp := margin.Position{Symbol: "XBTC", Direction: exchange.Long, Quantity: q, Entry: pos.EntryPrice, Leverage: 10, Cross: true,
		RiskLimit: rl, Scale: 1, Held: pos.Margin, Value: ev, Index: dec("62000")}
	m := &Model{Acct: margin.Account{Free: dec("20000"), Positions: []margin.Position{mp}}, At: map[string]int{"XBTC": 0}, FreeKnown: true}
	sym := &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: 1, Name: "XBTC", BaseMinimumIncrement: dec(inc)}}
	pl := &Plan{Pos: pos, Sym: sym}
	return m, pl, dec(asked)
}

func TestDecideReduce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                       string
		dir, qty, minQ, inc, asked string
		want                       string // the order's quantity; "" when skipped
		note, skip                 string // substrings
	}{
		{"half", exchange.Long, "0.8", "0.001", "0.001", "0.4", "0.4", "", ""},
		{"rounded down to the increment", exchange.Long, "0.8", "0.001", "0.001", "0.4567", "0.456", "rounded down to 0.456 (increment 0.001)", ""},
		{"capped at the position", exchange.Long, "0.8", "0.001", "0.001", "1.5", "0.8", "capped at the position's 0.8", ""},
		{"raised to the minimum", exchange.Long, "0.8", "0.01", "0.001", "0.004", "0.01", "raised to the minimum order quantity 0.01", ""},
		{"position under the minimum", exchange.Long, "0.005", "0.01", "0.001", "0.004", "", "", "under the minimum order quantity 0.01"},
		{"rounds to nothing", exchange.Long, "0.8", "0", "0.1", "0.05", "", "", "rounds down to 0 at the increment 0.1"},
		{"nothing asked", exchange.Long, "0.8", "0.001", "0.001", "0", "", "", "nothing to send"},
		{"a negative quantity", exchange.Long, "0.8", "0.001", "0.001", "-1", "", "", "nothing to send"},
		{"unknown direction", "SIDEWAYS", "0.8", "0.001", "0.001", "0.4", "", "", "would grow the position: direction \"SIDEWAYS\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, pl, asked := reducePlan(t, tt.dir, tt.qty, tt.minQ, tt.inc, tt.asked)
			d := DecideReduce(m, pl, asked)
			if tt.want == "" {
				if d.Order != nil || !strings.Contains(d.Skip, tt.skip) {
					t.Fatalf("decision %+v, want skipped with %q", d, tt.skip)
				}
				return
			}
			if d.Order == nil {
				t.Fatalf("skipped: %s", d.Skip)
			}
			o := d.Order
			if !o.Quantity.Equal(dec(tt.want)) || o.Side != exchange.Sell || o.Type != exchange.OrderMarket || o.Flags != exchange.ReduceOnly|exchange.ImmediateOrCancel {
				t.Errorf("order %+v, want SELL %s reduce-only IOC", o, tt.want)
			}
			if !strings.Contains(d.Note, tt.note) || (tt.note == "" && d.Note != "") {
				t.Errorf("note %q, want %q", d.Note, tt.note)
			}
			// The prediction: the fill at the index, the quantity left.
			if d.Pred == nil || !d.Pred.QuantityAfter.Equal(dec(tt.qty).Sub(dec(tt.want))) || !d.Pred.Price.Equal(dec("62000")) {
				t.Fatalf("prediction %+v", d.Pred)
			}
			realised := dec("62000").Sub(dec("64200")).Mul(dec(tt.want))
			if !d.Pred.RealisedPNL.Equal(realised) || !d.Pred.FreeAfter.Equal(dec("20000").Add(d.Pred.MarginReleased).Add(realised)) {
				t.Errorf("realised %s, free after %s", d.Pred.RealisedPNL, d.Pred.FreeAfter)
			}
			rd := d.Pred.Reduced()
			if !rd.Reduced || !rd.After.LessThan(rd.Before) {
				t.Errorf("liquidation %s → %s: a reduced cross long moves away", rd.Before, rd.After)
			}
			for _, want := range []string{"quantity " + tt.qty + " → ", "realised PNL", "free balance 20000 → ", "cross pool", "XBTC liquidation"} {
				if !strings.Contains(d.Pred.String(), want) {
					t.Errorf("prediction %q lacks %q", d.Pred.String(), want)
				}
			}
			if r := d.Pred.Record(); r.RealisedPNL == nil || r.QuantityAfter == nil || !r.MarginMoved.IsNegative() || r.FreeAfter == nil {
				t.Errorf("record %+v", r)
			}
		})
	}
}

// Without a model nothing is predicted, and the order still goes out.
func TestDecideReduceNoModel(t *testing.T) {
	t.Parallel()
	_, pl, asked := reducePlan(t, exchange.Long, "0.8", "0.001", "0.001", "0.4")
	if d := DecideReduce(nil, pl, asked); d.Order == nil || d.Pred != nil {
		t.Errorf("decision %+v", d)
	}
}

func TestCheckReduces(t *testing.T) {
	t.Parallel()
	long := &exchange.Position{Direction: exchange.Long, Quantity: dec("0.8")}
	short := &exchange.Position{Direction: exchange.Short, Quantity: dec("12")}
	tests := []struct {
		name string
		pos  *exchange.Position
		o    exchange.OrderRequest
		ok   bool
	}{
		{"sell reduces a long", long, exchange.ReduceOnlyIOC(exchange.Sell, dec("0.4")), true},
		{"buy reduces a short", short, exchange.ReduceOnlyIOC(exchange.Buy, dec("12")), true},
		{"buy grows a long", long, exchange.ReduceOnlyIOC(exchange.Buy, dec("0.4")), false},
		{"sell grows a short", short, exchange.ReduceOnlyIOC(exchange.Sell, dec("1")), false},
		{"more than held reverses it", long, exchange.ReduceOnlyIOC(exchange.Sell, dec("0.9")), false},
		{"not reduce-only", long, exchange.OrderRequest{Side: exchange.Sell, Type: exchange.OrderMarket, Quantity: dec("0.4"), Flags: exchange.ImmediateOrCancel}, false},
		{"empty position", &exchange.Position{Direction: exchange.Long, Empty: true}, exchange.ReduceOnlyIOC(exchange.Sell, dec("0.4")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckReduces(tt.pos, tt.o)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrWouldGrow)) {
				t.Errorf("err = %v, want ok %t (else ErrWouldGrow)", err, tt.ok)
			}
		})
	}
}

// Rules asking for reduce_position on one position merge to the largest
// quantity; a fraction is of the position's quantity.
func TestReduceMerge(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("r.yaml", []byte(`rules:
  - name: quarter
    when: liquidationDistance < 0.05
    actions: [{action: reduce_position, fraction: 0.25}]
  - name: fixed
    when: liquidationDistance < 0.03
    actions: [{action: reduce_position, quantity: "0.3"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	_, pl, _ := reducePlan(t, exchange.Long, "0.8", "0.001", "0.001", "0")
	var ev rules.Evaluator
	env := &rules.Env{}
	pl.Pos.LiquidationPrice = dec("33101")
	market.FillEnv(env, pl.Pos, &rules.Symbol{Name: "XBTC"}, dec("62000"), true, time.Time{})
	if reason := env.NoData(); reason != "" {
		t.Fatalf("env has no data: %s", reason)
	}
	for i, r := range set.Rules {
		pl.Add(DefaultKinds(), i, r, &alert.RuleState{}, nil, &ev, env)
	}
	if len(pl.Steps) != 1 {
		t.Fatalf("plan steps %v, want one reduce", pl.Steps)
	}
	c, ok := pl.Steps[0].(*ReduceStep)
	if !ok || !c.Asked.Equal(dec("0.3")) || strings.Join(c.Rules, ",") != "quarter,fixed" {
		t.Fatalf("plan step %#v, want a reduce of 0.3 by quarter,fixed", pl.Steps[0])
	}
	for _, d := range pl.Due {
		if len(d.Asked) != 1 || d.Asked[0] != pl.Steps[0] || d.Err != nil {
			t.Errorf("due %s: asked %v err %v", d.Rule.Name, d.Asked, d.Err)
		}
	}
}

// A reduce order's prediction is marked unverified where the model does not
// fit, in its text and its audit record, as a settings call's is (issue 31).
func TestReducePredictionUnverifiedWhereTheModelDoesNotFit(t *testing.T) {
	m, pl, asked := reducePlan(t, exchange.Long, "0.8", "0.001", "0.001", "0.4")
	m.Unfit = "XBTC (margin 100.5 reported, 6000 modelled)"
	d := DecideReduce(m, pl, asked)
	if d.Pred == nil {
		t.Fatal("no prediction")
	}
	if s := d.Pred.String(); !strings.HasPrefix(s, "unverified: model does not fit XBTC (margin 100.5 reported, 6000 modelled); quantity 0.8 → 0.4") {
		t.Errorf("prediction said %q", s)
	}
	if r := d.Pred.Record(); r.Unverified != m.Unfit {
		t.Errorf("audit record's unverified = %q", r.Unverified)
	}
}

// A reduce order's prediction shows the stress grid before and after (its
// text, its audit record) without being decided by it: halving a cross
// long whose pool a likely move liquidates lowers the expected loss and
// pushes the fatal move out; without σ there is no grid to show.
func TestReducePredictionShowsTheStressGrid(t *testing.T) {
	t.Parallel()
	m, pl, asked := reducePlan(t, exchange.Long, "0.8", "0.001", "0.001", "0.4")
	m.Acct.Free = dec("500") // the pool 7.3% from its liquidation: within 3σ of 3%
	m.Sigma, m.Likely = func(string) float64 { return 0.03 }, 3
	d := DecideReduce(m, pl, asked)
	p := d.Pred
	if p == nil || !p.Stressed {
		t.Fatalf("no grid: %+v", p)
	}
	fb, failing := p.StressBefore.FatalFor("XBTC", exchange.Long)
	fa, stillFailing := p.StressAfter.FatalFor("XBTC", exchange.Long)
	if !failing || !(p.StressAfter.Expected < p.StressBefore.Expected) || (stillFailing && fa.K >= fb.K) {
		t.Errorf("grid before %+v, after %+v", p.StressBefore, p.StressAfter)
	}
	if s := p.String(); !strings.Contains(s, "; stress: expected loss ") || !strings.Contains(s, "(beside the PNL realised)") {
		t.Errorf("prediction said %q", s)
	}
	r := p.Record()
	if r.ExpectedLossBefore == nil || r.ExpectedLossAfter == nil || !r.ExpectedLossAfter.LessThan(*r.ExpectedLossBefore) ||
		len(r.StressLossBefore) != 10 || len(r.StressLossAfter) != 10 || r.Stress == "" {
		t.Errorf("audit record %+v", r)
	}
	m, pl, asked = reducePlan(t, exchange.Long, "0.8", "0.001", "0.001", "0.4")
	if p := DecideReduce(m, pl, asked).Pred; p == nil || p.Stressed || strings.Contains(p.String(), "stress") || p.Record().ExpectedLossBefore != nil {
		t.Errorf("without σ: %+v", p)
	}
}

// An order is judged at mark to market: it costs its fee and spread, and
// saves the expected forfeit it removes. Far from liquidation holding is
// cheaper and nothing goes out, said with the figures; near it the order
// goes out as asked.
func TestDecideReduceAtMarkToMarket(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		free  string
		sigma float64
		fast  string
		want  string // "" when skipped
		skip  string
	}{
		// 20,000 free behind 0.8 BTC: the pool's point is far beyond any
		// likely move; halving pays 0.4 × 62,000 × 0.05% = 12.40.
		{name: "far: holding is cheaper", free: "20000", sigma: 0.02, skip: "holding is as cheap in expectation: the expected loss to liquidations over the horizon is 0.01 (the cross pool (XBTC): 0.0% to touch its liquidation point at -23.3σ (every index together) and lose 256.80); reducing 0.4 pays 12.40 in fee and spread"},
		// Nothing free: the pool's point is 6.3% away, 1.3σ at σ 5%.
		{name: "near: the order goes out", free: "0", sigma: 0.05, want: "0.4"},
		// Far, but the index is in a fast move: σ lags, the ask stands.
		{name: "far in a fast move: the order goes out", free: "20000", sigma: 0.02, fast: "BTC moved 6.00% within 5m", want: "0.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, pl, asked := reducePlan(t, exchange.Long, "0.8", "0.001", "0.001", "0.4")
			m.Acct.Free = dec(tc.free)
			m.Sigma = func(string) float64 { return tc.sigma }
			m.Likely, m.OrderCost = 3, 0.0005
			m.Fast = func(string) string { return tc.fast }
			d := DecideReduce(m, pl, asked)
			if tc.want == "" {
				if d.Order != nil || !strings.Contains(d.Skip, tc.skip) {
					t.Fatalf("decision %+v, want skipped with %q", d, tc.skip)
				}
				return
			}
			if d.Order == nil || !d.Order.Quantity.Equal(dec(tc.want)) {
				t.Fatalf("decision %+v (skip %q), want an order of %s", d, d.Skip, tc.want)
			}
		})
	}
}

// Dust: what a reduce would leave under engine.dust_notional closes the
// position whole; a position that is dust already is closed whole, or left
// when no order that small is taken.
func TestDecideReduceDust(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, qty, minQ, asked string
		want, note, skip       string
	}{
		{name: "the rest would be dust", qty: "0.8", minQ: "0.001", asked: "0.79", want: "0.8", note: "closed whole: the 0.01 left would be dust (620"},
		{name: "the rest is not dust", qty: "0.8", minQ: "0.001", asked: "0.4", want: "0.4"},
		{name: "dust already", qty: "0.01", minQ: "0.001", asked: "0.005", want: "0.01", note: "closed whole: the position's 0.01 is dust (620"},
		{name: "dust under the minimum", qty: "0.0005", minQ: "0.001", asked: "0.0005", skip: "under the minimum order quantity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, pl, asked := reducePlan(t, exchange.Long, tc.qty, tc.minQ, "0.0001", tc.asked)
			m.DustNotional = dec("1000")
			d := DecideReduce(m, pl, asked)
			if tc.want == "" {
				if d.Order != nil || !strings.Contains(d.Skip, tc.skip) {
					t.Fatalf("decision %+v, want skipped with %q", d, tc.skip)
				}
				return
			}
			if d.Order == nil || !d.Order.Quantity.Equal(dec(tc.want)) || !strings.Contains(d.Note, tc.note) {
				t.Fatalf("decision %+v (skip %q), want %s with note %q", d, d.Skip, tc.want, tc.note)
			}
		})
	}
}

// An isolated position reduced once is not reduced again at the same
// distance (a reduce does not move its liquidation price): only once the
// price came a tenth closer, and the memory goes when the order did not
// fill, the position is cross, or the price moved well away.
func TestRepeatedReduce(t *testing.T) {
	t.Parallel()
	iso := func(q string) *exchange.Position { return &exchange.Position{Quantity: dec(q)} }
	for _, tc := range []struct {
		name     string
		pos      *exchange.Position
		distance float64
		blocked  bool
		kept     bool
	}{
		{"the same distance", iso("0.125"), 0.0199, true, true},
		{"a little closer", iso("0.125"), 0.0185, true, true},
		{"a tenth closer", iso("0.125"), 0.0179, false, true},
		{"not filled", iso("0.25"), 0.0199, false, false},
		{"cross", &exchange.Position{Quantity: dec("0.125"), Cross: true}, 0.0199, false, false},
		{"moved well away", iso("0.125"), 0.041, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &reducePosition{last: map[string]lastReduce{"XBTC": {distance: 0.02, before: dec("0.25")}}}
			why := k.repeatedReduce("XBTC", tc.pos, tc.distance)
			if (why != "") != tc.blocked {
				t.Errorf("repeatedReduce = %q, want blocked %t", why, tc.blocked)
			}
			if _, kept := k.last["XBTC"]; kept != tc.kept {
				t.Errorf("memory kept %t, want %t", kept, tc.kept)
			}
		})
	}
}
