// Package engine is the guard: Tick reads one snapshot of positions, risk
// limits and index prices, evaluates the rules against every non-empty
// position, steps each rule's state machine and runs the actions that are
// due. Run ticks on an interval. Time is always passed in, so replays and the
// daemon run the same code.
package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Reader is what a tick reads from the exchange.
type Reader interface {
	Positions(ctx context.Context) ([]exchange.Position, error)
	IndexPrices(ctx context.Context) (map[string]decimal.Decimal, error)
	Trades(ctx context.Context) (*exchange.Trades, error)
}

// InProcessReader is implemented by a Reader whose reads are calls in the
// same process that neither block nor wait on a network, such as a
// backtest's simulated exchange. When InProcess reports true, Tick reads
// the index prices and then the positions one after the other instead of
// concurrently: that saves a goroutine per tick and changes nothing else,
// since a concurrent read has no order to rely on either.
type InProcessReader interface {
	InProcess() bool
}

// Actuator is what the engine changes on the exchange. Both calls are
// idempotent.
type Actuator interface {
	SetPositionSettings(ctx context.Context, symbol string, s exchange.Settings) (*exchange.Position, error)
	CancelOrders(ctx context.Context, symbol string) (json.RawMessage, error)
}

// Notifier delivers messages. It must not block the tick for long: queueing
// and retrying are its business.
type Notifier interface {
	Send(ctx context.Context, m notify.Message) error
}

// Deps are the engine's collaborators.
type Deps struct {
	Reader   Reader
	Actuator Actuator
	// Notifier receives notifications; nil drops them.
	Notifier Notifier
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics; nil records none.
	Metrics *Metrics
	// Now is the clock of Run; Tick never reads it. Default time.Now.
	Now func() time.Time
	// Audit overrides the audit log named in Config (tests and demos).
	Audit *Audit
	// OnTick, when set, is called by Run after every tick with its error;
	// the daemon pings its heartbeat from it. It must not block.
	OnTick func(rep *TickReport, err error)
}

// Engine evaluates rules and acts. Its methods are safe for concurrent use;
// ticks and reloads are serialized.
type Engine struct {
	cfg      Config
	reader   Reader
	act      Actuator
	notifier Notifier
	log      *slog.Logger
	metrics  *Metrics
	audit    *Audit
	now      func() time.Time
	onTick   func(*TickReport, error)

	// tick serialises ticks (and reloads and Close with them) and owns
	// the evaluation state below: only the goroutine holding it reads or
	// writes those fields. A tick holds it across its network reads and
	// actions, so nothing that answers a caller takes it: LastSuccess,
	// Active, Rules and Update take mu alone.
	tick      sync.Mutex
	set       *rules.Set
	positions map[string]*posState // by position id
	snaps     *SnapshotReader
	indexSeen map[string]indexSeen
	breaker   breakerState
	dirty     bool // state changed since the last save
	lastTick  time.Time
	failSince time.Time // first failed read of the current outage
	down      bool      // the unreachable notification was sent
	failing   []bool    // by rule index: the last evaluation failed at run time

	// Scratch reused by every evaluation so a tick does not allocate per rule.
	in  rules.Input
	env rules.Env
	ev  rules.Evaluator

	// mu guards what callers read while a tick may be running: it is
	// held for a few assignments only, never across I/O. lastOK is
	// written by the tick alone (which may read it without mu).
	mu        sync.Mutex
	lastOK    time.Time
	current   *rules.Set   // the set in force, as Rules reports it
	active    []ActiveRule // published after every tick that changed a state
	pending   *rules.Set   // a reload waiting for the running tick to end
	pendingAt time.Time
	listed    []string         // the contract symbols of the last symbols read, sorted
	listedOf  *exchange.Trades // the read listed was made of (tick-owned)
}

// posState is the state of every rule on one position, aligned with the
// current rule set.
type posState struct {
	symbol string
	rules  []RuleState
	seen   time.Time
}

// indexSeen tracks when an index price last changed, for StaleAfter.
type indexSeen struct {
	price   decimal.Decimal
	changed time.Time
}

