// Package engine is the guard: Tick reads one snapshot of positions, risk
// limits and index prices, evaluates the rules against every non-empty
// position, steps each rule's state machine and runs the actions that are
// due. Run ticks on an interval. Time is always passed in, so replays and the
// daemon run the same code.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/dispatch"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/lane"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/model"
	"github.com/riskguard/riskguard/engine/reconcile"
	"github.com/riskguard/riskguard/engine/window"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
)

// Actuator is what the engine changes on the exchange (act.Exchange). Both
// calls are idempotent; the venue's other calls are capabilities it may
// offer (exchange.Offer), asked once, in New.
type Actuator interface {
	SetPositionSettings(ctx context.Context, symbol string, s exchange.Settings) (*exchange.Position, error)
	CancelOrders(ctx context.Context, symbol string) (json.RawMessage, error)
}

// Deps are the engine's collaborators.
type Deps struct {
	// Reader and Actuator are the venue (exchange.Venue): its reads and
	// its idempotent calls, most often one value; a test or a backtest
	// may wrap the reads alone. New asks them once for the capabilities
	// of the contract (exchange.OfferOf): the Reader for the index
	// history (the windows' and σ's warm-up), the Actuator for orders
	// (reduce_position) and closed orders (a liquidation's evidence), and
	// hands each part the one it needs, nil when the venue lacks it.
	Reader   market.Reader
	Actuator Actuator
	// Notifier receives notifications; nil drops them.
	Notifier journal.Notifier
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics; nil records none.
	Metrics *journal.Metrics
	// Now is the clock of Run; Tick never reads it. Default time.Now.
	Now func() time.Time
	// Audit overrides the audit log named in Config (tests and demos).
	Audit *journal.Audit
	// OnTick, when set, is called by Run after every tick with its error;
	// the daemon pings its heartbeat from it. It must not block.
	OnTick func(rep *TickReport, err error)
	// Account names the account this engine guards when one process
	// guards several; it is stamped on every audit record and
	// notification. "" (one account) leaves them as they were.
	Account string
	// Leadership, under ha, says whether this process may act for the
	// account now (package ha's Seat); nil always may.
	Leadership Leadership
	// Shared, under ha, keeps the state for the next leader; nil keeps
	// the state file only.
	Shared SharedState
	// Host names this process in the audit records under ha.
	Host string
	// Kinds are the action kinds the engine knows: nil is
	// act.DefaultKinds. A rule set using a kind it does not know is
	// refused.
	Kinds act.Kinds
	// Tally is for a dry run whose actions are only counted (a
	// backtest's run without the guard): a dry-run action is put in the
	// tick's report with its outcome, rules and leverages but without
	// the predicted effect, and is not audited, logged, counted in the
	// metrics or notified. Skips are said as always.
	Tally bool
}

// offer is the venue's capabilities, asked once: see Deps.
func (d Deps) offer() exchange.Offer {
	o := exchange.OfferOf(d.Actuator)
	o.History = exchange.OfferOf(d.Reader).History
	return o
}

