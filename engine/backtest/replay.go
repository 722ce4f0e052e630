package backtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Options configure a backtest.
type Options struct {
	// Engine is the engine's configuration as the daemon runs it. Its
	// AuditLog and StateFile are ignored — a backtest never touches the
	// daemon's files — and DryRun is set per run.
	Engine engine.Config
	// Rules is the rule set under test. Required.
	Rules *rules.Set
	// Baseline, when set, is a second rule set run on the same data with
	// its actions; the decisions that differ from Rules' are listed.
	Baseline *rules.Set
	// Scenario is the starting state of the simulated exchange: symbols,
	// balance, positions, open orders. Its index paths are replaced by the
	// data: every index holds its first price (from the data when it has
	// one) until the data moves it. Nil builds the state from the data's
	// first step, which must carry symbols and positions (recorded data).
	Scenario *sim.Scenario
	// Balance is the free balance of a state built from recorded data. Zero
	// infers it from the first cross position's liquidation price, or
	// without one takes the sum of the positions' margins.
	Balance decimal.Decimal
	// From and To bound the replayed time; zero means the data's bounds.
	// Steps before From only set the starting prices and positions.
	From, To time.Time
	// Interval, when positive, adds engine ticks every Interval between two
	// data steps, on the last prices, as the daemon would tick between two
	// one-minute bars. Zero ticks once per data step.
	Interval time.Duration
	// Seed seeds the simulated exchanges.
	Seed int64
	// MaxPoints bounds each symbol's series; default 2,000.
	MaxPoints int
	// MaxDiffs bounds the listed baseline differences; default 1,000.
	MaxDiffs int
	// Audit, when set, receives the guarded run's audit log.
	Audit io.Writer
	// Kinds makes the action kinds of each run's engine (engine.Deps.Kinds);
	// nil is act.DefaultKinds.
	Kinds func() act.Kinds

	serial bool // the runs take turns at every tick even on several cores (tests)
	poison bool // each read is fresh and the one a buffer would replace is spoiled (tests; see laneReader)
	told   bool // the run without the guard says its actions in full, as a dry-run daemon does (tests; see engine.Deps.Tally)
}

// Bounds of a backtest's memory.
const (
	defaultMaxPoints = 2000
	defaultMaxDiffs  = 1000
	maxMarkers       = 1000 // per symbol, action markers and firing spans each
	maxWarnings      = 100
	maxSubTicks      = 100_000 // per gap between two data steps
	// historyLimit bounds each simulated index's history: the engine reads
	// index prices only, so the default 65,536 samples per index and run
	// would be most of a backtest's memory.
	historyLimit = 16
)

// The names of the runs.
const (
	RunGuarded   = "guarded"
	RunUnguarded = "unguarded"
	RunBaseline  = "baseline"
)

// Run replays the source. The guarded run acts on the simulated exchange
// with the rules' actions; the unguarded run evaluates the same rules in
// dry run, so it reports what they would have done while nothing changes
// the positions but the prices. Both, and the baseline run, advance in
// lockstep over one pass of the data.
func Run(ctx context.Context, src Source, opt Options) (*Result, error) {
	if opt.Rules == nil {
		return nil, errors.New("backtest: a rule set is required")
	}
	if opt.MaxPoints <= 0 {
		opt.MaxPoints = defaultMaxPoints
	}
	if opt.MaxDiffs <= 0 {
		opt.MaxDiffs = defaultMaxDiffs
	}
	r := &replay{opt: opt, prices: map[string]decimal.Decimal{}, recorded: map[int64]exchange.Position{}}
	r.res = &Result{kinds: opt.Rules.Table()}
	defer r.stopRunner()
	next := src.Next
	var pf *prefetcher
	if r.concurrent() && opt.To.IsZero() {
		// Read to the end (no To to stop at early): the source is asked
		// whether its last line was cut only after it was read whole.
		pf = newPrefetcher(src)
		defer pf.close()
		next = pf.Next
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("backtest: %w", err)
		}
		done, err := r.step(ctx, st)
		if err != nil {
			return nil, err
		}
		if done {
			break
		}
	}
	r.drain(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.guarded == nil {
		return nil, errors.New("backtest: no data in the time range")
	}
	if pf != nil {
		pf.close() // the source is read no further: asking it is safe
	}
	if t, ok := src.(interface{ truncated() bool }); ok && t.truncated() {
		r.warn("the data's last line was incomplete and was dropped")
	}
	return r.finish(), nil
}

