package act

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
)

// ErrNotApplied is wrapped when the exchange answered a call with values
// other than those asked for (settings it did not take, an order that
// changed nothing).
var ErrNotApplied = errors.New("settings not applied")

// settingsKey is the settings call's key in its plan: the leverage cuts
// and the isolation of a position merge into it.
const settingsKey = "settings"

// SettingsStep is a plan's settings call (the exchange's position
// settings: leverage and margin mode), merged from the kinds that change
// them: the lowest leverage asked (Lower, 0 when none) and isolation if
// any rule asked for it. It is idempotent: the same settings sent twice
// leave the position as once. It is sent last, on the position the
// calls before it leave.
type SettingsStep struct {
	Lower        int
	LowerRules   []string
	Isolate      bool
	IsolateRules []string
	// lowerKind and isolateKind are the kinds that asked (set by their
	// Merge), by which the plan's rules are looked at for their bounds.
	lowerKind, isolateKind rules.ActionKind

	dec     Decision
	p       *Pending
	err     error
	call    *settingsCall // the call readied; nil until one is
	note    string        // Note
	skipped bool          // Skipped
	// skipRec and skipAct are what skipEvent says of a bounded cut, made
	// in the step: the journal copies what it keeps of an event
	// (Host.Emit), so one skip's are taken again by the next.
	skipRec journal.Record
	skipAct journal.ActionEvent
}

// settingsCall is the settings call a Prepare readied: made only when a
// call is sent (most decisions send none, and a step is made for every
// plan that asks for one).
type settingsCall struct {
	record journal.Record // the base record, completed with the read-back
	ev     journal.ActionEvent
}

// Note says why the last Prepare sent no settings call: at target, or
// every part skipped.
func (c *SettingsStep) Note() string { return c.note }

// Skipped reports whether the last Prepare left the call out, every part
// of it skipped as unfunded, bounded or harmful (Skipper).
func (c *SettingsStep) Skipped() bool { return c.skipped }

// settingsOf is the plan's settings call, made at the first kind that
// asks for one.
func settingsOf(pl *Plan) *SettingsStep {
	return pl.Step(settingsKey, func() Step { return &SettingsStep{} }).(*SettingsStep)
}

// recycle empties the settings call for its plan's next use (Plan.Reset).
func (c *SettingsStep) recycle() { *c = SettingsStep{} }

// Order sends the settings call after the cancel and the reduce order: a
// leverage cut then moves the margin of the smaller position.
func (*SettingsStep) Order() int { return 30 }

// Target is the settings the merged call asks for on pos. Leverage only
// goes down: it is clamped to 1..current, and to the risk limit's
// maxLeverage when a call is made anyway, since the exchange refuses a
// leverage above it.
func (c *SettingsStep) Target(pos *exchange.Position) (exchange.Settings, bool) {
	cur := exchange.Settings{Cross: pos.Cross, Leverage: pos.Leverage}
	want := cur
	if c.Lower > 0 && c.Lower < cur.Leverage {
		want.Leverage = c.Lower
	}
	if c.Isolate {
		want.Cross = false
	}
	if want == cur {
		return want, false
	}
	if ml := pos.RiskLimit.MaxLeverage; ml > 0 && want.Leverage > ml {
		want.Leverage = ml
	}
	return want, true
}

// action names the call the settings want make on pos, and the rules
// behind it.
func (c *SettingsStep) action(pos *exchange.Position, want exchange.Settings) (string, []string) {
	var parts, names []string
	if want.Leverage < pos.Leverage {
		parts = append(parts, string(c.lowerKind))
		names = append(names, c.LowerRules...)
	}
	if want.Cross != pos.Cross {
		parts = append(parts, string(c.isolateKind))
		names = append(names, c.IsolateRules...)
	}
	return strings.Join(parts, "+"), Dedupe(names)
}