// ErrIncomplete is wrapped by Tick's error when a read failed: the tick took
// no action.
var ErrIncomplete = errors.New("snapshot incomplete")

// New builds an engine for the rule set, restoring persisted state from
// cfg.StateFile and opening cfg.AuditLog.
func New(cfg Config, set *rules.Set, d Deps) (*Engine, error) {
	if set == nil {
		return nil, errors.New("engine: nil rule set")
	}
	if d.Reader == nil || d.Actuator == nil {
		return nil, errors.New("engine: reader and actuator are required")
	}
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:       cfg,
		reader:    d.Reader,
		act:       d.Actuator,
		notifier:  d.Notifier,
		log:       d.Logger,
		metrics:   d.Metrics,
		audit:     d.Audit,
		now:       d.Now,
		onTick:    d.OnTick,
		set:       set,
		current:   set,
		snaps:     NewSnapshotReader(d.Reader, cfg.SymbolsRefresh, d.Logger),
		positions: make(map[string]*posState),
		indexSeen: make(map[string]indexSeen),
		failing:   make([]bool, len(set.Rules)),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	if cfg.StateFile != "" {
		saved, err := loadState(cfg.StateFile)
		if err != nil {
			return nil, err
		}
		e.restore(saved)
	}
	if e.audit == nil && cfg.AuditLog != "" {
		lost, err := unfinished(cfg.AuditLog)
		if err != nil {
			return nil, err
		}
		a, err := OpenAudit(cfg.AuditLog)
		if err != nil {
			return nil, err
		}
		e.audit = a
		e.interrupted(lost)
	}
	e.publishActive()
	return e, nil
}

// interrupted records the actions a previous run sent without recording
// their outcome (it was killed with the call in flight). Whether the
// exchange applied them is unknown; the next tick reads the positions back,
// and only an action still needed is sent again, which the idempotent calls
// allow. The record keeps the tick time of the action it closes.
func (e *Engine) interrupted(lost []Record) {
	now := e.now()
	for _, r := range lost {
		reason := fmt.Sprintf("found at the start at %s: the run that sent it stopped before its outcome; no result was recorded, so the exchange may or may not have applied it: the next tick reads the position back and acts again only if still needed",
			now.UTC().Format(time.RFC3339Nano))
		e.log.Warn("an action was interrupted by the last stop; its outcome is read back from the exchange",
			"action", r.Action, "symbol", r.Symbol, "rule", strings.Join(r.Rules, ","), "sent", r.Time)
		r.Phase, r.Reason, r.Error, r.Response = "interrupted", reason, "", nil
		e.record(r)
	}
}

// Close flushes the state file and closes the audit log.
func (e *Engine) Close() error {
	e.tick.Lock() // after the tick in flight
	defer e.tick.Unlock()
	e.applyPending()
	err := e.saveLocked()
	if cerr := e.audit.Close(); err == nil {
		err = cerr
	}
	return err
}

// Rules returns the rule set in force.
func (e *Engine) Rules() *rules.Set {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending != nil {
		return e.pending
	}
	return e.current
}

// LastSuccess is the time of the last tick whose snapshot was complete.
func (e *Engine) LastSuccess() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastOK
}

// Update replaces the rule set. Rules that are unchanged (same name and
// fingerprint) keep their state and cooldowns; new and changed rules start
// inactive. The swap is whole: it happens between two ticks. Update never
// waits for a tick's network I/O: when a tick is running, the set is
// applied as that tick ends.
func (e *Engine) Update(now time.Time, set *rules.Set) {
	e.mu.Lock()
	e.pending, e.pendingAt = set, now
	e.mu.Unlock()
	if e.tick.TryLock() {
		e.applyPending()
		e.tick.Unlock()
	}
}