// replay is the state of one backtest.
type replay struct {
	opt   Options
	clock clock
	res   *Result

	started  bool
	last     time.Time
	prices   map[string]decimal.Decimal // every price seen, for the start
	symbols  *exchange.Trades           // the latest recorded symbols
	recorded map[int64]exchange.Position
	names    map[int64]string  // contract symbol id → name
	index    map[string]string // data name → sim index name, for symbols
	alias    map[string]string // engine index name → the contract's base
	// renamed holds the names of index and alias: a step's prices that
	// name none of them are the exchanges' as they are (resolveStep).
	renamed map[string]struct{}

	guarded, unguarded, baseline *lane
	// With the unguarded run on its own goroutine (lanes.go): its runner,
	// the batch being filled, merged batches for reuse, and the warnings
	// said since the last op.
	w        *runner
	batch    []laneOp
	spare    [][]laneOp
	pending  []string
	series   []*SymbolSeries
	equity   []EquityPoint
	seriesBy map[string]*SymbolSeries
	sample   int                          // ticks until the next sample
	stride   int                          // ticks between two samples
	points   int                          // points kept per series (sampleDue)
	freeMaps []map[string]decimal.Decimal // price maps for resolveStep to fill
	// sampleIndexes and sampleSymbols are the series' indexes and
	// symbols, in order; sampleVals the index and the two runs'
	// liquidation prices of a sample of them, when the runs tick in turn
	// (addSample keeps none of them).
	sampleIndexes, sampleSymbols []string
	sampleVals                   [3][]decimal.Decimal
}

// clock is the simulated time every exchange and engine of a backtest reads.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func (r *replay) warn(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if r.w != nil {
		// Said in order with the unguarded run's, when its batch is merged.
		r.pending = append(r.pending, s)
		return
	}
	r.addWarning(s)
}

func (r *replay) addWarning(s string) {
	if len(r.res.Warnings) < maxWarnings {
		r.res.Warnings = append(r.res.Warnings, s)
	}
}

// step applies one data step. done is true past To.
func (r *replay) step(ctx context.Context, st Step) (bool, error) {
	if st.Symbols != nil {
		r.symbols = st.Symbols
		r.names = make(map[int64]string, len(st.Symbols.ContractsSymbols))
		for _, c := range st.Symbols.ContractsSymbols {
			r.names[c.ID] = c.Name
		}
	}
	if !r.opt.To.IsZero() && st.Time.After(r.opt.To) {
		return true, nil
	}
	if !r.started && !r.opt.From.IsZero() && st.Time.Before(r.opt.From) {
		// Before the range: only the starting state.
		for n, p := range st.Prices {
			r.prices[n] = p
		}
		if st.Positions != nil {
			r.remember(st.Positions)
		}
		return false, nil
	}
	if !r.started {
		for n, p := range st.Prices {
			r.prices[n] = p
		}
		if st.Positions != nil {
			r.remember(st.Positions)
		}
		if err := r.start(ctx, st.Time); err != nil {
			return false, err
		}
		r.tickAll(ctx, st.Time, r.resolve(r.prices))
		return false, nil
	}
	if !st.Time.After(r.last) {
		if st.Time.Before(r.last) {
			return false, fmt.Errorf("backtest: step at %s is before the previous one at %s", st.Time.Format(time.RFC3339Nano), r.last.Format(time.RFC3339Nano))
		}
	}
	prices := r.resolveStep(st.Prices)
	if st.Positions != nil {
		r.trade(ctx, st.Positions, prices)
	}
	if r.opt.Interval > 0 {
		n := 0
		for t := r.last.Add(r.opt.Interval); t.Before(st.Time); t = t.Add(r.opt.Interval) {
			if n++; n > maxSubTicks {
				r.warn("more than %d ticks between %s and %s: the rest skipped", maxSubTicks, r.last.Format(time.RFC3339), st.Time.Format(time.RFC3339))
				break
			}
			r.tickAll(ctx, t, nil)
		}
	}
	r.tickAll(ctx, st.Time, prices)
	return false, nil
}

