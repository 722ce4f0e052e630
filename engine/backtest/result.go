package backtest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Result is what a backtest found. Its size is bounded whatever the length
// of the data: series are downsampled, markers and differences capped.
type Result struct {
	// From and To are the times of the first and last tick.
	From, To time.Time
	// Steps is the number of data steps replayed; Ticks the engine ticks
	// of each run (more than Steps with Options.Interval).
	Steps, Ticks int
	// Guarded ran the rules' actions; Unguarded the same rules in dry run.
	Guarded, Unguarded RunResult
	// Baseline ran Options.Baseline's rules with their actions.
	Baseline *RunResult
	// Diffs are the decisions of the guarded and baseline runs that differ,
	// oldest first, at most Options.MaxDiffs; DiffCount counts them all.
	Diffs     []Diff
	DiffCount int
	// Symbols are the series of every position held at the start.
	Symbols []SymbolSeries
	// Equity is the account equity of both runs, sampled as the symbols'
	// points are.
	Equity []EquityPoint
	// Warnings are problems that did not stop the replay.
	Warnings []string

	// kinds is the rules' table of action kinds, by which actions are
	// named and drawn (nil: rules.DefaultKinds).
	kinds rules.Kinds
}

// RunResult is one run's outcome.
type RunResult struct {
	Name        string
	Evaluations int64
	// Liquidations are the positions the exchange liquidated, oldest first.
	Liquidations []Liquidation
	// Said are the symbols the guard said liquidated (its reconciler's
	// liquidated records), oldest first: the guard reads a liquidation at
	// the tick after the exchange made it, so one made at the last tick of
	// the data is not said.
	Said []string
	// Closer are the guarded run's settings calls that left their
	// position closer to its liquidation price than they found it, oldest
	// first, with what became of the position.
	Closer []CloserAction
	// Balance is the free balance at the end; Margin the margin of the
	// open positions; Equity = Balance + Margin + UnrealizedPNL.
	Balance, Margin, RealizedPNL, UnrealizedPNL, Equity decimal.Decimal
	// Rules are the rule statistics in rule-file order.
	Rules []RuleStats
	// Positions are the end states of the positions held at the start or
	// opened since, in symbol order of the exchange.
	Positions []PositionEnd
	// StartEquity is the account's equity at the start (the same in
	// every run).
	StartEquity decimal.Decimal
	// Skips count the actions the run left out, by action and reason, most
	// frequent first.
	Skips []SkipCount
	// WorstAccountMeasure is the account measure (margin.Survival's
	// Together: the smallest adverse move of every index at once at which
	// a position is liquidated, as a fraction) at its worst over the run,
	// sampled every tick after the prices moved and before the engine
	// acted (measure.go); 0 when a position was liquidated. Nil when no
	// sample was known (an index without a price throughout), said "n/a".
	WorstAccountMeasure *float64
	// StressStart is the account on the stress grid at the start;
	// StressWorst at the sample where the account measure was lowest
	// (WorstAccountMeasure's; nil without a sample).
	StressStart, StressWorst *StressGrid
}

// StressGrid is a run's account on the stress grid (margin.Stress) at one
// moment, from the simulated exchange's account, with σ as the run's
// engine had it then (engine.StressInputs: the floor until an index has
// shown enough returns, so always at the start).
type StressGrid struct {
	Time   time.Time
	Stress margin.Stress
	Inputs engine.StressInputs
}

// CloserAction is a call that left its position closer to its
// liquidation price than it found it (an isolation, mostly), and whether
// the position was liquidated after it.
type CloserAction struct {
	Time           time.Time `json:"time"`
	Symbol         string    `json:"symbol"`
	Action         string    `json:"action"`
	DistanceBefore float64   `json:"distanceBefore"`
	DistanceAfter  float64   `json:"distanceAfter"`
	// LiquidatedAt is when the exchange liquidated the position after the
	// call; zero when it did not.
	LiquidatedAt time.Time `json:"liquidatedAt,omitzero"`
}