// Engine evaluates rules and acts. Its methods are safe for concurrent use;
// ticks and reloads are serialized.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	metrics *journal.Metrics
	// jr says what happens: the report, the audit log, the log, the
	// metrics, the notifications.
	jr     *journal.Journal
	now    func() time.Time
	onTick func(*TickReport, error)

	// tick serialises ticks (and reloads and Close with them) and owns
	// the parts below that say so (tick-owned): only the goroutine
	// holding it reads or writes them. A tick holds it across its
	// network reads and actions, so nothing that answers a caller takes
	// it: LastSuccess, Active, Rules, Status and Update go to the board
	// alone.
	tick  sync.Mutex
	snaps *market.SnapshotReader
	// view is the tick's snapshot joined once (engine/market), handed
	// down to the evaluator, the model watch and the board.
	view market.View
	// eval is the rule evaluation: the rule set in force, the rule
	// states, the join of the view with them (evaluate.go).
	eval     evaluator
	file     stateFile // the state file's lock, and what it lacks
	lastTick time.Time
	reach    reachability
	// ctl holds the silences and pauses, with its own lock, and says
	// what changes them.
	ctl *control.Service
	// model is the margin model watched and predicted with (engine/model).
	model *model.Watch
	// disp sends the mutating calls the tick decides, with the breaker,
	// the backoff and the executor (engine/dispatch).
	disp *dispatch.Dispatcher
	// lane is the fast lane's state (tick-owned).
	lane lane.Lane
	// recon names every change of a position the guard did not make
	// (tick-owned).
	recon *reconcile.Reconciler
	// bg waits for the reads made in the background (a liquidation's
	// evidence) before the journal closes.
	bg sync.WaitGroup

	// board is what callers read while a tick may be running, under its
	// own lock: the status, the rules in force and the active ones, the
	// last success, Run's wait, a reload waiting for the tick.
	board *board

	// lead is this process's standing for the account (ha.go).
	lead leader
}

// New builds an engine for the rule set, restoring persisted state from
// cfg.StateFile and opening cfg.AuditLog.
func New(cfg Config, set *rules.Set, d Deps) (eng *Engine, err error) {
	if set == nil {
		return nil, errors.New("engine: nil rule set")
	}
	if d.Reader == nil || d.Actuator == nil {
		return nil, errors.New("engine: reader and actuator are required")
	}
	cfg = cfg.withDefaults()
	e := &Engine{
		cfg:     cfg,
		log:     d.Logger,
		metrics: d.Metrics,
		now:     d.Now,
		onTick:  d.OnTick,
		board:   newBoard(set, cfg.Interval),
		snaps:   NewSnapshotReader(d.Reader, cfg.SymbolsRefresh, d.Logger),
	}
	e.lead.seat, e.lead.shared = d.Leadership, d.Shared
	offer := d.offer()
	kinds := d.Kinds
	if kinds == nil {
		kinds = act.DefaultKinds()
	}
	if err := kinds.Check(set); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.eval = newEvaluator(set, kinds, window.NewStore(set, cfg.Interval, offer.History, d.Logger), cfg)
	e.model = model.New(e.eval.win, d.Logger)
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.now == nil {
		e.now = time.Now
	}
	var startup []event // said once the audit log is open
	ctl := new(control.Store)
	var breaker act.Breaker
	if cfg.StateFile != "" && !cfg.DryRun {
		lock, lerr := lockState(cfg.StateFile)
		if lerr != nil {
			return nil, lerr
		}
		e.file.lock = lock
		defer func() {
			if err != nil && lock != nil {
				lock.Close() // a guard that does not start holds nothing
			}
		}()
	}
	if cfg.StateFile != "" {
		saved, err := loadState(cfg.StateFile)
		var corrupt *CorruptStateError
		if errors.As(err, &corrupt) {
			now := e.now()
			aside, merr := moveAside(cfg.StateFile, now)
			if merr != nil {
				return nil, fmt.Errorf("%w (%w)", err, merr)
			}
			text := fmt.Sprintf("the state file could not be read (%v); moved to %s and started with empty state: cooldowns and the breaker start afresh", corrupt.Err, aside)
			startup = append(startup, event{Level: slog.LevelError, Msg: text, Audit: &journal.Record{Time: now, Type: "state", Reason: text},
				Note: &notify.Message{Time: now, Kind: notify.KindLifecycle, Severity: "critical", Text: text}})
			saved, err = &savedState{Version: stateFileVersion}, nil
		}
		if err != nil {
			return nil, err
		}
		startup = append(startup, restore(saved, e.now(), e.cfg.BreakerReset, &e.eval, ctl, &breaker)...)
	}
	audit := d.Audit
	var lost []journal.Record
	var restored []journal.RecentAction
	if audit == nil && cfg.AuditLog != "" {
		if lost, err = journal.Unfinished(cfg.AuditLog); err != nil {
			return nil, err
		}
		// The status page's last actions survive a restart; a log that
		// cannot be read for them costs the page only.
		if restored, err = journal.RecentFromAudit(cfg.AuditLog); err != nil {
			e.log.Warn("the last actions could not be read back from the audit log", "err", err)
		}
		if audit, err = journal.OpenAudit(cfg.AuditLog); err != nil {
			return nil, err
		}
	}
	var stamp func(*journal.Record)
	if lead := d.Leadership; lead != nil {
		stamp = func(r *journal.Record) { r.Host, r.Term = d.Host, lead.Term() }
	}
	e.jr = journal.New(journal.Options{Audit: audit, Logger: e.log, Metrics: e.metrics, Notifier: d.Notifier, Now: e.now, Account: d.Account, Stamp: stamp,
		Muted: func(m *notify.Message, t time.Time) (string, bool) { return e.ctl.Mutes(m, t) }})
	o := control.Options{Store: ctl, Guard: e.board, Emitter: e.jr, Save: e.saveIdle, Standby: &e.lead, Logger: e.log,
		Symbols: e.board.symbols}
	if e.metrics != nil {
		o.Gauges = e.metrics
	}
	if e.ctl, err = control.NewService(o); err != nil {
		e.jr.Close()
		return nil, err
	}
	out := &outcomes{eval: &e.eval, file: &e.file, board: e.board, model: e.model, view: &e.view, snaps: e.snaps, cfg: &e.cfg}
	e.disp, err = dispatch.New(dispatch.Options{Journal: e.jr, Pauses: e.ctl, Leader: &e.lead, Outcomes: out, Model: out,
		Actuator: d.Actuator, Placer: offer.Placer, Reader: d.Reader, Logger: e.log, Metrics: e.metrics, Now: e.now,
		Config: cfg.dispatch(), Tally: d.Tally && cfg.DryRun, Sequential: e.snaps.InProcess(), Breaker: breaker})
	if err != nil {
		e.jr.Close()
		return nil, err
	}
	marked := e.board.liquidation
	if cr := offer.Closed; cr != nil && !e.cfg.DryRun {
		marked = func(l reconcile.Liquidation) {
			e.board.liquidation(l)
			reconcile.Evidence(&e.bg, cr, e.jr, l)
		}
	}
	e.recon = reconcile.New(cfg.reconcileSettings(), marked)
	e.eval.connect(evalDeps{jr: e.jr, ctl: e.ctl, log: e.log, metrics: e.metrics, model: e.model, lane: &e.lane, changed: e.file.changed, recon: e.recon})
	e.jr.Restore(restored)
	e.interrupted(lost)
	for _, ev := range startup {
		e.jr.Emit(context.Background(), nil, ev)
	}
	e.publishActive()
	return e, nil
}