// Prepare decides the settings on the tick's margin model (moved on by an
// earlier call of the plan, Plan.Next), says the parts left out, and
// readies the call.
func (c *SettingsStep) Prepare(ctx context.Context, h Host, pl *Plan) ([]*Pending, error) {
	sym, pos := pl.Sym.Name, pl.Pos
	now := h.Now()
	var m *Model
	if _, change := c.Target(pos); change {
		m = h.Model() // built once a tick, for the first plan that needs it
	}
	if m != nil && pl.Next != nil {
		next := *m
		next.Acct = *pl.Next
		m = &next
		if i, ok := m.At[sym]; ok && !m.Acct.Positions[i].Open() {
			// The plan's reduce order closes the position whole: no
			// leverage or mode is left to set.
			c.note = "skipped: the plan's reduce order closes the position"
			return nil, nil
		}
	}
	c.dec = DecideSettings(m, pl, c, now)
	dec := &c.dec
	for _, sk := range dec.Skips {
		h.Emit(ctx, c.skipEvent(ctx, h, pl, sk))
	}
	want, pred := dec.Want, dec.Pred
	c.note, c.skipped = "", false
	if !dec.Change {
		switch {
		case len(dec.Skips) > 0:
			c.note, c.skipped = skipNote(&dec.Skips[0]), true
		case pos.Cross:
			c.note = fmt.Sprintf("at target: leverage %dx, cross", pos.Leverage)
		default:
			c.note = fmt.Sprintf("at target: leverage %dx, isolated", pos.Leverage)
		}
		if log := h.Logger(); (c.Lower > 0 || c.Isolate) && log.Enabled(ctx, slog.LevelDebug) {
			// Its values are made only where the line is logged.
			log.Debug("settings already at target", "symbol", sym, "leverage", pos.Leverage, "cross", pos.Cross)
		}
		return nil, nil
	}
	name, names := c.action(pos, want)
	prevCross := pos.Cross
	c.call = &settingsCall{}
	rec, ev := &c.call.record, &c.call.ev
	*rec = journal.Record{Time: now, Type: "action", Action: name, Symbol: sym, Position: pos.ID, Rules: names,
		Cross: &want.Cross, Leverage: want.Leverage, PrevLeverage: pos.Leverage, PrevCross: &prevCross}
	desc := fmt.Sprintf("%s %s", name, sym)
	if want.Leverage != pos.Leverage {
		desc += fmt.Sprintf(" %d→%d", pos.Leverage, want.Leverage)
	}
	if want.Cross != pos.Cross {
		desc += " cross→isolated"
	}
	effect := ""
	if pred != nil && !h.Tally() {
		effect = pred.String()
		rec.Prediction = pred.Record()
	}
	if dec.Stepped != "" {
		if !h.Tally() {
			effect = dec.Stepped + "; " + effect
		}
		rec.Reason = dec.Stepped
	}
	*ev = journal.ActionEvent{Symbol: sym, Action: name, Rules: names, From: pos.Leverage, To: want.Leverage, Cross: want.Cross, Effect: effect}
	x := h.Exchange()
	c.p, c.err = h.Prepare(ctx, *rec, desc, effect, ev, func(ctx context.Context) (json.RawMessage, error) {
		got, err := x.SetPositionSettings(ctx, sym, want)
		if err != nil {
			return nil, err
		}
		raw, _ := json.Marshal(got)
		if got.Leverage != want.Leverage || got.Cross != want.Cross {
			return raw, fmt.Errorf("%w: asked cross=%t leverage=%d, exchange reports cross=%t leverage=%d",
				ErrNotApplied, want.Cross, want.Leverage, got.Cross, got.Leverage)
		}
		if pred != nil {
			// The result's audit record carries the prediction and what
			// the exchange read back.
			actual := got.LiquidationPrice
			rec.Prediction.Actual = &actual
			ev.Actual = fmt.Sprintf("liquidation %s read back (%s predicted)", actual, pred.LiquidationAfter)
		}
		return raw, nil
	})
	if c.p == nil {
		return nil, c.err
	}
	return []*Pending{c.p}, nil
}

