// Package journal is where everything the guard saw or did is said: each
// Event is built once, where it happens, and Emit fans it out in one fixed
// order — the tick's report, the audit log, the recent actions, the log,
// the metrics, the notifications — so that an action is on disk before
// anyone is told of it, and no output misses an event another one has.
// A builder may leave out of an event the parts for the outputs the
// journal lacks (Wants: a backtest logs and notifies nothing), which no
// output would show.
// Emit is safe for concurrent use: the tick, the executor's calls and the
// control API all emit, one at a time.
package journal

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/notify"
	"github.com/shopspring/decimal"
)

// Report is the part of a tick's report the events fill.
type Report struct {
	Transitions []TransitionEvent
	Actions     []ActionEvent
	// Liquidated are the symbols the tick said liquidated (an audit
	// record of type liquidated), as a backtest counts them.
	Liquidated []string
}

// TransitionEvent is one rule changing state on one position.
type TransitionEvent struct {
	Rule, Symbol string
	From, To     alert.State
	Reason       string
}

// ActionEvent is one action decided by the tick, sent or not.
type ActionEvent struct {
	Symbol string
	Action string // an action kind, kinds merged into one call joined by "+", "settings" or "notify"
	// Rules are the rules behind it, in order: a list the engine may
	// share (the rule set's names), to be read, or cloned to be changed.
	Rules []string
	// Outcome is sent, dry_run, paused, noop, skipped (the breaker), error,
	// skipped_stopped (a kind stopped until restart),
	// skipped_harmful (it would move a liquidation price closer) or
	// skipped_bounded (no cut within the free balance or the margin budget).
	Outcome  string
	From, To int // leverage before and after, for settings
	Cross    bool
	// Quantity is an order's quantity.
	Quantity decimal.Decimal
	Err      error
	// Effect is the margin model's prediction of a settings call, as the
	// log says it; "" when there is none. Actual is what the exchange read
	// back after it.
	Effect, Actual string
	// Reason is why a skipped_harmful or skipped_bounded action was left
	// out, without the prediction (engine/act's Skip.Why).
	Reason string
	// ExpectedLossBefore and ExpectedLossAfter are the stress grid's
	// expected loss before and after the call, as its audit record's
	// prediction carries them (Predicted). Nil without a grid.
	ExpectedLossBefore, ExpectedLossAfter *decimal.Decimal
}

// Predicted copies into the action what the tick's report shows of its
// audit record's prediction (r nil, or without one: nothing), so that the
// report says the figures the audit log says. Emit calls it for the
// actions it reports, the executor for the calls it ends.
func (a *ActionEvent) Predicted(r *Record) {
	if r == nil || r.Prediction == nil {
		return
	}
	a.ExpectedLossBefore, a.ExpectedLossAfter = r.Prediction.ExpectedLossBefore, r.Prediction.ExpectedLossAfter
}

// Event is one thing the guard saw or did. An output it does not belong to
// is left empty.
type Event struct {
	Audit *Record // the audit log
	// The log: nothing when Msg is "".
	Level slog.Level
	Msg   string
	Attrs []any
	Note  *notify.Message // the notifications
	// The tick's report (and, for an action, the recent actions).
	Transition *TransitionEvent
	Action     *ActionEvent
	Count      func(*Metrics) // the metrics (a nil *Metrics records nothing)
}

// Notifier delivers messages. It must not block for long: queueing and
// retrying are its business.
type Notifier interface {
	Send(ctx context.Context, m notify.Message) error
}

// Options are a Journal's outputs; every one may be nil.
type Options struct {
	Audit    *Audit
	Logger   *slog.Logger
	Metrics  *Metrics
	Notifier Notifier
	// Muted reports the silence (by id) that mutes a notification at t.
	Muted func(m *notify.Message, t time.Time) (string, bool)
	// Now dates a notification without a time; default time.Now.
	Now func() time.Time
	// Account, when set, is stamped on every audit record and
	// notification: the guard runs one journal per account.
	Account string
	// Stamp, when set, completes each audit record before it is written
	// (the host and leadership term under ha).
	Stamp func(*Record)
}