// interrupted records the actions a previous run sent without recording
// their outcome (it was killed with the call in flight). Whether the
// exchange applied them is unknown; the next tick reads the positions back,
// and only an action still needed is sent again, which the idempotent calls
// allow. The record keeps the tick time of the action it closes.
func (e *Engine) interrupted(lost []journal.Record) {
	now := e.now()
	for _, r := range lost {
		reason := fmt.Sprintf("found at the start at %s: the run that sent it stopped before its outcome; no result was recorded, so the exchange may or may not have applied it: the next tick reads the position back and acts again only if still needed",
			now.UTC().Format(time.RFC3339Nano))
		if r.Quantity != nil && r.Phase == "sent" {
			// An order is not idempotent: it is taken as sent, its rules'
			// cooldowns count from it, and its symbol's orders wait until
			// the account is read (act.Intent).
			in := act.IntentOf(r)
			e.eval.adopt(in)
			e.recon.Adopted(in)
			reason = fmt.Sprintf("found at the start at %s: the run that sent this order stopped before its outcome; no result was recorded, so the exchange may have filled it: it is taken as sent (never sent again as such), its rules' cooldowns count from it, and the account read at the next tick says what it did",
				now.UTC().Format(time.RFC3339Nano))
		}
		r.Phase, r.Reason, r.Error, r.Response = "interrupted", reason, "", nil
		e.jr.Emit(context.Background(), nil, event{Audit: &r, Level: slog.LevelWarn,
			Msg:   "an action was interrupted by the last stop; its outcome is read back from the exchange",
			Attrs: []any{"action", r.Action, "symbol", r.Symbol, "rule", strings.Join(r.Rules, ","), "sent", r.Time}})
	}
}