// applyPending swaps in the set Update left, if any. The caller holds tick.
func (e *Engine) applyPending() {
	e.mu.Lock()
	set, now := e.pending, e.pendingAt
	e.pending = nil
	e.mu.Unlock()
	if set == nil {
		return
	}
	old := e.set
	oldIdx := make(map[string]int, len(old.Rules))
	for i, r := range old.Rules {
		oldIdx[r.Name+"\x00"+r.Fingerprint()] = i
	}
	mapping := make([]int, len(set.Rules))
	kept := 0
	for i, r := range set.Rules {
		j, ok := oldIdx[r.Name+"\x00"+r.Fingerprint()]
		if !ok {
			j = -1
		} else {
			kept++
		}
		mapping[i] = j
	}
	for _, ps := range e.positions {
		next := make([]RuleState, len(set.Rules))
		for i, j := range mapping {
			if j >= 0 && j < len(ps.rules) {
				next[i] = ps.rules[j]
			}
		}
		ps.rules = next
	}
	e.set = set
	e.failing = make([]bool, len(set.Rules))
	e.dirty = true
	e.mu.Lock()
	e.current = set
	e.mu.Unlock()
	e.publishActive()
	e.log.Info("rules reloaded", "rules", len(set.Rules), "kept", kept)
	e.record(Record{Time: now, Type: "reload", Reason: fmt.Sprintf("%d rules, %d kept their state", len(set.Rules), kept)})
}

// TickReport says what one tick saw and did.
type TickReport struct {
	Time time.Time
	// Positions is the number of non-empty positions evaluated.
	Positions   int
	Evaluations int
	Transitions []TransitionEvent
	Actions     []ActionEvent
	// Snapshot is what the tick read, before its actions; nil when the
	// positions could not be read.
	Snapshot *Snapshot
}

// TransitionEvent is one rule changing state on one position.
type TransitionEvent struct {
	Rule, Symbol string
	From, To     State
	Reason       string
}

// ActionEvent is one action decided by the tick, sent or not.
type ActionEvent struct {
	Symbol string
	Action string // lower_leverage, set_isolated, settings, cancel_orders, notify
	Rules  []string
	// Outcome is sent, dry_run, noop, skipped or error.
	Outcome  string
	From, To int // leverage before and after, for settings
	Cross    bool
	Err      error
}

// Run ticks every Interval until ctx is done. A tick in flight when ctx is
// cancelled finishes its actions (bounded by ActionTimeout) before Run
// returns nil.
func (e *Engine) Run(ctx context.Context) error {
	Every(ctx, e.cfg.Interval, e.now, func(now time.Time) {
		rep, err := e.Tick(ctx, now)
		if err != nil && ctx.Err() == nil {
			e.log.Error("tick failed", "err", err)
		}
		if e.onTick != nil && ctx.Err() == nil {
			e.onTick(rep, err)
		}
	})
	return nil
}