// remember keeps the recorded positions by symbol id.
func (r *replay) remember(ps []exchange.Position) {
	clear(r.recorded)
	for _, p := range ps {
		r.recorded[p.SymbolID] = p
	}
}

// start builds the simulated exchanges and the engines at the first step.
func (r *replay) start(ctx context.Context, at time.Time) error {
	r.clock.t = at
	sc := r.opt.Scenario
	if sc == nil {
		if r.symbols == nil {
			return errors.New("backtest: the data has no symbols before its first tick: give a scenario")
		}
		var err error
		sc, err = ScenarioFrom(r.symbols, slices.Collect(mapValues(r.recorded)), r.opt.Balance)
		if err != nil {
			return err
		}
	}
	sc = r.fixIndexes(sc)
	var err error
	if r.guarded, err = r.newLane(RunGuarded, sc, r.opt.Rules, false, r.opt.Audit); err != nil {
		return err
	}
	// The exchange's ids name the symbols of recorded positions.
	r.names = r.guarded.names
	if r.unguarded, err = r.newLane(RunUnguarded, sc, r.opt.Rules, true, nil); err != nil {
		return err
	}
	if r.opt.Baseline != nil {
		if r.baseline, err = r.newLane(RunBaseline, sc, r.opt.Baseline, false, nil); err != nil {
			return err
		}
		r.guarded.decide, r.baseline.decide = true, true
	}
	r.seriesBy = map[string]*SymbolSeries{}
	for _, p := range sc.Positions {
		if p.Empty {
			continue
		}
		s := &SymbolSeries{Symbol: p.Symbol, Index: r.index[p.Symbol]}
		r.series = append(r.series, s)
		r.seriesBy[p.Symbol] = s
		r.sampleIndexes, r.sampleSymbols = append(r.sampleIndexes, s.Index), append(r.sampleSymbols, s.Symbol)
	}
	r.stride, r.sample = 1, 0
	r.started = true
	r.res.From = at
	if r.concurrent() {
		r.startRunner(ctx)
	}
	return nil
}

// fixIndexes returns a copy of the scenario whose indexes hold still at
// their first price, and fills the name maps.
func (r *replay) fixIndexes(sc *sim.Scenario) *sim.Scenario {
	n := *sc
	r.index = map[string]string{}
	r.alias = map[string]string{}
	r.renamed = map[string]struct{}{}
	for _, c := range sc.Contracts {
		r.index[c.Name] = c.Base
		r.renamed[c.Name] = struct{}{}
		if m, ok := r.opt.Engine.IndexNames[c.Name]; ok && m != c.Base {
			r.alias[m] = c.Base
			r.renamed[m] = struct{}{}
		}
	}
	known := r.resolve(r.prices)
	n.Indexes = make([]sim.IndexSpec, len(sc.Indexes))
	for i, ix := range sc.Indexes {
		price, ok := known[ix.Name]
		if !ok {
			switch {
			case ix.Walk != nil:
				price = ix.Walk.Start
			case len(ix.Points) > 0:
				price = ix.Points[0].Price
			}
		}
		n.Indexes[i] = sim.IndexSpec{Name: ix.Name, Scale: ix.Scale, Points: []sim.PricePoint{{Price: price}}}
	}
	if r.opt.Scenario == nil {
		for _, p := range sc.Positions {
			if _, ok := known[r.index[p.Symbol]]; !ok && !p.Empty {
				r.warn("no price of index %s at the start: %s is valued at its entry price until the data gives one", r.index[p.Symbol], p.Symbol)
			}
		}
	}
	return &n
}