// Close flushes the state file and closes the audit log.
func (e *Engine) Close() error {
	e.tick.Lock() // after the tick in flight
	defer e.tick.Unlock()
	e.disp.Drain()
	e.applyPending()
	err := e.saveLocked()
	e.bg.Wait() // a liquidation's evidence on its way to the audit log
	if cerr := e.jr.Close(); err == nil {
		err = cerr
	}
	e.file.release()
	return err
}

// ReopenAudit closes and reopens the audit log at its path (SIGHUP, after
// logrotate moved it) and writes the records kept meanwhile.
func (e *Engine) ReopenAudit(ctx context.Context, now time.Time) error {
	return e.jr.Reopen(ctx, now)
}

// AckLiquidation unmarks the liquidations of symbol ("*": every one) the
// status keeps marked, audited with its author, and returns how many; none
// is ErrNoLiquidation.
func (e *Engine) AckLiquidation(ctx context.Context, now time.Time, symbol, by string) (int, error) {
	if strings.TrimSpace(by) == "" {
		return 0, errors.New("an acknowledgement needs its author (createdBy)")
	}
	n, err := e.board.ackLiquidation(symbol)
	if err != nil {
		return 0, err
	}
	text := fmt.Sprintf("liquidation of %s acknowledged by %s (%d unmarked)", symbol, by, n)
	e.jr.Emit(ctx, nil, event{Level: slog.LevelInfo, Msg: text, Attrs: []any{"symbol", symbol, "by", by},
		Audit: &journal.Record{Time: now, Type: "liquidated", To: "acknowledged", Symbol: symbol, By: by, Reason: text}})
	return n, nil
}

// Control is the silences, pauses and acknowledgements: what the control
// API and Telegram change.
func (e *Engine) Control() *control.Service { return e.ctl }

// saveIdle saves the state file at once when no tick runs; else the tick
// saves it as it ends.
func (e *Engine) saveIdle() {
	if e.tick.TryLock() {
		if err := e.saveLocked(); err != nil {
			e.log.Error("save state", "err", err)
		}
		e.tick.Unlock()
	}
}

// ModelCheck is what CheckModel found (model.Check).
type ModelCheck = model.Check

// Unjudged is an open position CheckModel could not judge.
type Unjudged = model.Unjudged

// CheckModel reads one snapshot and checks the margin model against the
// exchange's own figures, as a tick would, without evaluating a rule or
// acting, and puts the account on the stress grid: `riskguard check
// --exchange`. An open position it cannot judge (undecodable, of an
// unlisted symbol, or with figures the model cannot take:
// margin.Unjudgeable) is left out and named in Unjudged, never passed
// over in silence.
func (e *Engine) CheckModel(ctx context.Context, now time.Time) (ModelCheck, error) {
	e.tick.Lock()
	defer e.tick.Unlock()
	snap, err := e.snaps.Read(ctx, now)
	if err != nil {
		return ModelCheck{}, err
	}
	e.join(snap)
	return e.model.Check(ctx, now, &e.view, e.snaps, e.cfg.ModelTolerance, e.cfg.stress()), nil
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
	e.board.setListed(tr)
	return e.ListedSymbols(), nil
}

// ListedSymbols returns the contract symbols of the last symbols read, or
// nil before the first; it never waits for a tick.
func (e *Engine) ListedSymbols() []string { return e.board.Listed() }

// Rules returns the rule set in force.
func (e *Engine) Rules() *rules.Set { return e.board.Rules() }