// String says the call and what became of its position: "set_isolated
// XBTC at 09:01:00 (21.60% → 4.62% from liquidation), liquidated at
// 09:31:20".
func (c CloserAction) String() string {
	s := fmt.Sprintf("%s %s at %s (%.2f%% → %.2f%% from liquidation)", c.Action, c.Symbol, c.Time.UTC().Format(time.TimeOnly),
		c.DistanceBefore*100, c.DistanceAfter*100)
	if c.LiquidatedAt.IsZero() {
		return s + ", not liquidated"
	}
	return s + ", liquidated at " + c.LiquidatedAt.UTC().Format(time.TimeOnly)
}

// SkipCount is how many times a run left out one kind of action for one
// reason.
type SkipCount struct {
	// Action is the action's name (its kind, or the kinds of a merged
	// call joined by "+").
	Action string `json:"action"`
	// Reason is the reason in a few words, the same for every instance
	// (the per-action figures are in the audit log and the report).
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// Liquidation is a position the simulated exchange liquidated.
type Liquidation struct {
	Time   time.Time
	Symbol string
	// Price is the index price that crossed LiquidationPrice.
	Price, LiquidationPrice decimal.Decimal
	Leverage                int
	Cross                   bool
	// Margin is the margin lost (a cross position also lost the free
	// balance).
	Margin decimal.Decimal
}

// PositionEnd is a position's state at the end of a run.
type PositionEnd struct {
	Symbol                  string
	StartLeverage, Leverage int
	StartCross, Cross       bool
	LiquidationPrice        decimal.Decimal
	UnrealizedPNL           decimal.Decimal
	Liquidated              bool
}

// RuleStats counts what one rule did in a run.
type RuleStats struct {
	Rule string
	// Firings counts the entries into firing.
	Firings int
	// Actions counts the settings and cancel calls the rule asked for that
	// were sent (or, in dry run, logged); Failed those refused, failed or
	// held back by the breaker; Notifications its notify actions;
	// Harmful the isolations not sent because they would have moved a
	// liquidation price closer, Bounded the leverage cuts a bound left no
	// room for (the free balance, a margin budget, another position's
	// floor: the run's Skips say which).
	Actions, Failed, Notifications, Harmful, Bounded int
	// Pending and Firing are the time spent in each state, summed over the
	// positions.
	Pending, Firing time.Duration
}

func (s *RuleStats) add(st alert.State, d time.Duration) {
	switch st {
	case alert.Pending:
		s.Pending += d
	case alert.Firing:
		s.Firing += d
	}
}

// Diff is a decision one run took at a tick and the other did not.
type Diff struct {
	Time time.Time
	// Run is the run that took it: guarded or baseline.
	Run      string
	Decision string
}

// SymbolSeries is the chart of one position's symbol, for reports.
type SymbolSeries struct {
	Symbol, Index string
	// Points are downsampled to at most Options.MaxPoints.
	Points []Point
	// Markers are the guarded run's actions on the symbol; Spans its
	// firing spans (rule by rule). Each holds at most 1,000, the rest
	// counted in Dropped.
	Markers []Marker
	Spans   []Span
	Dropped int

	open map[string]time.Time // firing since, by rule
}

// Point is one sample of a symbol's series. A liquidation price of 0 means
// no position.
type Point struct {
	Time  time.Time
	Index float64
	// LiquidationGuarded and LiquidationUnguarded are the position's
	// liquidation price in each run.
	LiquidationGuarded, LiquidationUnguarded float64
}

// Marker is an action of the guarded run.
type Marker struct {
	Time    time.Time
	Action  string
	Rules   []string
	Outcome string
	// From and To are leverages, for settings changes.
	From, To int
	// Effect is the margin model's predicted effect, or why the action
	// was not sent; Actual what the exchange read back.
	Effect, Actual string
	// Error is the exchange's answer to a failed action.
	Error string
	// ExpectedLossBefore and ExpectedLossAfter are the stress grid's
	// expected loss before and after, as the audit record says them; nil
	// without a grid.
	ExpectedLossBefore, ExpectedLossAfter *decimal.Decimal
}

// Span is a time a rule was firing on the symbol in the guarded run; an End
// equal to the result's To may still be firing.
type Span struct {
	Rule       string
	Start, End time.Time
}

// observeMarkers feeds the series' markers and spans from the guarded
// run's tick.
func (r *replay) observeMarkers(t time.Time) {
	rep := r.guarded.report
	if rep == nil {
		return
	}
	for _, tr := range rep.Transitions {
		s := r.seriesBy[tr.Symbol]
		if s == nil {
			continue
		}
		if tr.To == alert.Firing {
			if s.open == nil {
				s.open = map[string]time.Time{}
			}
			s.open[tr.Rule] = t
		} else if start, ok := s.open[tr.Rule]; ok && tr.From == alert.Firing {
			delete(s.open, tr.Rule)
			s.addSpan(Span{Rule: tr.Rule, Start: start, End: t})
		}
	}
	for _, a := range rep.Actions {
		s := r.seriesBy[a.Symbol]
		if s == nil {
			continue
		}
		if len(s.Markers) >= maxMarkers {
			s.Dropped++
			continue
		}
		m := Marker{Time: t, Action: a.Action, Rules: slices.Clone(a.Rules), Outcome: a.Outcome, From: a.From, To: a.To, Effect: a.Effect, Actual: a.Actual,
			ExpectedLossBefore: a.ExpectedLossBefore, ExpectedLossAfter: a.ExpectedLossAfter}
		if a.Err != nil {
			m.Error = a.Err.Error()
		}
		s.Markers = appendBounded(s.Markers, maxMarkers, m)
	}
}

// sampleDue reports whether this tick is one the points sample: every
// stride ticks; when the points would exceed the bound every other one is
// dropped (addSample) and the stride doubles, so any data length fits. It
// keeps the count of points itself, so that the schedule is known at the
// tick even when the points are added later (lanes.go).
func (r *replay) sampleDue() bool {
	if r.sample > 0 {
		r.sample--
		return false
	}
	r.sample = r.stride - 1
	if len(r.series) == 0 {
		return false
	}
	if r.points++; r.points > r.opt.MaxPoints {
		r.points = (r.points + 1) / 2 // what addSample keeps
		r.stride *= 2
		r.sample = r.stride - 1
	}
	return true
}

// addSample adds one sampled tick's points: both runs' equity, and per
// symbol the index and both runs' liquidation prices (prices, liqG and
// liqU, of the series in order); past the bound every other point is
// dropped.
func (r *replay) addSample(t time.Time, gEquity, uEquity float64, prices, liqG, liqU []decimal.Decimal) {
	r.equity = appendBounded(r.equity, r.opt.MaxPoints+1, EquityPoint{Time: t, Guarded: gEquity, Unguarded: uEquity})
	if len(r.equity) > r.opt.MaxPoints {
		k := 0
		for i := 0; i < len(r.equity); i += 2 {
			r.equity[k] = r.equity[i]
			k++
		}
		r.equity = r.equity[:k]
	}
	for i, s := range r.series {
		s.Points = appendBounded(s.Points, r.opt.MaxPoints+1, Point{Time: t, Index: prices[i].InexactFloat64(),
			LiquidationGuarded: liqG[i].InexactFloat64(), LiquidationUnguarded: liqU[i].InexactFloat64()})
	}
	if len(r.series[0].Points) > r.opt.MaxPoints {
		for _, s := range r.series {
			k := 0
			for i := 0; i < len(s.Points); i += 2 {
				s.Points[k] = s.Points[i]
				k++
			}
			s.Points = s.Points[:k]
		}
	}
}

func (s *SymbolSeries) addSpan(sp Span) {
	if len(s.Spans) >= maxMarkers {
		s.Dropped++
		return
	}
	s.Spans = appendBounded(s.Spans, maxMarkers, sp)
}

// close ends the spans still firing at the end, in rule order.
func (s *SymbolSeries) close(end time.Time) {
	rulesOpen := make([]string, 0, len(s.open))
	for r := range s.open {
		rulesOpen = append(rulesOpen, r)
	}
	slices.Sort(rulesOpen)
	for _, r := range rulesOpen {
		s.addSpan(Span{Rule: r, Start: s.open[r], End: end})
	}
	s.open = nil
}

// diff lists the decisions of this tick that the guarded and baseline runs
// do not share.
func (r *replay) diff(t time.Time) {
	a, b := r.guarded.decisions, r.baseline.decisions
	if slices.Equal(a, b) {
		return
	}
	onlyA, onlyB := without(a, b), without(b, a)
	for _, d := range onlyA {
		r.addDiff(Diff{Time: t, Run: RunGuarded, Decision: d})
	}
	for _, d := range onlyB {
		r.addDiff(Diff{Time: t, Run: RunBaseline, Decision: d})
	}
}

func (r *replay) addDiff(d Diff) {
	r.res.DiffCount++
	if len(r.res.Diffs) < r.opt.MaxDiffs {
		r.res.Diffs = append(r.res.Diffs, d)
	}
}

// without is the multiset difference a − b, in a's order.
func without(a, b []string) []string {
	left := map[string]int{}
	for _, s := range b {
		left[s]++
	}
	var out []string
	for _, s := range a {
		if left[s] > 0 {
			left[s]--
			continue
		}
		out = append(out, s)
	}
	return out
}

// Summary renders the result as a table for a terminal. It is a pure
// function of the result: the same result gives the same bytes.
func Summary(res *Result) string {
	var b bytes.Buffer
	ts := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	fmt.Fprintf(&b, "backtest %s → %s: %d steps, %d ticks\n\n", ts(res.From), ts(res.To), res.Steps, res.Ticks)
	v := VerdictOf(res)
	fmt.Fprintf(&b, "verdict: %s\n\n", v)

	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	runs := []*RunResult{&res.Unguarded, &res.Guarded}
	head := "\twithout guard\twith guard"
	if res.Baseline != nil {
		runs = append(runs, res.Baseline)
		head += "\tbaseline"
	}
	fmt.Fprintln(tw, head)
	row := func(label string, f func(*RunResult) string) {
		cells := []string{label}
		for _, r := range runs {
			cells = append(cells, f(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("liquidations", func(r *RunResult) string {
		if len(r.Liquidations) == 0 {
			return "0"
		}
		var syms []string
		for _, l := range r.Liquidations {
			syms = append(syms, l.Symbol)
		}
		return fmt.Sprintf("%d (%s)", len(r.Liquidations), strings.Join(syms, ", "))
	})
	money := func(d decimal.Decimal) string { return d.StringFixed(2) }
	row("free balance", func(r *RunResult) string { return money(r.Balance) })
	row("margin", func(r *RunResult) string { return money(r.Margin) })
	row("realized PNL", func(r *RunResult) string { return money(r.RealizedPNL) })
	row("unrealized PNL", func(r *RunResult) string { return money(r.UnrealizedPNL) })
	row("equity", func(r *RunResult) string { return money(r.Equity) })
	row("account measure at worst", func(r *RunResult) string {
		return measureText(r.WorstAccountMeasure)
	})
	row("evaluations", func(r *RunResult) string { return fmt.Sprint(r.Evaluations) })
	tw.Flush()

	for _, r := range runs[1:] {
		fmt.Fprintf(&b, "\nrules (%s run):\n", r.Name)
		tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "rule\tfirings\tactions\tfailed\tharmful skipped\tbounded skipped\tnotifications\tpending (Σ positions)\tfiring (Σ positions)")
		for _, s := range r.Rules {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", s.Rule, s.Firings, s.Actions, s.Failed, s.Harmful, s.Bounded, s.Notifications,
				s.Pending.Round(time.Second), s.Firing.Round(time.Second))
		}
		tw.Flush()
	}
	if len(v.Skips) > 0 {
		fmt.Fprintln(&b, "\nactions skipped, by reason (with guard):")
		for _, sk := range v.Skips {
			fmt.Fprintf(&b, "  %d %s: %s\n", sk.Count, skipNoun(res.kinds, sk.Action, sk.Count), sk.Reason)
		}
	}

	fmt.Fprintln(&b, "\npositions at the end:")
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "symbol\twithout guard\twith guard")
	unguarded := map[string]PositionEnd{}
	for _, p := range res.Unguarded.Positions {
		unguarded[p.Symbol] = p
	}
	for _, p := range res.Guarded.Positions {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Symbol, positionText(unguarded[p.Symbol]), positionText(p))
	}
	tw.Flush()

	avoided := avoidedLiquidations(res)
	if len(avoided) > 0 {
		fmt.Fprintln(&b, "\nliquidations the guard avoided:")
		for _, l := range avoided {
			fmt.Fprintf(&b, "  %s at %s: index %s crossed %s (%d×)\n", l.Symbol, ts(l.Time), l.Price, l.LiquidationPrice, l.Leverage)
		}
	}
	if res.Baseline != nil {
		fmt.Fprintf(&b, "\ndecisions that differ from the baseline: %d\n", res.DiffCount)
		for _, g := range GroupDiffs(res.Diffs) {
			fmt.Fprintf(&b, "  %s  only %-9s %s", ts(g.First), g.Run, g.Decision)
			if g.Count > 1 {
				fmt.Fprintf(&b, " (×%d from then)", g.Count)
			}
			fmt.Fprintln(&b)
		}
		if res.DiffCount > len(res.Diffs) {
			fmt.Fprintf(&b, "  … %d more\n", res.DiffCount-len(res.Diffs))
		}
	}
	if len(res.Warnings) > 0 {
		fmt.Fprintln(&b, "\nwarnings:")
		for _, w := range res.Warnings {
			fmt.Fprintf(&b, "  %s\n", w)
		}
	}
	return b.String()
}

func positionText(p PositionEnd) string {
	if p.Symbol == "" {
		return "-"
	}
	if p.Liquidated {
		return "liquidated"
	}
	mode := "isolated"
	if p.Cross {
		mode = "cross"
	}
	s := fmt.Sprintf("%d× %s, liq %s", p.Leverage, mode, p.LiquidationPrice)
	if p.Leverage != p.StartLeverage || p.Cross != p.StartCross {
		s += fmt.Sprintf(" (was %d×)", p.StartLeverage)
	}
	return s
}

// avoidedLiquidations are the unguarded run's liquidations of symbols the
// guarded run did not lose.
func avoidedLiquidations(res *Result) []Liquidation {
	lost := map[string]bool{}
	for _, l := range res.Guarded.Liquidations {
		lost[l.Symbol] = true
	}
	var out []Liquidation
	for _, l := range res.Unguarded.Liquidations {
		if !lost[l.Symbol] {
			out = append(out, l)
		}
	}
	return out
}

// Verdict is what a backtest says first: did the guard leave the account
// safer than no guard, and at what cost?
type Verdict struct {
	// Avoided are the liquidations of the run without the guard whose
	// symbol the guarded run kept; Caused (self-inflicted) the guarded
	// run's liquidations of symbols the run without the guard kept.
	Avoided, Caused []Liquidation `json:"-"`
	AvoidedSymbols  []string      `json:"avoided"`
	CausedSymbols   []string      `json:"selfInflicted"`
	// LiquidatedWithout counts the run without the guard's liquidations,
	// of which the guard avoided len(Avoided).
	LiquidatedWithout int `json:"liquidatedWithout"`
	// EquityWithout and EquityWith are the runs' equities at the end;
	// EquityDelta = EquityWith − EquityWithout; EquityStart the equity both
	// started with, and EquityDeltaShare EquityDelta as a share of it (0
	// when it was not positive).
	EquityWithout, EquityWith, EquityDelta, EquityStart decimal.Decimal
	EquityDeltaShare                                    float64 `json:"equityDeltaShare"`
	// HarmfulSkipped counts the isolations the guard did not send because
	// they would have moved a liquidation price closer; Bounded the
	// leverage cuts a bound left no room for. Skips says why, by reason.
	HarmfulSkipped, Bounded int
	Skips                   []SkipCount `json:"skips"`
	// WorstMeasureWithout and WorstMeasureWith are the account measure at
	// its worst in each run (RunResult.WorstAccountMeasure): 0 in a run
	// that lost a position, nil when never known.
	WorstMeasureWithout *float64 `json:"worstAccountMeasureWithout"`
	WorstMeasureWith    *float64 `json:"worstAccountMeasureWith"`
	// Closer are the calls that left a position closer to its
	// liquidation price, with what became of it (RunResult.Closer); the
	// judgement names them.
	Closer []CloserAction `json:"closer"`
	// Judgement is the verdict in one line a trader can read.
	Judgement string `json:"judgement"`

	kinds rules.Kinds // the result's (Result.kinds)
}

// VerdictOf compares the guarded run with the run without the guard.
func VerdictOf(res *Result) Verdict {
	v := Verdict{kinds: res.kinds, Avoided: avoidedLiquidations(res), EquityWithout: res.Unguarded.Equity, EquityWith: res.Guarded.Equity,
		AvoidedSymbols: []string{}, CausedSymbols: []string{}, LiquidatedWithout: len(res.Unguarded.Liquidations),
		EquityStart: res.Guarded.StartEquity, Skips: res.Guarded.Skips,
		WorstMeasureWithout: res.Unguarded.WorstAccountMeasure, WorstMeasureWith: res.Guarded.WorstAccountMeasure}
	v.EquityDelta = v.EquityWith.Sub(v.EquityWithout)
	if v.EquityStart.IsPositive() {
		v.EquityDeltaShare = v.EquityDelta.Div(v.EquityStart).InexactFloat64()
	}
	if v.Skips == nil {
		v.Skips = []SkipCount{}
	}
	kept := map[string]bool{}
	for _, l := range res.Unguarded.Liquidations {
		kept[l.Symbol] = true
	}
	for _, l := range res.Guarded.Liquidations {
		if !kept[l.Symbol] {
			v.Caused = append(v.Caused, l)
		}
	}
	for _, l := range v.Avoided {
		v.AvoidedSymbols = append(v.AvoidedSymbols, l.Symbol)
	}
	for _, l := range v.Caused {
		v.CausedSymbols = append(v.CausedSymbols, l.Symbol)
	}
	for _, s := range res.Guarded.Rules {
		v.HarmfulSkipped += s.Harmful
		v.Bounded += s.Bounded
	}
	v.Closer = append([]CloserAction{}, res.Guarded.Closer...)
	v.Judgement = Judge(len(v.Avoided), len(v.Caused), v.EquityDelta, v.EquityStart) + closerSaid(v.Closer)
	return v
}

// closerSaid names, for the judgement, every call that left a position
// closer to its liquidation price and what became of it; "" when none did.
func closerSaid(cs []CloserAction) string {
	if len(cs) == 0 {
		return ""
	}
	var said []string
	for _, c := range cs {
		said = append(said, c.String())
	}
	return "; left closer to liquidation: " + strings.Join(said, "; ")
}

// Judge says in one line what a guard did to an account: the positions it
// saved (liquidated without it, not with it), the liquidations it caused,
// and what it cost or gained, as a share of the starting equity (or in
// money when that was not positive). The battery judges its totals with it.
func Judge(saved, caused int, delta, start decimal.Decimal) string {
	count := func(n int, one, many string) string {
		if n == 1 {
			return "1 " + one
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	s := "the guard saved " + count(saved, "position", "positions")
	if saved == 0 {
		s = "the guard saved no position"
	}
	if caused > 0 {
		s += ", CAUSED " + count(caused, "liquidation", "liquidations") + ","
	}
	money := delta.Abs().StringFixed(2) + " of equity"
	if start.IsPositive() {
		share := delta.Div(start).Abs().Shift(2)
		money = share.StringFixed(1) + "% of equity"
		if share.LessThan(decimal.New(5, -2)) {
			money = "less than 0.1% of equity"
		}
	}
	switch {
	case delta.IsZero():
		return s + " and left equity unchanged"
	case delta.IsNegative():
		return s + " and cost " + money
	}
	return s + " and gained " + money
}

// String is the verdict in a sentence that ends with its judgement.
func (v Verdict) String() string {
	names := func(ls []string) string {
		if len(ls) == 0 {
			return "none"
		}
		return fmt.Sprintf("%d (%s)", len(ls), strings.Join(ls, ", "))
	}
	sign := "+"
	if v.EquityDelta.IsNegative() {
		sign = ""
	}
	s := fmt.Sprintf("liquidations avoided %s of %d, self-inflicted %s; equity %s%s with the guard (%s without, %s with)",
		names(v.AvoidedSymbols), v.LiquidatedWithout, names(v.CausedSymbols), sign, v.EquityDelta.StringFixed(2),
		v.EquityWithout.StringFixed(2), v.EquityWith.StringFixed(2))
	if v.WorstMeasureWithout != nil || v.WorstMeasureWith != nil {
		s += fmt.Sprintf("; account measure at its worst %s without, %s with", measureText(v.WorstMeasureWithout), measureText(v.WorstMeasureWith))
	}
	if len(v.Skips) > 0 {
		var parts []string
		for _, sk := range v.Skips {
			parts = append(parts, fmt.Sprintf("skipped %d %s: %s", sk.Count, skipNoun(v.kinds, sk.Action, sk.Count), sk.Reason))
		}
		s += "; " + strings.Join(parts, "; ")
	}
	if len(v.CausedSymbols) > 0 {
		s += " — THE GUARD CAUSED A LIQUIDATION"
	}
	j := v.Judgement
	if j == "" {
		j = Judge(len(v.AvoidedSymbols), len(v.CausedSymbols), v.EquityDelta, v.EquityStart)
	}
	return s + ". " + strings.ToUpper(j[:1]) + j[1:] + "."
}

// measureText is an account measure at its worst as a percentage, or n/a.
func measureText(m *float64) string {
	if m == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f%%", *m*100)
}

// skipNoun names n actions of a kind, as its row of kinds (nil:
// rules.DefaultKinds) names them.
func skipNoun(kinds rules.Kinds, action string, n int) string {
	if kinds == nil {
		kinds = rules.DefaultKinds()
	}
	one, many := action, action
	if spec, ok := kinds.Spec(rules.ActionKind(action)); ok && spec.Noun != "" {
		one, many = spec.Noun, spec.Nouns
	}
	if n == 1 {
		return one
	}
	return many
}

// skipReason is the reason, in a few words, of an action left out whose
// per-action reason (engine/act's) is why, so that the verdict counts
// skips by the reason each one had: a known phrase's (the first that
// matches), else the reason itself up to its first figure, so that a
// reason this does not know is still counted as itself, never under
// another's name.
func skipReason(why string) string {
	has := func(phrase string) bool { return strings.Contains(why, phrase) }
	switch {
	case has("holding is as cheap in expectation"):
		return "holding is as cheap in expectation (the order's fee and spread)"
	case has("is reduced again once"):
		return "an isolated position reduced at this distance already"
	case has("is dust"):
		return "the position is dust"
	case has("would not lower the expected loss to liquidations"), has("costs more in expectation"):
		return "it would not lower the expected cost (first passage)"
	case has("where the rules cut it"):
		return "it would leave a position inside its rules' cut zone"
	case has("during a fast move"):
		return "it would move a liquidation price closer during a fast move"
	case has("would make a likely move fatal"):
		return "it would make a likely move fatal (stress grid)"
	case has("would raise the expected loss"):
		return "it would raise the expected loss (stress grid)"
	case has("cannot fund"):
		return "the free balance could not fund it"
	case has("margin budget"):
		return "a rule's margin budget"
	case has("would take free balance from the cross pool"):
		return "it would move another position's liquidation price closer (allow_closer_liquidation)"
	case has("isolating would leave the account worse off"):
		return "it would leave the account worse off (allow_closer_liquidation)"
	case has("isolating would move the liquidation price closer"):
		return "it would move its own liquidation price closer (allow_closer_liquidation)"
	case has("under the floor"):
		return "it would end under its floor (min_liquidation_distance)"
	case has("would move"):
		return "it would put another position under its floor (min_liquidation_distance)"
	}
	if i := strings.IndexAny(why, "0123456789(:;"); i > 0 {
		why = why[:i]
	}
	if why = strings.TrimSpace(why); why == "" {
		return "unknown"
	}
	return why
}

// reasonMemo keeps skipReason of the reasons it was asked of: a dry run
// skips the same action for the same reason, with the same figures, at
// many steps (tens of texts in thousands), and skipReason reads each text
// for a score of phrases. At most reasonMemoSize are kept; then it starts
// again.
type reasonMemo map[string]string

// reasonMemoSize bounds a reasonMemo.
const reasonMemoSize = 1024

// of is skipReason(why).
func (m *reasonMemo) of(why string) string {
	if r, ok := (*m)[why]; ok {
		return r
	}
	if *m == nil || len(*m) >= reasonMemoSize {
		*m = make(reasonMemo, 64)
	}
	r := skipReason(why)
	(*m)[why] = r
	return r
}

// JSONSummary is the summary for scripts (`backtest --json`).
type JSONSummary struct {
	From, To     time.Time
	Steps, Ticks int
	Verdict      Verdict
	Without      RunJSON `json:"without"`
	With         RunJSON `json:"with"`
}

// RunJSON is one run in JSONSummary.
type RunJSON struct {
	Liquidations []string
	// LiquidationsSaid are the liquidations the guard itself said (its
	// audit's liquidated records), to be compared with Liquidations: the
	// exchange's.
	LiquidationsSaid                                    []string
	Balance, Margin, RealizedPNL, UnrealizedPNL, Equity decimal.Decimal
	Rules                                               []RuleStats
}

// Summarize is the result as JSONSummary.
func Summarize(res *Result) JSONSummary {
	run := func(r *RunResult) RunJSON {
		out := RunJSON{Liquidations: []string{}, LiquidationsSaid: append([]string{}, r.Said...), Balance: r.Balance, Margin: r.Margin, RealizedPNL: r.RealizedPNL,
			UnrealizedPNL: r.UnrealizedPNL, Equity: r.Equity, Rules: r.Rules}
		for _, l := range r.Liquidations {
			out.Liquidations = append(out.Liquidations, l.Symbol)
		}
		return out
	}
	return JSONSummary{From: res.From, To: res.To, Steps: res.Steps, Ticks: res.Ticks, Verdict: VerdictOf(res),
		Without: run(&res.Unguarded), With: run(&res.Guarded)}
}

// DiffGroup is the baseline differences of one decision, counted.
type DiffGroup struct {
	Run, Decision string
	Count         int
	First         time.Time
}

// GroupDiffs groups the listed differences by run and decision, in the
// order of their first time.
func GroupDiffs(diffs []Diff) []DiffGroup {
	var out []DiffGroup
	at := map[[2]string]int{}
	for _, d := range diffs {
		k := [2]string{d.Run, d.Decision}
		if i, ok := at[k]; ok {
			out[i].Count++
			continue
		}
		at[k] = len(out)
		out = append(out, DiffGroup{Run: d.Run, Decision: d.Decision, Count: 1, First: d.Time})
	}
	return out
}

// EquityPoint is the account equity (free balance, margins and
// unrealised PNL) of each run at one time.
type EquityPoint struct {
	Time               time.Time
	Guarded, Unguarded float64
}

// equityOf is ex's account equity now.
func equityOf(ex *sim.Exchange) float64 {
	return ex.Equity().InexactFloat64()
}

// unrealizedPNL returns a position's unrealised PNL at ex's current index
// prices; ok is false when its index has no price.
func unrealizedPNL(ex *sim.Exchange) func(p exchange.Position) (decimal.Decimal, bool) {
	prices := ex.IndexPrices()
	base := map[int64]string{}
	for _, c := range ex.Trades().ContractsSymbols {
		base[c.ID] = c.BaseName
	}
	return func(p exchange.Position) (decimal.Decimal, bool) {
		ix, ok := prices[base[p.SymbolID]]
		if !ok {
			return decimal.Zero, false
		}
		u := ix.Sub(p.EntryPrice).Mul(p.Quantity)
		if p.Direction == exchange.Short {
			u = u.Neg()
		}
		return u, true
	}
}

// appendBounded is append(s, v) for a list that never holds more than most
// elements (a series halved past its bound, markers and spans left out
// past theirs): it doubles up to most, where append grows a long list by a
// quarter at a time and makes some five times the list's length in all
// on its way there. Past most (not reached) it grows as append does.
func appendBounded[S ~[]E, E any](s S, most int, v E) S {
	if len(s) < cap(s) || len(s) >= most {
		return append(s, v)
	}
	grown := make(S, len(s), min(max(2*cap(s), 8), most))
	copy(grown, s)
	return append(grown, v)
}