// Journal fans events out.
type Journal struct {
	mu       sync.Mutex
	audit    *Audit
	log      *slog.Logger
	metrics  *Metrics
	notifier Notifier
	muted    func(m *notify.Message, t time.Time) (string, bool)
	now      func() time.Time
	account  string
	stamp    func(*Record)
	// failing: the last audit write failed (notified once).
	failing bool
	recent  recentActions
}

// New returns a journal writing to o's outputs.
func New(o Options) *Journal {
	j := &Journal{audit: o.Audit, log: o.Logger, metrics: o.Metrics, notifier: o.Notifier, muted: o.Muted, now: o.Now, account: o.Account, stamp: o.Stamp}
	if j.audit != nil && o.Account != "" {
		j.audit.account = o.Account
	}
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	if j.now == nil {
		j.now = time.Now
	}
	return j
}

// Emit fans ev out: the tick's report (when there is one), the audit log,
// the recent actions, the log, the metrics and the notifications, in that
// order. It keeps no pointer of ev's (its record, action, transition or
// message), only copies of what they point to: its caller may write them
// again once Emit returns.
func (j *Journal) Emit(ctx context.Context, rep *Report, ev Event) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if rep != nil && ev.Transition != nil {
		rep.Transitions = append(rep.Transitions, *ev.Transition)
	}
	if rep != nil && ev.Action != nil {
		a := *ev.Action
		a.Predicted(ev.Audit)
		rep.Actions = append(rep.Actions, a)
	}
	if rep != nil && ev.Audit != nil && ev.Audit.Type == "liquidated" && ev.Audit.Phase == "" {
		rep.Liquidated = append(rep.Liquidated, ev.Audit.Symbol)
	}
	if ev.Audit != nil {
		var err error
		if j.audit != nil {
			err = j.audit.write(ev.Audit, j.stamp)
		}
		j.audited(ctx, ev.Audit.Time, err)
	}
	if a := ev.Action; a != nil {
		var at time.Time
		if ev.Audit != nil {
			at = ev.Audit.Time
		}
		ra := RecentAction{Time: at, Symbol: a.Symbol, Action: a.Action, Rules: a.Rules, Outcome: a.Outcome,
			From: a.From, To: a.To, Effect: a.Effect, Actual: a.Actual}
		if a.Err != nil {
			ra.Error = a.Err.Error()
		}
		j.recent.add(ra) // copies the rules
	}
	if ev.Msg != "" {
		j.log.Log(ctx, ev.Level, ev.Msg, ev.Attrs...)
	}
	if ev.Count != nil {
		ev.Count(j.metrics)
	}
	if ev.Note != nil {
		j.send(ctx, *ev.Note)
	}
}

// Outputs are the outputs an event may reach beside the tick's report:
// what its builder may leave out of an Event that the journal would drop
// anyway (Journal.Wants).
type Outputs struct {
	// Audit: the audit log is written. Without it an event that is only
	// audited (a call's intended and sent phases) says nothing at all.
	Audit bool
	// Log: an event at the level asked is logged (Msg and Attrs).
	Log bool
	// Metrics: Count is run on metrics.
	Metrics bool
	// Notes: Note is sent (a silence may still mute it).
	Notes bool
}

// Wants reports the outputs an event at level reaches: the audit log when
// there is one, the log when its handler is enabled at level (as the log
// asks before it writes), the metrics when there are any, the
// notifications when a notifier is set. An event built without the others
// says all that one built whole does: a backtest, which keeps neither log
// nor notifications, builds neither.
func (j *Journal) Wants(ctx context.Context, level slog.Level) Outputs {
	return Outputs{Audit: j.audit != nil, Log: j.log.Enabled(ctx, level), Metrics: j.metrics != nil, Notes: j.notifier != nil}
}

// Flush writes the audit records kept from failed writes, saying how it
// went.
func (j *Journal) Flush(ctx context.Context, now time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.audit.Backlog() > 0 {
		j.audited(ctx, now, j.audit.Flush())
	}
}

// Reopen closes and reopens the audit log at its path (SIGHUP, after
// logrotate moved it) and writes the records kept meanwhile.
func (j *Journal) Reopen(ctx context.Context, now time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := j.audit.Reopen()
	j.audited(ctx, now, err)
	return err
}

// Close closes the audit log.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.audit.Close()
}

// Recent lists the last actions, newest first.
func (j *Journal) Recent() []RecentAction { return j.recent.list() }