// Every calls step with the time now gives at once, then every interval,
// until ctx is done: the loop of Run, and of the recorder. ctx only ends
// the loop between two steps; a step that overruns the interval delays the
// next one rather than queueing steps.
func Every(ctx context.Context, interval time.Duration, now func() time.Time, step func(now time.Time)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		step(now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick runs one evaluation at now: it reads a snapshot, evaluates every rule
// on every non-empty position, steps their states and runs the due actions.
// A failed read is returned wrapped around ErrIncomplete and no action is
// taken for what it left out. Reads are cancelled with ctx; an action that
// has started finishes even when ctx is cancelled.
func (e *Engine) Tick(ctx context.Context, now time.Time) (*TickReport, error) {
	e.tick.Lock()
	defer e.tick.Unlock()
	e.applyPending()
	start := e.now() // for the duration metric only; decisions use now
	rep := &TickReport{Time: now}
	e.lastTick = now
	snap, err := e.snaps.Read(ctx, now)
	if snap != nil {
		rep.Snapshot = snap
		e.publishSymbols(snap.Symbols)
	}
	e.reachability(ctx, now, err)
	if err == nil {
		e.mu.Lock()
		e.lastOK = now
		e.mu.Unlock()
	}
	if snap != nil {
		e.evaluate(ctx, now, snap, rep)
	}
	if serr := e.saveLocked(); serr != nil {
		e.log.Error("save state", "err", serr)
		if err == nil {
			err = serr
		}
	}
	e.metrics.tickDone(err, e.now().Sub(start), now.Sub(e.lastOK), e.stateCounts(), e.breaker.open(now))
	if err != nil {
		e.record(Record{Time: now, Type: "tick", Error: err.Error()})
	}
	if len(rep.Transitions) > 0 {
		e.publishActive()
	}
	e.applyPending() // a reload that arrived during the tick
	return rep, err
}

// reachability notifies when reads have failed for UnreachableAfter, and
// once more when they succeed again.
func (e *Engine) reachability(ctx context.Context, now time.Time, err error) {
	if err == nil {
		if e.down {
			e.send(ctx, notify.Message{Time: now, Kind: notify.KindExchange, Severity: "warning",
				Text: fmt.Sprintf("exchange reachable again after %s", now.Sub(e.failSince).Round(time.Second))})
		}
		e.failSince, e.down = time.Time{}, false
		return
	}
	if ctx.Err() != nil {
		return
	}
	if e.failSince.IsZero() {
		e.failSince = now
	}
	if !e.down && now.Sub(e.failSince) >= e.cfg.UnreachableAfter {
		e.down = true
		text := fmt.Sprintf("exchange unreachable for %s: no action is taken without fresh data (%v)", now.Sub(e.failSince).Round(time.Second), err)
		e.log.Error(text)
		e.send(ctx, notify.Message{Time: now, Kind: notify.KindExchange, Severity: "critical", Text: text})
	}
}

// Symbols returns the names of the contract symbols the exchange lists,
// from the symbols the ticks keep, read first when they are due or were
// never read (so the tick after it reads them no sooner than usual). It
// waits for a running tick: the daemon calls it before its first.
func (e *Engine) Symbols(ctx context.Context, now time.Time) ([]string, error) {
	e.tick.Lock()
	defer e.tick.Unlock()
	tr, err := e.snaps.ReadSymbols(ctx, now)
	if err != nil {
		return nil, err
	}
	e.publishSymbols(tr)
	return e.ListedSymbols(), nil
}

// publishSymbols makes the names of tr what ListedSymbols reports. The
// caller holds tick.
func (e *Engine) publishSymbols(tr *exchange.Trades) {
	if tr == nil || tr == e.listedOf {
		return
	}
	e.listedOf = tr
	names := make([]string, 0, len(tr.ContractsSymbols))
	for _, s := range tr.ContractsSymbols {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	e.mu.Lock()
	e.listed = names
	e.mu.Unlock()
}

// ListedSymbols returns the contract symbols of the last symbols read, or
// nil before the first; it never waits for a tick.
func (e *Engine) ListedSymbols() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.listed)
}

// indexName is the index that prices a contract symbol.
func (e *Engine) indexName(sym *exchange.ContractSymbol) string {
	if n, ok := e.cfg.IndexNames[sym.Name]; ok {
		return n
	}
	return sym.BaseName
}

// indexPrice looks up the symbol's index price in the snapshot and applies
// the staleness bound. ok is false when the price is missing or stale.
func (e *Engine) indexPrice(snap *Snapshot, sym *exchange.ContractSymbol, now time.Time) (decimal.Decimal, string, bool) {
	if snap.IndexPrices == nil {
		return decimal.Decimal{}, "index prices not read", false
	}
	name := e.indexName(sym)
	p, ok := snap.IndexPrices[name]
	if !ok {
		return decimal.Decimal{}, "index " + name + " missing", false
	}
	if e.cfg.StaleAfter > 0 {
		seen, known := e.indexSeen[name]
		if !known || !seen.price.Equal(p) {
			e.indexSeen[name] = indexSeen{price: p, changed: now}
		} else if now.Sub(seen.changed) > e.cfg.StaleAfter {
			return p, fmt.Sprintf("index %s unchanged for %s", name, now.Sub(seen.changed).Round(time.Second)), false
		}
	}
	return p, "", true
}

// evaluate runs every rule on every non-empty position of the snapshot.
func (e *Engine) evaluate(ctx context.Context, now time.Time, snap *Snapshot, rep *TickReport) {
	cancelled := make(map[string]bool)
	for i := range snap.Positions {
		p := &snap.Positions[i]
		if p.Empty {
			continue
		}
		sym, ok := e.snaps.Symbol(p.SymbolID)
		if !ok {
			// Keep what the rules remember of it: the symbol may be known
			// again after the next refresh.
			if ps := e.positions[p.ID]; ps != nil {
				ps.seen = now
			}
			e.log.Error("position names an unknown symbol; skipped", "position", p.ID, "symbolId", p.SymbolID)
			continue
		}
		rep.Positions++
		price, why, hasIndex := e.indexPrice(snap, sym, now)
		if !hasIndex {
			e.log.Warn("no usable index price", "symbol", sym.Name, "reason", why)
		}
		fillInput(&e.in, p, sym, price, hasIndex, now)
		e.env.Fill(&e.in)
		ps := e.posState(p.ID, sym.Name)
		ps.seen = now
		pl := plan{pos: p, sym: sym}
		for ri, r := range e.set.Rules {
			if !r.AppliesTo(sym.Name) {
				continue
			}
			rep.Evaluations++
			cond, reason := e.condition(ri, r, why)
			if cond == Invalid && r.OnNoData == rules.NoDataIgnore {
				continue
			}
			if cond == unhealthy {
				continue
			}
			if cond == False && ps.rules[ri].State == Inactive {
				continue // the common case: nothing to step
			}
			prev := ps.rules[ri]
			next, tr := Step(prev, cond, now, Timing{For: r.For, KeepFiringFor: r.KeepFiringFor, Cooldown: r.Cooldown})
			ps.rules[ri] = next
			due := ActionDue(next, now, r.Cooldown)
			if tr != "" {
				e.dirty = true
				// A rule whose notify action runs now tells of its firing
				// itself: one message per event and channel.
				quiet := tr == ToFiring && due && hasNotify(r)
				e.transition(ctx, now, r, sym, p, prev.State, next.State, tr, reason, quiet, rep)
			}
			if due {
				pl.add(ri, r, &e.ev, &e.env)
			}
		}
		if !pl.empty() {
			e.execute(ctx, now, &pl, ps, cancelled, rep)
		}
	}
	e.forgetGone(ctx, now, rep)
}

// unhealthy is a Condition private to the engine: the rule failed at run
// time for a reason other than missing data.
const unhealthy Condition = 255

// condition evaluates r on the current environment.
func (e *Engine) condition(ri int, r *rules.Rule, indexWhy string) (Condition, string) {
	ok, err := e.ev.Eval(r, &e.env)
	switch {
	case err == nil:
		if e.failing[ri] {
			e.failing[ri] = false
			e.log.Info("rule evaluates again", "rule", r.Name)
		}
		if ok {
			return True, ""
		}
		return False, ""
	case errors.Is(err, rules.ErrNoData):
		reason := e.env.NoData()
		if indexWhy != "" {
			reason = indexWhy
		}
		if reason == "" {
			reason = err.Error()
		}
		return Invalid, reason
	default:
		if !e.failing[ri] {
			e.log.Error("rule failed at run time; marked unhealthy", "rule", r.Name, "symbol", e.env.Position.Symbol, "err", err)
		}
		e.failing[ri] = true
		e.metrics.ruleError(r.Name)
		return unhealthy, err.Error()
	}
}

// posState returns the state of the rules on a position, creating it.
func (e *Engine) posState(id, symbol string) *posState {
	ps, ok := e.positions[id]
	if !ok || len(ps.rules) != len(e.set.Rules) {
		if !ok {
			ps = &posState{symbol: symbol}
			e.positions[id] = ps
		}
		rs := make([]RuleState, len(e.set.Rules))
		copy(rs, ps.rules)
		ps.rules = rs
	}
	ps.symbol = symbol
	return ps
}

// forgetGone drops the state of positions that were closed (empty or no
// longer listed): a rule that was firing on them resolves.
func (e *Engine) forgetGone(ctx context.Context, now time.Time, rep *TickReport) {
	var gone []string
	for id, ps := range e.positions {
		if !ps.seen.Equal(now) {
			gone = append(gone, id)
		}
	}
	slices.Sort(gone) // a deterministic order for the audit log and replays
	for _, id := range gone {
		ps := e.positions[id]
		for ri, s := range ps.rules {
			if s.State == Inactive || ri >= len(e.set.Rules) {
				continue
			}
			r := e.set.Rules[ri]
			to, tr := Inactive, ToInactive
			if s.State == Firing {
				tr = ToResolved
			}
			ev := TransitionEvent{Rule: r.Name, Symbol: ps.symbol, From: s.State, To: to, Reason: "position closed"}
			rep.Transitions = append(rep.Transitions, ev)
			e.record(Record{Time: now, Type: "transition", Rule: r.Name, Symbol: ps.symbol, Position: id, From: s.State.String(), To: to.String(), Reason: ev.Reason})
			if tr == ToResolved {
				e.send(ctx, notify.Message{Time: now, Kind: notify.KindResolved, Severity: string(rules.Info), Rule: r.Name, Symbol: ps.symbol,
					Text: fmt.Sprintf("%s resolved on %s: position closed", r.Name, ps.symbol)})
			}
		}
		delete(e.positions, id)
		e.dirty = true
	}
}

// transition reports one state change: audit line, log, metrics and, for
// firing, resolved and alerting no-data, a notification.
func (e *Engine) transition(ctx context.Context, now time.Time, r *rules.Rule, sym *exchange.ContractSymbol, p *exchange.Position,
	from, to State, tr Transition, reason string, quiet bool, rep *TickReport) {
	rep.Transitions = append(rep.Transitions, TransitionEvent{Rule: r.Name, Symbol: sym.Name, From: from, To: to, Reason: reason})
	e.record(Record{Time: now, Type: "transition", Rule: r.Name, Symbol: sym.Name, Position: p.ID, From: from.String(), To: to.String(), Reason: reason})
	level := slog.LevelInfo
	if to == Firing || to == NoData {
		level = slog.LevelWarn
	}
	e.log.Log(ctx, level, "rule "+string(tr), "rule", r.Name, "symbol", sym.Name, "state", to.String(), "from", from.String(),
		"liquidationDistance", e.env.LiquidationDistance, "leverage", p.Leverage)
	if quiet {
		return
	}
	var kind notify.Kind
	var text string
	switch tr {
	case ToFiring:
		kind, text = notify.KindFiring, fmt.Sprintf("%s firing on %s: %s", r.Name, sym.Name, describe(r, &e.env))
	case ToResolved:
		kind, text = notify.KindResolved, fmt.Sprintf("%s resolved on %s", r.Name, sym.Name)
	case ToNoData:
		kind, text = notify.KindNoData, fmt.Sprintf("%s has no data on %s: %s", r.Name, sym.Name, reason)
	default:
		return
	}
	sev := string(r.Severity)
	if tr == ToResolved {
		sev = string(rules.Info) // good news is never an alarm
	}
	e.send(ctx, notify.Message{Time: now, Kind: kind, Severity: sev, Rule: r.Name, Symbol: sym.Name, Text: text, Values: values(&e.env), Template: r.Message})
}

func hasNotify(r *rules.Rule) bool {
	for i := range r.Actions {
		if r.Actions[i].Kind == rules.Notify {
			return true
		}
	}
	return false
}

// describe is the default one-line account of what a rule saw.
func describe(r *rules.Rule, env *rules.Env) string {
	s := r.Description
	if s == "" {
		s = r.When
	}
	return fmt.Sprintf("%s (index %s, liquidation %s, distance %.2f%%, leverage %gx of max %gx)", s,
		fmtFloat(env.IndexPrice), fmtFloat(env.Position.LiquidationPrice), env.LiquidationDistance*100,
		float64(env.Position.Leverage), float64(env.RiskLimit.MaxLeverage))
}

func fmtFloat(f float64) string { return decimal.NewFromFloat(f).String() }

// values are the figures a message carries.
func values(env *rules.Env) map[string]float64 {
	return map[string]float64{
		"indexPrice":          env.IndexPrice,
		"liquidationPrice":    env.Position.LiquidationPrice,
		"liquidationDistance": env.LiquidationDistance,
		"leverage":            float64(env.Position.Leverage),
		"maxLeverage":         float64(env.RiskLimit.MaxLeverage),
		"notional":            env.Notional,
	}
}

func (e *Engine) send(ctx context.Context, m notify.Message) {
	if e.notifier == nil {
		return
	}
	if err := e.notifier.Send(ctx, m); err != nil {
		e.log.Warn("notification not delivered", "kind", m.Kind, "err", err)
	}
}

func (e *Engine) record(r Record) {
	if err := e.audit.Write(r); err != nil {
		e.log.Error("audit write failed", "err", err)
	}
}

// stateCounts counts rule states by rule, for the metrics.
func (e *Engine) stateCounts() map[string]*[4]int {
	if e.metrics == nil {
		return nil
	}
	c := make(map[string]*[4]int, len(e.set.Rules))
	for _, r := range e.set.Rules {
		c[r.Name] = new([4]int)
	}
	for _, ps := range e.positions {
		for ri, s := range ps.rules {
			if ri < len(e.set.Rules) && int(s.State) < 4 {
				c[e.set.Rules[ri].Name][s.State]++
			}
		}
	}
	return c
}

// restore loads persisted states for the rules whose fingerprint is
// unchanged.
func (e *Engine) restore(s *savedState) {
	e.breaker = s.Breaker
	for ri, r := range e.set.Rules {
		sr, ok := s.Rules[r.Name]
		if !ok || sr.Fingerprint != r.Fingerprint() {
			continue
		}
		for id, st := range sr.Positions {
			ps := e.positions[id]
			if ps == nil {
				ps = &posState{symbol: s.Symbols[id], rules: make([]RuleState, len(e.set.Rules))}
				e.positions[id] = ps
			}
			ps.rules[ri] = st
		}
	}
}

// saveLocked writes the state file when something changed.
func (e *Engine) saveLocked() error {
	// A dry run keeps its state in memory: cooldowns started by actions it
	// only logged must not hold back a live guard sharing the file.
	if e.cfg.StateFile == "" || e.cfg.DryRun || !e.dirty {
		return nil
	}
	s := &savedState{Version: stateFileVersion, SavedAt: e.lastTick, Rules: make(map[string]savedRule, len(e.set.Rules)),
		Breaker: e.breaker, Symbols: make(map[string]string, len(e.positions))}
	for ri, r := range e.set.Rules {
		sr := savedRule{Fingerprint: r.Fingerprint(), Positions: make(map[string]RuleState)}
		for id, ps := range e.positions {
			if ri < len(ps.rules) && ps.rules[ri] != (RuleState{}) {
				sr.Positions[id] = ps.rules[ri]
				s.Symbols[id] = ps.symbol
			}
		}
		s.Rules[r.Name] = sr
	}
	if err := saveState(e.cfg.StateFile, s); err != nil {
		return err
	}
	e.dirty = false
	return nil
}

// ActiveRule is a rule that is not inactive on a position.
type ActiveRule struct {
	Symbol, Rule string
	State        State
}

// Active lists the rules that are pending, firing or without data, by
// position, for displays and reports: as the last tick left them.
func (e *Engine) Active() []ActiveRule {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.active)
}

// publishActive computes what Active reports. The caller holds tick.
func (e *Engine) publishActive() {
	var out []ActiveRule
	for _, ps := range e.positions {
		for ri, s := range ps.rules {
			if s.State != Inactive && ri < len(e.set.Rules) {
				out = append(out, ActiveRule{Symbol: ps.symbol, Rule: e.set.Rules[ri].Name, State: s.State})
			}
		}
	}
	slices.SortFunc(out, func(a, b ActiveRule) int {
		return cmp.Or(cmp.Compare(a.Symbol, b.Symbol), cmp.Compare(a.Rule, b.Rule))
	})
	e.mu.Lock()
	e.active = out
	e.mu.Unlock()
}