// resolve maps the data's names to the simulated exchange's index names:
// a contract symbol stands for its base, an engine index name (IndexNames)
// also moves the base the exchange liquidates on.
func (r *replay) resolve(prices map[string]decimal.Decimal) map[string]decimal.Decimal {
	out := make(map[string]decimal.Decimal, len(prices))
	r.resolveInto(out, prices)
	return out
}

// resolveStep is resolve into a map reused by every step: the exchanges
// copy the prices they are given. Prices that name no symbol and no
// alias are returned as they are.
func (r *replay) resolveStep(prices map[string]decimal.Decimal) map[string]decimal.Decimal {
	plain := true
	for n := range prices {
		if _, ok := r.renamed[n]; ok {
			plain = false
			break
		}
	}
	if plain {
		// resolveInto would copy it: the step's map is the replay's own
		// (Source), and is recycled as one of resolveStep's.
		return prices
	}
	var m map[string]decimal.Decimal
	if n := len(r.freeMaps); n > 0 {
		m, r.freeMaps = r.freeMaps[n-1], r.freeMaps[:n-1]
	} else {
		m = make(map[string]decimal.Decimal, len(prices))
	}
	r.resolveInto(m, prices)
	return m
}

// maxFreeMaps bounds the price maps kept for resolveStep: as many as two
// batches of the unguarded run hold; a step's own map, passed through,
// comes back too and the rest are let go.
const maxFreeMaps = 2 * batchOps

// recycle takes back a price map tickAll is done with, for resolveStep.
func (r *replay) recycle(m map[string]decimal.Decimal) {
	if m != nil && len(r.freeMaps) < maxFreeMaps {
		clear(m)
		r.freeMaps = append(r.freeMaps, m)
	}
}

func (r *replay) resolveInto(out, prices map[string]decimal.Decimal) {
	for n, p := range prices {
		if ix, ok := r.index[n]; ok {
			out[ix] = p
			continue
		}
		out[n] = p
		if base, ok := r.alias[n]; ok {
			out[base] = p
		}
	}
}

// trade applies the trader's own changes seen in recorded positions: a
// position opened, closed, or whose quantity, entry price or direction
// changed. Leverage and margin mode are the runs' own (the guard may have
// changed them); a new position takes the recorded ones. A position that
// emptied while the step's index crossed its recorded liquidation price was
// liquidated: each run's exchange decides that for itself.
func (r *replay) trade(ctx context.Context, ps []exchange.Position, prices map[string]decimal.Decimal) {
	seen := make(map[int64]bool, len(ps))
	for _, p := range ps {
		seen[p.SymbolID] = true
		old, had := r.recorded[p.SymbolID]
		if had && sameHolding(old, p) {
			continue
		}
		if had && p.Empty && !old.Empty && r.liquidated(old, prices) {
			continue
		}
		r.put(ctx, p, had && !old.Empty)
	}
	for id, old := range r.recorded {
		if !seen[id] && !old.Empty {
			gone := old
			gone.Empty = true
			r.put(ctx, gone, true)
		}
	}
	r.remember(ps)
}

// liquidated reports whether the step's index price crossed the recorded
// position's liquidation price.
func (r *replay) liquidated(p exchange.Position, prices map[string]decimal.Decimal) bool {
	ix, ok := prices[r.index[r.names[p.SymbolID]]]
	if !ok || !p.LiquidationPrice.IsPositive() {
		return false
	}
	if p.Direction == exchange.Short {
		return ix.GreaterThanOrEqual(p.LiquidationPrice)
	}
	return ix.LessThanOrEqual(p.LiquidationPrice)
}

func sameHolding(a, b exchange.Position) bool {
	return a.Empty == b.Empty && a.Direction == b.Direction && a.Quantity.Equal(b.Quantity) && a.EntryPrice.Equal(b.EntryPrice)
}