// send delivers a notification unless a silence mutes it. The caller
// holds mu.
func (j *Journal) send(ctx context.Context, m notify.Message) {
	if j.notifier == nil {
		return
	}
	if j.muted != nil {
		t := m.Time
		if t.IsZero() {
			t = j.now()
		}
		if id, ok := j.muted(&m, t); ok {
			j.log.Debug("notification silenced", "kind", m.Kind, "rule", m.Rule, "symbol", m.Symbol, "silence", id)
			return
		}
	}
	if j.account != "" {
		m.Account = j.account
	}
	if err := j.notifier.Send(ctx, m); err != nil {
		j.log.Warn("notification not delivered", "kind", m.Kind, "err", err)
	}
}

// audited reports the outcome of an audit write or flush: a failure is
// logged and counted every time and notified once; the first success after
// it is said too. The metric shows the records waiting. A guard that
// cannot keep its audit trail must say so. The caller holds mu.
func (j *Journal) audited(ctx context.Context, now time.Time, err error) {
	j.metrics.AuditBacklog(j.audit.Backlog())
	switch {
	case err != nil:
		j.log.Error("audit write failed", "err", err)
		j.metrics.AuditError()
		if !j.failing {
			j.failing = true
			j.send(ctx, notify.Message{Time: now, Kind: notify.KindAudit, Severity: "critical",
				Text: fmt.Sprintf("the audit log cannot be written (%v); the records are kept in memory (up to %d) and written when it can; actions continue", err, MaxAuditBacklog)})
		}
	case j.failing:
		j.failing = false
		j.log.Info("audit log writes again; the records kept were written")
		j.send(ctx, notify.Message{Time: now, Kind: notify.KindAudit, Severity: "warning", Text: "audit log writes again; the records kept meanwhile were written"})
	}
}

// RecentActionsKept is how many of the last actions Recent keeps.
const RecentActionsKept = 50

// RecentAction is one action decided by a tick, with its outcome: sent,
// dry_run, paused, skipped, error, noop, skipped_harmful, skipped_bounded,
// backoff.
type RecentAction struct {
	Time    time.Time `json:"time"`
	Symbol  string    `json:"symbol"`
	Action  string    `json:"action"`
	Rules   []string  `json:"rules"`
	Outcome string    `json:"outcome"`
	From    int       `json:"from,omitempty"`
	To      int       `json:"to,omitempty"`
	Error   string    `json:"error,omitempty"`
	// Effect is the margin model's prediction; Actual what the exchange
	// read back after the call.
	Effect string `json:"effect,omitempty"`
	Actual string `json:"actual,omitempty"`
	// Restored marks an action read back from the audit log at start,
	// taken before the restart.
	Restored bool `json:"restored,omitempty"`
}

// Restore puts actions read back from the audit log (RecentFromAudit,
// oldest first) among the recent ones, as if they had just been emitted.
func (j *Journal) Restore(actions []RecentAction) {
	for _, a := range actions {
		j.recent.add(a)
	}
}

// recentActions is a bounded ring of the last actions. Each slot owns its
// Rules, a copy of the action's, written over by the action that takes
// the slot next: an action adds no slice once the ring is full and its
// slots hold as many rules, and list copies them out.
type recentActions struct {
	mu   sync.Mutex
	ring []RecentAction
	next int
}

func (r *recentActions) add(a RecentAction) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ring) < RecentActionsKept {
		a.Rules = slices.Clone(a.Rules)
		r.ring = append(r.ring, a)
		return
	}
	slot := &r.ring[r.next]
	if a.Rules != nil { // nil stays nil, as slices.Clone leaves it
		if a.Rules = append(slot.Rules[:0], a.Rules...); a.Rules == nil {
			a.Rules = []string{}
		}
	}
	*slot = a
	r.next = (r.next + 1) % RecentActionsKept
}

// list returns the actions newest first, sharing nothing with the ring.
func (r *recentActions) list() []RecentAction {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]RecentAction, 0, len(r.ring))
	for i := range r.ring {
		a := r.ring[(r.next+len(r.ring)-1-i)%len(r.ring)]
		a.Rules = slices.Clone(a.Rules)
		out = append(out, a)
	}
	return out
}
