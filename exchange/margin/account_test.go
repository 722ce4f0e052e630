package margin

import (
	"math/rand/v2"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

func rl(maxLev int, mmr string) exchange.RiskLimit {
	return exchange.RiskLimit{MaxLeverage: maxLev, MaintenanceMarginRate: dec(mmr)}
}

// The hand-worked accounts of the tests below (mmr 0.5% unless said):
//
//	XBTC long 0.5 @ 64,000 ×20: EV 32,000, margin 1,600, maintenance 160
//	XETH short 10 @ 3,000 ×10:  EV 30,000, margin 3,000, maintenance 150
//	XSOL long 400 @ 150 ×15:    EV 60,000, margin 4,000, maintenance 300
func xbtc(cross bool) Position {
	return Position{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("0.5"), Entry: dec("64000"), Leverage: 20,
		Cross: cross, RiskLimit: rl(50, "0.005"), Index: dec("64000"), Scale: 2}
}

func xeth(cross bool, index string) Position {
	return Position{Symbol: "XETH", Direction: exchange.Short, Quantity: dec("10"), Entry: dec("3000"), Leverage: 10,
		Cross: cross, RiskLimit: rl(50, "0.005"), Index: dec(index), Scale: 2}
}

func xsol(cross bool) Position {
	return Position{Symbol: "XSOL", Direction: exchange.Long, Quantity: dec("400"), Entry: dec("150"), Leverage: 15,
		Cross: cross, RiskLimit: rl(20, "0.005"), Index: dec("150"), Scale: 2}
}

func TestAccountLiquidationPrice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		acct Account
		i    int
		want string
	}{
		// 64,000 − (1,600 − 160)/0.5
		{"isolated long", Account{Free: dec("3000"), Positions: []Position{xbtc(false)}}, 0, "61120"},
		// 3,000 + (3,000 − 150)/10
		{"isolated short", Account{Free: dec("3000"), Positions: []Position{xeth(false, "3000")}}, 0, "3285"},
		// 64,000 − (3,000 + 1,600 − 160)/0.5
		{"one cross long", Account{Free: dec("3000"), Positions: []Position{xbtc(true)}}, 0, "55120"},
		// pool 3,000 + 1,600 + 3,000 − 1,000 (XETH's loss at 3,100); requirement 160 + 150:
		// 64,000 − (6,600 − 310)/0.5
		{"two cross, the long", Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(true, "3100")}}, 0, "51420"},
		// pool 3,000 + 1,600 + 3,000 + 0 (XBTC at its entry): 3,000 + (7,600 − 310)/10
		{"two cross, the short", Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(true, "3100")}}, 1, "3729"},
		// an isolated neighbour is not in the pool
		{"cross beside isolated", Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(false, "3100")}}, 0, "55120"},
		// risk-limit steps: EV 32,000 over a base of 20,000 in steps of 10,000 → 2 steps of +0.5%: mmr 1.5%, maintenance 480
		{"risk-limit steps", Account{Positions: []Position{func() Position {
			p := xbtc(false)
			p.RiskLimit.RiskLimitBase, p.RiskLimit.RiskLimitStep, p.RiskLimit.MarginRateStep, p.RiskLimit.MaxRiskLimitSteps = dec("20000"), dec("10000"), dec("0.005"), 5
			return p
		}()}}, 0, "61760"}, // 64,000 − (1,600 − 480)/0.5
		{"empty", Account{Positions: []Position{{Symbol: "XDOGE", Direction: exchange.Long}}}, 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantDec(t, "liquidation", tt.acct.LiquidationPrice(tt.i), tt.want)
		})
	}
}

func TestApply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		acct                 Account
		leverage             int
		cross                bool
		before, after, moved string
		free                 string
		affordable           bool
	}{
		// Isolating the lone cross position ring-fences the account and
		// moves its liquidation price from 55,120 to 61,120: closer.
		{"isolate a cross long", Account{Free: dec("3000"), Positions: []Position{xbtc(true)}}, 20, false, "55120", "61120", "0", "3000", true},
		// Lowering an isolated leverage 15→10 moves 2,000 into the margin:
		// 150 − (4,000 − 300)/400 = 140.75 → 150 − (6,000 − 300)/400 = 135.75.
		{"lower isolated", Account{Free: dec("3000"), Positions: []Position{xsol(false)}}, 10, false, "140.75", "135.75", "2000", "1000", true},
		// To 2x it needs 26,000 the account does not have.
		{"lower isolated unaffordable", Account{Free: dec("3000"), Positions: []Position{xsol(false)}}, 2, false, "140.75", "75.75", "26000", "-23000", false},
		// A cross leverage cut moves free balance into margin: the pool,
		// and the liquidation price, stay.
		{"lower cross", Account{Free: dec("3000"), Positions: []Position{xbtc(true)}}, 10, true, "55120", "55120", "1600", "1400", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			lev := tt.acct.Positions[0].Leverage
			next, eff := tt.acct.Apply(0, tt.leverage, tt.cross)
			if tt.acct.Positions[0].Leverage != lev {
				t.Error("Apply changed the account it was called on")
			}
			wantDec(t, "before", eff.LiquidationBefore, tt.before)
			wantDec(t, "after", eff.LiquidationAfter, tt.after)
			wantDec(t, "margin moved", eff.MarginMoved, tt.moved)
			wantDec(t, "free after", eff.FreeAfter, tt.free)
			wantDec(t, "account free", next.Free, tt.free)
			if eff.Affordable != tt.affordable {
				t.Errorf("affordable = %t, want %t", eff.Affordable, tt.affordable)
			}
			if next.Positions[0].Leverage != tt.leverage || next.Positions[0].Cross != tt.cross {
				t.Errorf("the account after holds %dx cross=%t", next.Positions[0].Leverage, next.Positions[0].Cross)
			}
		})
	}
	// Isolating is closer; lowering an isolated leverage is farther.
	_, iso := Account{Free: dec("3000"), Positions: []Position{xbtc(true)}}.Apply(0, 20, false)
	if !iso.Closer(exchange.Long, dec("64000")) {
		t.Error("isolating a cross long is not reported closer")
	}
	_, low := Account{Free: dec("3000"), Positions: []Position{xsol(false)}}.Apply(0, 10, false)
	if low.Closer(exchange.Long, dec("150")) {
		t.Error("lowering an isolated leverage is reported closer")
	}
}