// put replaces a position in every run.
func (r *replay) put(ctx context.Context, p exchange.Position, keepSettings bool) {
	name, ok := r.names[p.SymbolID]
	if !ok {
		r.warn("%s: a recorded position names symbol id %d, which is not listed: ignored", r.clock.t.Format(time.RFC3339), p.SymbolID)
		return
	}
	spec := positionSpec(name, p)
	if r.w != nil {
		op := r.addOp(ctx)
		op.put = &putOp{name: name, spec: spec, keepSettings: keepSettings}
		r.guarded.clock.t = r.clock.t
		if err := r.guarded.putPosition(name, spec, keepSettings); err != nil {
			op.guarded = append(op.guarded, fmt.Sprintf("%s: %v", r.clock.t.Format(time.RFC3339), err))
		}
		return
	}
	for _, l := range r.lanes() {
		l.clock.t = r.clock.t
		if err := l.putPosition(name, spec, keepSettings); err != nil {
			r.warn("%s: %v", r.clock.t.Format(time.RFC3339), err)
		}
	}
}

// putPosition replaces a position on the run's exchange; keepSettings
// keeps the run's own leverage and margin mode of a held position.
func (l *lane) putPosition(name string, s sim.PositionSpec, keepSettings bool) error {
	if cur, ok := l.ex.Position(name); ok && keepSettings && !cur.Empty {
		s.Leverage, s.Cross = cur.Leverage, cur.Cross
	}
	return l.ex.PutPosition(s)
}

func positionSpec(symbol string, p exchange.Position) sim.PositionSpec {
	s := sim.PositionSpec{Symbol: symbol, Direction: p.Direction, Leverage: max(p.Leverage, 1), Cross: p.Cross,
		Empty: p.Empty || !p.Quantity.IsPositive(), RealizedPNL: p.RealizedPNL}
	if !s.Empty {
		s.Quantity, s.EntryPrice = p.Quantity, p.EntryPrice
	}
	return s
}

func (r *replay) lanes() []*lane {
	ls := []*lane{r.guarded, r.unguarded}
	if r.baseline != nil {
		ls = append(ls, r.baseline)
	}
	return ls
}

// tickAll moves every run to t: the step's prices (nil: unchanged), the
// exchange's liquidation check, then one engine tick. It owns prices: the
// caller does not use the map again.
func (r *replay) tickAll(ctx context.Context, t time.Time, prices map[string]decimal.Decimal) {
	r.clock.t = t
	r.last = t
	r.res.To = t
	r.res.Ticks++
	if prices != nil {
		r.res.Steps++
	}
	if r.w != nil {
		op := r.addOp(ctx)
		op.tick, op.moved = true, prices != nil
		// The op takes the step's map (tickAll owns the prices it is
		// given); the map it held from an earlier batch is filled next.
		r.recycle(op.prices)
		op.prices = prices
		if s := r.guarded.tick(ctx, t, prices); s != "" {
			op.guarded = append(op.guarded, s)
		}
		r.observeMarkers(t)
		if r.sampleDue() {
			op.sample = true
			op.gEquity = equityOf(r.guarded.ex)
			op.ixPrices = r.guarded.ex.IndexPricesOf(r.sampleIndexes, nil)
			op.gLiq = r.guarded.ex.LiquidationPricesOf(r.sampleSymbols, nil)
		}
		return
	}
	for _, l := range r.lanes() {
		if s := l.tick(ctx, t, prices); s != "" {
			r.warn("%s", s)
		}
	}
	r.observeMarkers(t)
	if r.sampleDue() {
		// addSample reads the lists and keeps none: the same three serve
		// every sample.
		sv := &r.sampleVals
		sv[0] = r.guarded.ex.IndexPricesOf(r.sampleIndexes, sv[0])
		sv[1] = r.guarded.ex.LiquidationPricesOf(r.sampleSymbols, sv[1])
		sv[2] = r.unguarded.ex.LiquidationPricesOf(r.sampleSymbols, sv[2])
		r.addSample(t, equityOf(r.guarded.ex), equityOf(r.unguarded.ex), sv[0], sv[1], sv[2])
	}
	if r.baseline != nil {
		r.diff(t)
	}
	r.recycle(prices)
}

