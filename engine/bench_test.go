package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// benchRules are twenty rules of the kinds rules.example.yaml has, with
// thresholds no benchmark position crosses, so the tick measures the
// evaluation and state work of a quiet account.
func benchRules(tb testing.TB) *rules.Set {
	tb.Helper()
	whens := []string{
		"liquidationDistance < 0.10", "liquidationDistance < 0.05", "liquidationDistance < 0.03",
		"position.leverage > riskLimit.maxLeverage", "leverageRatio > 1.5",
		"position.quantity > 0.9 * riskLimit.maxQuantity", "position.riskLevel >= 90",
		"liquidationDistance < 0.05 && position.leverage > 10", "notional > 5e9",
		"position.cross && liquidationDistance < 0.04", "position.side < 0 && liquidationDistance < 0.02",
		"position.margin < 0.001 * notional", "position.leverage >= 100", "indexPrice <= 0.5 * position.entryPrice",
		"position.realizedPNL < -1e9", "liquidationDistance < 0.01 || leverageRatio > 2",
		"position.symbol == 'XNONE' && position.leverage > 1", "position.quantity / position.margin > 1e6",
		"position.entryValue > 1e12", "riskLimit.maintenanceMarginRate > 0.5",
	}
	set := &rules.Set{}
	for i, w := range whens {
		set.Rules = append(set.Rules, rule(tb, rules.Rule{
			Name: fmt.Sprintf("r%02d", i), When: w, Cooldown: time.Minute,
			Actions: []rules.Action{{Kind: rules.CancelOrders}},
		}))
	}
	return set
}

// benchAccount is 1,000 non-empty positions on 1,000 symbols.
func benchAccount(n int) *fakeExchange {
	fx := &fakeExchange{index: make(map[string]decimal.Decimal, n)}
	for i := range n {
		id := int64(i + 1)
		base := fmt.Sprintf("B%04d", i)
		fx.symbols = append(fx.symbols, symbol(id, fmt.Sprintf("X%04d", i), base, 50))
		dir := exchange.Long
		liq := "80"
		if i%2 == 1 {
			dir, liq = exchange.Short, "120"
		}
		p := position(id, dir, 5+i%10, i%3 == 0, "2.5", "100", liq)
		p.RiskLimit = riskLimit(50)
		fx.positions = append(fx.positions, p)
		fx.index[base] = decimal.NewFromFloat(100 + float64(i%7))
	}
	return fx
}

// BenchmarkTick is one tick's work excluding the network: the reader hands
// over already-decoded positions and prices, as the client does after
// decoding. Target: ≤ 2 ms for 1,000 positions × 20 rules on one core.
func BenchmarkTick(b *testing.B) {
	fx := benchAccount(1000)
	e, err := New(Config{}, benchRules(b), Deps{Reader: fx, Actuator: fx})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Tick(ctx, t0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var evals int
	for i := 0; b.Loop(); i++ {
		rep, err := e.Tick(ctx, t0.Add(time.Duration(i+1)*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		evals = rep.Evaluations
	}
	b.StopTimer()
	if evals != 20_000 {
		b.Fatalf("evaluations per tick = %d, want 20000", evals)
	}
	if s, c := fx.calls(); len(s)+len(c) != 0 {
		b.Fatalf("benchmark account acted: %d settings, %d cancels", len(s), len(c))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/20_000, "ns/eval")
}

// BenchmarkTickWindowed is BenchmarkTick with the rules of issue 13 among
// the twenty: five over the recent past (three windows over a position's
// series, timeToLiquidation, one over the account's), two account rules
// and one position rule reading the account. Target: ≤ 2 ms.
func BenchmarkTickWindowed(b *testing.B) {
	fx := benchAccount(1000)
	set := benchRules(b)
	windowed := []string{
		`change(indexPrice, "5m") < -0.5`, `rate(liquidationDistance, "1m") < -1`,
		`min_over_time(liquidationDistance, "10m") < 0.001`, `timeToLiquidation < 1`,
		`drawdown(account.equity, "24h") > 0.99 && liquidationDistance < 0.05`,
		`account.minLiquidationDistance < 0.0001 && liquidationDistance < 0.05`,
	}
	for i, w := range windowed {
		set.Rules[i] = rule(b, rules.Rule{Name: fmt.Sprintf("w%02d", i), When: w, Cooldown: time.Minute,
			Actions: []rules.Action{{Kind: rules.CancelOrders}}})
	}
	for i, w := range []string{"account.marginRatio > 0.99", `account.leverage > 1000 || drawdown(account.equity, "1h") > 0.99`} {
		set.Rules[len(windowed)+i] = rule(b, rules.Rule{Name: fmt.Sprintf("a%02d", i), When: w, Cooldown: time.Minute,
			Scope: rules.ScopeAccount, Targets: rules.Targets{Kind: rules.TargetAll},
			Actions: []rules.Action{{Kind: rules.CancelOrders}}})
	}
	e, err := New(Config{}, set, Deps{Reader: fx, Actuator: fx})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 600 { // ten minutes of ticks: every window covered
		if _, err := e.Tick(ctx, t0.Add(time.Duration(i)*time.Second)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	var evals int
	for i := 0; b.Loop(); i++ {
		rep, err := e.Tick(ctx, t0.Add(time.Duration(600+i)*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		evals = rep.Evaluations
	}
	b.StopTimer()
	if evals != 18_002 {
		b.Fatalf("evaluations per tick = %d, want 18,002", evals)
	}
	if s, c := fx.calls(); len(s)+len(c) != 0 {
		b.Fatalf("benchmark account acted: %d settings, %d cancels", len(s), len(c))
	}
	for _, r := range e.Active() {
		// timeToLiquidation has no data on positions whose distance
		// does not shrink; nothing fires.
		if r.State == alert.Firing || r.State == alert.Pending {
			b.Fatalf("a rule is %s on %s: %+v", r.State, r.Symbol, r)
		}
	}
}