// LastSuccess is the time of the last tick whose snapshot was complete.
func (e *Engine) LastSuccess() time.Time { return e.board.LastSuccess() }

// NextInterval is how long Run waits after the start of the last tick
// before the next: FastInterval while that tick found a rule that can
// change something pending or firing, or a position within FastDistance of
// its liquidation price; Interval otherwise.
func (e *Engine) NextInterval() time.Duration { return e.board.NextInterval() }

// Update replaces the rule set. Rules that are unchanged (same name and
// fingerprint) keep their state and cooldowns; new and changed rules start
// inactive. The swap is whole: it happens between two ticks. Update never
// waits for a tick's network I/O: when a tick is running, the set is
// applied as that tick ends.
func (e *Engine) Update(now time.Time, set *rules.Set) {
	e.update(now, set, nil)
}

// Reconfigure is Update with new engine settings, applied between two
// ticks together with the rules: every setting but those whose row in
// Settings needs a restart, which keep their values (the daemon refuses a
// reload that changes them).
func (e *Engine) Reconfigure(now time.Time, set *rules.Set, cfg Config) {
	e.update(now, set, &cfg)
}

func (e *Engine) update(now time.Time, set *rules.Set, cfg *Config) {
	e.board.request(set, now, cfg)
	if e.tick.TryLock() {
		e.applyPending()
		e.tick.Unlock()
	}
}

// applyPending swaps in the set Update left, if any. The caller holds tick.
func (e *Engine) applyPending() {
	set, now, cfg := e.board.take()
	if cfg != nil {
		e.cfg = cfg.KeepRestartOnly(e.cfg).withDefaults()
		e.snaps.SetRefresh(e.cfg.SymbolsRefresh)
		e.disp.SetConfig(e.cfg.dispatch())
		e.eval.setConfig(e.cfg)
		e.recon.SetConfig(e.cfg.reconcileSettings())
		e.view.Forget() // the index names may have changed
	}
	if set == nil {
		return
	}
	kept, err := e.eval.rebind(set)
	if err != nil {
		e.log.Error("the new rules are not applied; the old ones keep running", "err", err)
		return
	}
	e.board.setRules(set)
	e.publishActive()
	e.jr.Emit(context.Background(), nil, reloadEvent(now, len(set.Rules), kept))
}

// saveLocked writes the state file when something changed.
func (e *Engine) saveLocked() error {
	// A dry run keeps its state in memory: cooldowns started by actions it
	// only logged must not hold back a live guard sharing the file.
	file := e.cfg.StateFile != "" && !e.cfg.DryRun
	if !file && (!e.lead.Shares() || e.cfg.DryRun) || !e.file.dirty && !e.ctl.Changed() && !e.lead.Unsaved() {
		return nil
	}
	s := &savedState{Version: stateFileVersion, SavedAt: e.lastTick, Breaker: e.disp.Breaker()}
	e.eval.save(s)
	s.Silences, s.Pauses = e.ctl.Snapshot()
	if !e.cfg.DryRun && e.lead.Shares() {
		if err := e.lead.SaveShared(s, e.now()); err != nil {
			e.log.Error("the shared state could not be written; retried at the next save", "err", err)
		}
	}
	if !file {
		e.file.saved()
		return nil
	}
	if err := saveState(e.cfg.StateFile, s); err != nil {
		return err
	}
	e.file.saved()
	return nil
}

// Active lists the rules that are pending, firing or without data, by
// position, for displays and reports: as the last tick left them.
func (e *Engine) Active() []alert.Alert { return e.board.Active() }

// publishActive computes what Active reports. The caller holds tick.
func (e *Engine) publishActive() {
	e.board.setActive(e.eval.alerts(func(s alert.State) bool { return s != alert.Inactive }))
}

// ruleNames are set's rule names by index.
func ruleNames(set *rules.Set) []string {
	out := make([]string, len(set.Rules))
	for i, r := range set.Rules {
		out[i] = r.Name
	}
	return out
}