// tick moves the run to t: the step's prices (nil: unchanged), the
// exchange's liquidation check, the measure's sample, one engine tick. It
// returns the warning the tick's failure makes ("" when none).
func (l *lane) tick(ctx context.Context, t time.Time, prices map[string]decimal.Decimal) string {
	l.clock.t = t
	if len(prices) > 0 {
		l.ex.SetIndexPrices(prices)
	}
	l.ex.Step(t)
	l.sampleMeasure(prices != nil)
	err := l.eng.TickInto(ctx, t, &l.rep) // read by observe, and by observeMarkers before the next tick
	l.observe(t, &l.rep)
	if err != nil {
		return fmt.Sprintf("%s: %s run: tick: %v", t.Format(time.RFC3339), l.name, err)
	}
	return ""
}

// finish closes the open spans and reads the end state of every run.
func (r *replay) finish() *Result {
	res := r.res
	end := r.last
	res.Guarded = r.guarded.finish(end)
	res.Unguarded = r.unguarded.finish(end)
	if r.baseline != nil {
		b := r.baseline.finish(end)
		res.Baseline = &b
	}
	for _, s := range r.series {
		s.close(end)
		res.Symbols = append(res.Symbols, *s)
	}
	res.Equity = r.equity
	return res
}

// lane is one run: a simulated exchange and an engine on it.
type lane struct {
	name  string
	clock *clock
	ex    *sim.Exchange
	eng   *engine.Engine
	set   *rules.Set
	start map[string]exchange.Position
	names map[int64]string // contract symbol id → name

	evaluations int64
	said        []string // the symbols the guard said liquidated, in order
	closer      []CloserAction
	rules       map[string]*RuleStats
	skips       map[SkipCount]int // by action and reason, Count 0
	reasons     reasonMemo        // skipReason of the reasons said lately
	startEquity decimal.Decimal
	active      map[[2]string]activeSpan // (rule, symbol) → state since
	decisions   []string                 // this tick's, for the baseline diff
	decide      bool                     // keep decisions: a baseline run is compared
	report      *engine.TickReport
	// rep is every tick's report, each read before the next tick
	// (observe, observeMarkers) and none kept: a copy of a list's element
	// (a marker, a closer action) shares only what the events made.
	rep         engine.TickReport
	measure     worstMeasure
	stressStart *StressGrid // the account on the stress grid at the start
}

type activeSpan struct {
	state alert.State
	since time.Time
}

func (r *replay) newLane(name string, sc *sim.Scenario, set *rules.Set, dryRun bool, audit io.Writer) (*lane, error) {
	clk := &clock{t: r.clock.t} // its own: the unguarded run may tick on another goroutine
	ex, err := sim.New(sim.Config{Key: "backtest", Secret: "backtest", Seed: r.opt.Seed, Now: clk.now, Scenario: sc,
		HistoryLimit: historyLimit})
	if err != nil {
		return nil, fmt.Errorf("backtest: %w", err)
	}
	cfg := r.opt.Engine
	cfg.AuditLog, cfg.StateFile, cfg.DryRun = "", "", dryRun
	// The run without the guard only counts its actions: their text is
	// never shown.
	deps := engine.Deps{Reader: newLaneReader(ex, r.opt.poison), Actuator: ex.Local(), Now: clk.now, Tally: dryRun && !r.opt.told}
	if r.opt.Kinds != nil {
		deps.Kinds = r.opt.Kinds()
	}
	if audit != nil {
		deps.Audit = journal.NewAudit(audit)
	}
	eng, err := engine.New(cfg, set, deps)
	if err != nil {
		return nil, fmt.Errorf("backtest: %w", err)
	}
	l := &lane{name: name, clock: clk, ex: ex, eng: eng, set: set, rules: map[string]*RuleStats{}, active: map[[2]string]activeSpan{},
		start: map[string]exchange.Position{}, skips: map[SkipCount]int{}, startEquity: ex.Equity()}
	for _, rl := range set.Rules {
		l.rules[rl.Name] = &RuleStats{Rule: rl.Name}
	}
	l.names = map[int64]string{}
	for _, c := range ex.Trades().ContractsSymbols {
		l.names[c.ID] = c.Name
	}
	for _, p := range ex.Positions() {
		l.start[l.names[p.SymbolID]] = p
	}
	l.stressStart = l.stressGrid()
	return l, nil
}