func TestInferFree(t *testing.T) {
	t.Parallel()
	acct := Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(true, "3100"), xsol(false)}}
	for i := range 2 {
		free, ok := acct.InferFree(i, acct.LiquidationPrice(i))
		if !ok {
			t.Fatalf("position %d: not inferred", i)
		}
		// The liquidation price is rounded to a cent: the answer is within
		// a cent times the quantity.
		if diff := free.Sub(acct.Free).Abs(); diff.GreaterThan(acct.Positions[i].Quantity.Mul(dec("0.01"))) {
			t.Errorf("position %d: inferred free %s, want 3000", i, free)
		}
	}
	if _, ok := acct.InferFree(2, dec("140")); ok {
		t.Error("inferred a free balance from an isolated position")
	}
}

// randomAccount is a seeded account of one to four positions on distinct
// symbols, some cross, with index prices near their entries.
func randomAccount(r *rand.Rand) Account {
	a := Account{Free: decimal.NewFromInt(int64(r.IntN(20000)))}
	for i := range 1 + r.IntN(4) {
		entry := decimal.NewFromInt(int64(10 + r.IntN(100000)))
		move := decimal.NewFromFloat(1 + (r.Float64()-0.5)*0.1).Round(4)
		dir := exchange.Long
		if r.IntN(2) == 0 {
			dir = exchange.Short
		}
		a.Positions = append(a.Positions, Position{
			Symbol: string(rune('A' + i)), Direction: dir,
			Quantity: decimal.NewFromInt(int64(1 + r.IntN(100))).Div(decimal.NewFromInt(10)),
			Entry:    entry, Leverage: 1 + r.IntN(50), Cross: r.IntN(2) == 0,
			RiskLimit: rl(50, "0.005"), Index: entry.Mul(move), Scale: 2,
		})
	}
	return a
}

// Property: lowering an isolated position's leverage never moves its
// liquidation price closer to the index.
func TestPropertyLowerIsolatedNeverCloser(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		a := randomAccount(r)
		i := r.IntN(len(a.Positions))
		a.Positions[i].Cross = false
		p := a.Positions[i]
		target := 1 + r.IntN(p.Leverage)
		_, eff := a.Apply(i, target, false)
		if eff.Closer(p.Direction, p.Index) {
			t.Fatalf("%+v: leverage %d→%d moved the liquidation price closer: %s → %s", p, p.Leverage, target, eff.LiquidationBefore, eff.LiquidationAfter)
		}
	}
}

// Property: isolating a cross position never moves its liquidation price
// farther from the index while the rest of the pool (the free balance and
// the other cross positions' equity) covers the others' maintenance
// margin, which holds for any account the exchange has not liquidated.
func TestPropertyIsolateNeverFarther(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	checked := 0
	for range 2000 {
		a := randomAccount(r)
		i := r.IntN(len(a.Positions))
		a.Positions[i].Cross = true
		rest := a.Free
		for j, o := range a.Positions {
			if j != i && o.Cross {
				rest = rest.Add(o.Margin()).Add(o.PNL(o.Index)).Sub(o.Maintenance())
			}
		}
		if rest.IsNegative() {
			continue
		}
		checked++
		p := a.Positions[i]
		_, eff := a.Apply(i, p.Leverage, false)
		before, _ := Distance(p.Direction, p.Index, eff.LiquidationBefore)
		after, ok := Distance(p.Direction, p.Index, eff.LiquidationAfter)
		// One cent of rounding either way.
		if ok && eff.LiquidationBefore.IsPositive() && after.GreaterThan(before.Add(dec("0.01").Div(p.Index).Mul(dec("2")))) {
			t.Fatalf("%+v: isolating moved the liquidation price farther: %s → %s", p, eff.LiquidationBefore, eff.LiquidationAfter)
		}
	}
	if checked < 500 {
		t.Fatalf("only %d accounts checked", checked)
	}
}