// Done counts the outcome on the symbol, compares the liquidation price
// read back with the prediction, moves the tick's model on, remembers a
// refusal for good and spends the rules' margin budgets.
func (c *SettingsStep) Done(ctx context.Context, h Host, pl *Plan) error {
	if !c.dec.Change {
		return nil
	}
	if c.p != nil {
		c.err = h.Finish(c.p)
	}
	sym, pos := pl.Sym.Name, pl.Pos
	want, pred := c.dec.Want, c.dec.Pred
	rec := &c.call.record
	at := rec.Time
	h.Outcome(ctx, sym, c.err)
	if c.err == nil && pred != nil {
		if rec.Prediction != nil && rec.Prediction.Actual != nil {
			h.ReadBack(ctx, at, sym, pred.LiquidationAfter, *rec.Prediction.Actual, pred.Index(), true)
		}
		h.Moved(at, pred.Next) // later calls of the tick see this one's effect
	}
	if Refused(c.err) && !errors.Is(c.err, ErrRefused) && pl.Refused != nil {
		*pl.Refused = Refusal{Settings: want, From: pos.Leverage}
	}
	if c.err == nil && pred != nil && pred.MarginMoved.IsPositive() && !h.DryRun() && SpendBudget(pl, c, pred.MarginMoved) {
		h.Changed()
	}
	return c.err
}

// skipEvent says a part of the settings call left out (Skip): an
// isolation that would harm, audited and logged each time, notified once
// per firing; or a leverage cut no bound leaves room for.
func (c *SettingsStep) skipEvent(ctx context.Context, h Host, pl *Plan, sk Skip) journal.Event {
	now := h.Now()
	sym, pos := pl.Sym.Name, pl.Pos
	if sk.Isolation {
		prevCross := pos.Cross
		iso := exchange.Settings{Leverage: sk.Want.Leverage, Cross: false}
		base := journal.Record{Time: now, Type: "action", Action: string(c.isolateKind), Symbol: sym, Position: pos.ID, Rules: Dedupe(c.IsolateRules),
			Cross: &iso.Cross, Leverage: iso.Leverage, PrevLeverage: pos.Leverage, PrevCross: &prevCross}
		ev := harmEvent(base, sk.Pred, sk.Why, h.FirstHarm(pl))
		effect := sk.Pred.String() + "; " + sk.Why
		if h.Tally() {
			// Counted only, as the calls made are: nothing audited,
			// notified or said of it but its outcome and reason.
			ev.Audit, ev.Note, effect = nil, nil, ""
		}
		ev.Action = &journal.ActionEvent{Symbol: sym, Action: base.Action, Rules: base.Rules, Outcome: "skipped_harmful",
			From: pos.Leverage, To: sk.Want.Leverage, Effect: effect, Reason: sk.Why}
		return ev
	}
	names := c.LowerRules // the step's, which nothing changes once it is merged
	for i := range names {
		if slices.Contains(names[:i], names[i]) {
			names = Dedupe(names)
			break
		}
	}
	base := &c.skipRec
	*base = journal.Record{Time: now, Type: "action", Action: string(c.lowerKind), Symbol: sym, Position: pos.ID, Rules: names,
		Leverage: sk.Asked, PrevLeverage: pos.Leverage, Phase: "skipped", Reason: sk.Why}
	c.skipAct = journal.ActionEvent{Symbol: sym, Action: base.Action, Rules: base.Rules, Outcome: "skipped_bounded", From: pos.Leverage, To: sk.Asked, Effect: sk.Why, Reason: sk.Why}
	ev := journal.Event{Audit: base, Level: slog.LevelWarn, Action: &c.skipAct}
	if h.Wants(ctx, ev.Level).Log {
		ev.Msg = "skipped " + base.Action + " " + sym + ": " + sk.Why
		ev.Attrs = []any{"action", base.Action, "symbol", sym, "rule", strings.Join(base.Rules, ",")}
	}
	return ev
}

// harmEvent is a change the engine did not send because it would move the
// position's liquidation price closer: audited and logged each time,
// notified when note is set (once per firing).
func harmEvent(base journal.Record, pred *Prediction, why string, note bool) journal.Event {
	r := base
	r.Phase, r.Reason, r.Prediction = "skipped", why, pred.Record()
	text := fmt.Sprintf("skipped %s %s: %s; %s", base.Action, base.Symbol, pred, why)
	rulesText := strings.Join(base.Rules, ",")
	ev := journal.Event{Audit: &r, Level: slog.LevelWarn, Msg: text,
		Attrs: []any{"action", base.Action, "symbol", base.Symbol, "rule", rulesText},
		Count: func(m *journal.Metrics) { m.Action(base.Action, "skipped_harmful") }}
	if note {
		ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindActionFailed, Severity: "warning", Symbol: base.Symbol,
			Action: base.Action, Rule: rulesText, Text: text}
	}
	return ev
}