func (l *lane) nameOf(symbolID int64) string { return l.names[symbolID] }

// observe accounts one tick's report.
func (l *lane) observe(t time.Time, rep *engine.TickReport) {
	l.report = rep
	l.decisions = l.decisions[:0]
	l.measure.acted = rep != nil && slices.ContainsFunc(rep.Actions, func(a journal.ActionEvent) bool { return a.Outcome == "sent" })
	if rep == nil {
		return
	}
	l.evaluations += int64(rep.Evaluations)
	l.said = append(l.said, rep.Liquidated...)
	if l.name == RunGuarded {
		l.closerActions(t, rep)
	}
	for _, tr := range rep.Transitions {
		key := [2]string{tr.Rule, tr.Symbol}
		st := l.rules[tr.Rule]
		if st == nil {
			continue
		}
		if a, ok := l.active[key]; ok {
			st.add(a.state, t.Sub(a.since))
		}
		if tr.To == alert.Inactive {
			delete(l.active, key)
		} else {
			l.active[key] = activeSpan{state: tr.To, since: t}
		}
		if tr.To == alert.Firing {
			st.Firings++
		}
		if l.decide {
			l.decisions = append(l.decisions, fmt.Sprintf("%s %s: %s → %s", tr.Rule, tr.Symbol, tr.From, tr.To))
		}
	}
	for _, a := range rep.Actions {
		for _, name := range a.Rules {
			st := l.rules[name]
			if st == nil {
				continue
			}
			switch {
			case a.Action == string(rules.Notify):
				st.Notifications++
			case a.Outcome == "sent" || a.Outcome == "dry_run":
				st.Actions++
			case a.Outcome == "error" || a.Outcome == "skipped":
				st.Failed++
			case a.Outcome == "skipped_harmful":
				st.Harmful++
			case a.Outcome == "skipped_bounded":
				st.Bounded++
			}
		}
		if a.Outcome == "skipped_harmful" || a.Outcome == "skipped_bounded" {
			l.skips[SkipCount{Action: a.Action, Reason: l.reasons.of(a.Reason)}]++
		}
		if l.decide {
			l.decisions = append(l.decisions, describeAction(a))
		}
	}
}

// closerActions keeps the settings calls the tick sent that left their
// position closer to its liquidation price than the tick found it: the
// distance in the tick's snapshot against the exchange's after the call,
// at the same index.
func (l *lane) closerActions(t time.Time, rep *engine.TickReport) {
	snap := rep.Snapshot
	for _, a := range rep.Actions {
		if a.Outcome != "sent" || a.From == 0 || snap == nil {
			continue
		}
		var before *exchange.Position
		for i := range snap.Positions {
			if p := &snap.Positions[i]; !p.Empty && l.nameOf(p.SymbolID) == a.Symbol {
				before = p
			}
		}
		after, ok := l.ex.Position(a.Symbol)
		if before == nil || !ok || after.Empty {
			continue
		}
		ix := snap.IndexPrices[l.baseOf(a.Symbol)]
		db, okB := margin.Distance(before.Direction, ix, before.LiquidationPrice)
		da, okA := margin.Distance(after.Direction, ix, after.LiquidationPrice)
		if okB && okA && da.LessThan(db) {
			l.closer = append(l.closer, CloserAction{Time: t, Symbol: a.Symbol, Action: a.Action,
				DistanceBefore: db.InexactFloat64(), DistanceAfter: da.InexactFloat64()})
		}
	}
}