// Property: a cross leverage change the free balance funds leaves every
// cross position's liquidation price where it was.
func TestPropertyCrossLeverageKeepsThePool(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		a := randomAccount(r)
		i := r.IntN(len(a.Positions))
		a.Positions[i].Cross = true
		next, eff := a.Apply(i, 1+r.IntN(a.Positions[i].Leverage), true)
		if !eff.Affordable {
			continue
		}
		for j := range a.Positions {
			if a.Positions[j].Cross && !a.LiquidationPrice(j).Equal(next.LiquidationPrice(j)) {
				t.Fatalf("position %d moved from %s to %s after a cross leverage change on %d", j, a.LiquidationPrice(j), next.LiquidationPrice(j), i)
			}
		}
	}
}

// The all-at-once forms agree with the one-position forms (the prices in
// value and exponent: a prediction reads either).
func TestCollateralsMatch(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		a := randomAccount(r)
		cs, liqs := a.Collaterals(), a.CrossLiquidationPrices()
		for i, p := range a.Positions {
			if !p.Cross {
				continue
			}
			if !cs[i].Equal(a.Collateral(i)) || !SameDec(liqs[i], a.LiquidationPrice(i)) {
				t.Fatalf("position %d of %+v: %s/%s vs %s/%s", i, a, cs[i], liqs[i], a.Collateral(i), a.LiquidationPrice(i))
			}
		}
	}
}

// PositionOf keeps the exchange's listed margin and entry value and
// models a leverage below 1 as the 1 that Margin charges.
func TestPositionOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		leverage int
		want     int
	}{
		{"set", 10, 10},
		{"never set", 0, 1},
		{"nonsense", -3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := exchange.Position{Direction: exchange.Short, Quantity: dec("2"), EntryPrice: dec("100"), Leverage: tc.leverage, Cross: true,
				RiskLimit: rl(20, "0.005"), Margin: dec("20.5"), EntryValue: dec("200.01")}
			got := PositionOf(&p, "XBTC", 2)
			if got.Leverage != tc.want || got.Symbol != "XBTC" || got.Scale != 2 || !got.Cross || got.Direction != exchange.Short {
				t.Errorf("PositionOf = %+v", got)
			}
			if !got.Held.Equal(dec("20.5")) || !got.Value.Equal(dec("200.01")) || !got.Index.IsZero() || !got.MM.IsZero() {
				t.Errorf("figures: held %s value %s index %s mm %s", got.Held, got.Value, got.Index, got.MM)
			}
			if got.Margin().String() != "20.5" {
				t.Errorf("Margin() = %s, want the listed 20.5", got.Margin())
			}
		})
	}
}

// marginMovedReference is marginMoved as the decimals give it.
func marginMovedReference(np, p *Position, free decimal.Decimal) (decimal.Decimal, decimal.Decimal) {
	moved := np.Margin().Sub(p.Margin())
	return moved, free.Sub(moved)
}

// The margin a settings call moves, and the free balance after it, are
// the decimals' in value and exponent, on the coefficients or not: entry
// values of few and many places and digits (past 18), margins held and
// not, leverages up to 200, free balances unknown (the zero value),
// small and past 18 digits.
func TestMarginMovedIsTheDecimals(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 34))
	num := func() decimal.Decimal {
		switch r.IntN(6) {
		case 0:
			return decimal.New(1+r.Int64N(1<<62), -int32(r.IntN(20))) // up to 19 digits
		case 1:
			return decimal.New(1+r.Int64N(1_000_000), int32(r.IntN(4))) // a positive exponent
		case 2:
			return decimal.RequireFromString("123456789012345678901234.5678") // past 18 digits
		default:
			return decimal.New(1+r.Int64N(100_000_000), -int32(r.IntN(9)))
		}
	}
	fast := 0
	for run := range 20000 {
		p := Position{Symbol: "X", Direction: exchange.Long, Quantity: num(), Entry: num(), Leverage: 1 + r.IntN(200)}
		if r.IntN(2) == 0 {
			p.Value = num()
		}
		if r.IntN(2) == 0 {
			p.Held = num()
		}
		np := p
		np.Leverage, np.Held = 1+r.IntN(200), decimal.Zero
		var free decimal.Decimal // unknown: the zero value
		switch r.IntN(3) {
		case 0:
			free = num()
		case 1:
			free = num().Neg()
		}
		gm, ga := marginMoved(&np, &p, free)
		wm, wa := marginMovedReference(&np, &p, free)
		if !SameDec(gm, wm) || !SameDec(ga, wa) {
			t.Fatalf("run %d: %+v → leverage %d, free %s: moved %s (%d), after %s (%d); the decimals %s (%d), %s (%d)", run, p, np.Leverage, free,
				gm, gm.Exponent(), ga, ga.Exponent(), wm, wm.Exponent(), wa, wa.Exponent())
		}
		if ev, ok := toFixed(np.EntryValue()); ok {
			if _, ok := marginFixed(ev, true, np.Leverage); ok {
				fast++
			}
		}
	}
	if fast < 5000 {
		t.Fatalf("%d of 20000 on the coefficients", fast)
	}
}