// baseOf is the index name of a contract symbol: its base name.
func (l *lane) baseOf(symbol string) string {
	for _, c := range l.ex.Trades().ContractsSymbols {
		if c.Name == symbol {
			return c.BaseName
		}
	}
	return ""
}

// describeAction is an action as a decision, without its outcome.
func describeAction(a journal.ActionEvent) string {
	s := fmt.Sprintf("%s %s", a.Action, a.Symbol)
	if a.To != 0 && a.To != a.From {
		s += fmt.Sprintf(" %d→%d", a.From, a.To)
	}
	if len(a.Rules) > 0 {
		s += fmt.Sprintf(" (%s)", joinNames(a.Rules))
	}
	return s
}

func joinNames(ns []string) string {
	out := ""
	for i, n := range ns {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}

// finish reads the run's end state.
func (l *lane) finish(end time.Time) RunResult {
	for key, a := range l.active {
		if st := l.rules[key[0]]; st != nil {
			st.add(a.state, end.Sub(a.since))
		}
	}
	clear(l.active)
	out := RunResult{Name: l.name, Evaluations: l.evaluations, Balance: l.ex.Balance(), StartEquity: l.startEquity, Said: slices.Clone(l.said)}
	for k, n := range l.skips {
		k.Count = n
		out.Skips = append(out.Skips, k)
	}
	slices.SortFunc(out.Skips, func(a, b SkipCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Action, b.Action), cmp.Compare(a.Reason, b.Reason))
	})
	for _, rl := range l.set.Rules {
		out.Rules = append(out.Rules, *l.rules[rl.Name])
	}
	for _, c := range l.closer {
		for _, lq := range l.ex.Liquidations() {
			if lq.Symbol == c.Symbol && !lq.Time.Before(c.Time) {
				c.LiquidatedAt = lq.Time
				break
			}
		}
		out.Closer = append(out.Closer, c)
	}
	for _, lq := range l.ex.Liquidations() {
		out.Liquidations = append(out.Liquidations, Liquidation{Time: lq.Time, Symbol: lq.Symbol, Price: lq.Price,
			LiquidationPrice: lq.Position.LiquidationPrice, Leverage: lq.Position.Leverage, Cross: lq.Position.Cross,
			Margin: lq.Position.Margin})
	}
	pnl := unrealizedPNL(l.ex)
	for _, p := range l.ex.Positions() {
		name := l.nameOf(p.SymbolID)
		start, had := l.start[name]
		if p.Empty && (!had || start.Empty) {
			continue
		}
		out.Margin = out.Margin.Add(p.Margin)
		out.RealizedPNL = out.RealizedPNL.Add(p.RealizedPNL)
		pe := PositionEnd{Symbol: name, Leverage: p.Leverage, StartLeverage: start.Leverage, Cross: p.Cross,
			StartCross: start.Cross, LiquidationPrice: p.LiquidationPrice, Liquidated: p.Empty}
		if u, ok := pnl(p); ok && !p.Empty {
			pe.UnrealizedPNL = u
			out.UnrealizedPNL = out.UnrealizedPNL.Add(u)
		}
		out.Positions = append(out.Positions, pe)
	}
	out.Equity = out.Balance.Add(out.Margin).Add(out.UnrealizedPNL)
	out.WorstAccountMeasure = l.worstAccountMeasure(len(out.Liquidations) > 0)
	out.StressStart, out.StressWorst = l.stressStart, l.measure.grid()
	return out
}

// mapValues yields a map's values in key order, for a deterministic state.
func mapValues(m map[int64]exchange.Position) func(func(exchange.Position) bool) {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return func(yield func(exchange.Position) bool) {
		for _, k := range keys {
			if !yield(m[k]) {
				return
			}
		}
	}
}
