package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
)

// ErrPaused is the error of an action not sent because the guard is paused
// for its rules or symbol. It does not start the rule's cooldown, count as a
// failure of the symbol nor spend the action budget: on resume the action is
// taken at the next tick if still needed.
var ErrPaused = errors.New("paused")

// ErrNotFound is the error of a control call naming a silence or pause that
// does not exist (or has already ended).
var ErrNotFound = errors.New("not found")

// ErrNotActive is the error of an acknowledgement of an alert that is not
// pending, firing or without data.
var ErrNotActive = errors.New("alert not active")

// ErrUnknownName is the error of a control naming a rule or a symbol the
// guard does not know (a misspelling would pause or silence nothing);
// AllowUnknown accepts a symbol or rule on purpose.
var ErrUnknownName = errors.New("unknown")

// settleWait bounds how long a new pause waits for the calls of its scope
// already on their way (each is bounded by ActionTimeout): its answer says
// those still running then.
const settleWait = 5 * time.Second

// Silence mutes notifications; see engine/control.
type Silence = control.Silence

// Pause holds actions back; see engine/control.
type Pause = control.Pause

// controlEvent is a silence or pause being made or ended: audited with its
// author, logged, and, for pauses, notified (a paused guard is news).
func controlEvent(now time.Time, typ, to, rule, symbol, by, text string, notifyIt bool) event {
	ev := event{Level: slog.LevelInfo, Msg: text, Attrs: []any{"rule", rule, "symbol", symbol, "by", by},
		Audit: &Record{Time: now, Type: typ, To: to, Rule: rule, Symbol: symbol, By: by, Reason: text}}
	if notifyIt {
		ev.Level = slog.LevelWarn
		ev.Note = &notify.Message{Time: now, Kind: notify.KindLifecycle, Severity: "warning", Text: text}
	}
	return ev
}

// AddSilence adds a silence; a zero StartsAt starts it at now. It needs at
// least one matcher, an author, and an end after its start.
//
// Its rule and symbol must be known to the guard (see resolveNames),
// unless AllowUnknown; its times lie within the bounds of engine/control
// (starting within a day of now, lasting at most 90 days), its comment is
// at most 1,000 characters, and at most 100 silences are kept.
func (e *Engine) AddSilence(ctx context.Context, now time.Time, s Silence) (Silence, error) {
	if err := e.lead.OnStandby(now); err != nil {
		return Silence{}, err
	}
	if s.Rule == "" && s.Symbol == "" && s.Severity == "" {
		return Silence{}, errors.New("a silence needs a matcher: rule, symbol or severity")
	}
	if strings.TrimSpace(s.CreatedBy) == "" {
		return Silence{}, errors.New("a silence needs its author (createdBy)")
	}
	if err := control.CheckText(s.Comment, s.CreatedBy, s.Rule, s.Symbol, s.Severity); err != nil {
		return Silence{}, err
	}
	if s.StartsAt.IsZero() {
		s.StartsAt = now
	}
	if s.EndsAt.IsZero() && !s.Ack {
		return Silence{}, errors.New("a silence needs an end (endsAt)")
	}
	what := "silence"
	if s.Ack {
		what = "acknowledgement"
	}
	if err := control.CheckTimes(what, s.StartsAt, s.EndsAt, now); err != nil {
		return Silence{}, err
	}
	var err error
	if s.Rule, s.Symbol, err = e.resolveNames(s.Rule, s.Symbol, s.AllowUnknown); err != nil {
		return Silence{}, err
	}
	if s.Severity != "" {
		sevs := []string{string(rules.Info), string(rules.Warning), string(rules.Critical)}
		i := slices.IndexFunc(sevs, func(v string) bool { return strings.EqualFold(v, s.Severity) })
		if i < 0 {
			return Silence{}, fmt.Errorf("%w severity %q: want one of %s", ErrUnknownName, s.Severity, strings.Join(sevs, ", "))
		}
		s.Severity = sevs[i]
	}
	s.ID, s.CreatedAt, s.AllowUnknown = control.NewID(), now, false
	if err := e.ctl.AddSilence(s, now); err != nil {
		return Silence{}, err
	}
	text := fmt.Sprintf("%s %s by %s: notifications of %s muted from %s %s", what, s.ID, s.CreatedBy, s.Scope(),
		s.StartsAt.UTC().Format(time.RFC3339), control.Until(s.EndsAt, "until the alert resolves"))
	if s.Comment != "" {
		text += ": " + s.Comment
	}
	e.emit(ctx, nil, controlEvent(now, "silence", "added", s.Rule, s.Symbol, s.CreatedBy, text, false))
	e.controlChanged(now)
	return s, nil
}

// Ack acknowledges the alert of rule on symbol: its notifications are
// muted until it resolves (or until, when not zero). The rule must be
// pending, firing or without data on the symbol.
func (e *Engine) Ack(ctx context.Context, now time.Time, rule, symbol, by, comment string, until time.Time) (Silence, error) {
	if rule == "" || symbol == "" {
		return Silence{}, errors.New("an acknowledgement names a rule and a symbol")
	}
	if err := control.CheckText(comment, by, rule, symbol); err != nil {
		return Silence{}, err
	}
	var err error
	if rule, symbol, err = e.resolveNames(rule, symbol, false); err != nil {
		// The alert of a rule or symbol the guard does not know is not
		// active either: both errors hold (the API answers 400).
		return Silence{}, fmt.Errorf("%w (%w)", err, ErrNotActive)
	}
	found := false
	for _, a := range e.Active() {
		found = found || a.Rule == rule && a.Symbol == symbol
	}
	if !found {
		return Silence{}, fmt.Errorf("%w: rule %s on %s is inactive", ErrNotActive, rule, symbol)
	}
	return e.AddSilence(ctx, now, Silence{Rule: rule, Symbol: symbol, EndsAt: until, Ack: true, Comment: comment, CreatedBy: by})
}

// ExpireSilence ends a silence now.
func (e *Engine) ExpireSilence(ctx context.Context, now time.Time, id, by string) error {
	if err := e.lead.OnStandby(now); err != nil {
		return err
	}
	s, ok := e.ctl.ExpireSilence(id, now)
	if !ok {
		return fmt.Errorf("silence %s: %w", id, ErrNotFound)
	}
	text := fmt.Sprintf("silence %s of %s expired by %s", id, s.Scope(), by)
	e.emit(ctx, nil, controlEvent(now, "silence", "expired", s.Rule, s.Symbol, by, text, false))
	e.controlChanged(now)
	return nil
}

// Silences lists the silences that have not ended at now (those still to
// start included), oldest first.
func (e *Engine) Silences(now time.Time) []Silence {
	return e.ctl.Silences(now)
}

// Pause holds back the actions p matches from now; a zero EndsAt lasts
// until Resume. Its rule and symbol must be known (see resolveNames),
// unless AllowUnknown; its end at most 90 days away; its comment at most
// 1,000 characters; at most 100 pauses are in force.
//
// It holds every call of its scope not yet sent when it is added: the
// executor looks at the pauses just before each call (control.Store.Check)
// and after this returns none of its scope passes. It returns once no call
// of its scope is on its way, or after settleWait with the names of those
// still running (p.InFlight): sent before the pause, they may still land.
func (e *Engine) Pause(ctx context.Context, now time.Time, p Pause) (Pause, error) {
	if err := e.lead.OnStandby(now); err != nil {
		return Pause{}, err
	}
	if strings.TrimSpace(p.CreatedBy) == "" {
		return Pause{}, errors.New("a pause needs its author (createdBy)")
	}
	if err := control.CheckText(p.Comment, p.CreatedBy, p.Rule, p.Symbol); err != nil {
		return Pause{}, err
	}
	if err := control.CheckTimes("pause", now, p.EndsAt, now); err != nil {
		return Pause{}, err
	}
	var err error
	if p.Rule, p.Symbol, err = e.resolveNames(p.Rule, p.Symbol, p.AllowUnknown); err != nil {
		return Pause{}, err
	}
	p.ID, p.StartsAt, p.AllowUnknown, p.InFlight = control.NewID(), now, false, nil
	if err := e.ctl.AddPause(p, now); err != nil {
		return Pause{}, err
	}
	text := fmt.Sprintf("guard PAUSED by %s for %s %s: no action is sent, the rules are still evaluated and what would be done is said (pause %s)",
		p.CreatedBy, p.Scope(), control.Until(p.EndsAt, "until resumed"), p.ID)
	if p.Comment != "" {
		text += ": " + p.Comment
	}
	e.emit(ctx, nil, controlEvent(now, "pause", "paused", p.Rule, p.Symbol, p.CreatedBy, text, true))
	e.controlChanged(now)
	wctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	if p.InFlight = e.ctl.Settle(wctx, p); len(p.InFlight) > 0 {
		e.log.Warn("pause made while calls of its scope were on their way; they may still land",
			"rule", p.Rule, "symbol", p.Symbol, "calls", strings.Join(p.InFlight, "; "))
	}
	return p, nil
}

// resolveNames checks the rule and symbol a control names (either may be
// empty) against what the guard knows: the rules of the loaded set, and
// the symbols the exchange lists, the open positions' and "account" (an
// account rule's). Names match regardless of case and are returned as the
// guard spells them (xbtc → XBTC). An unknown name is ErrUnknownName with
// the closest known one, unless allowUnknown, when it is kept as given.
func (e *Engine) resolveNames(rule, symbol string, allowUnknown bool) (string, string, error) {
	var errs []error
	if rule != "" {
		var names []string
		for _, r := range e.Rules().Rules {
			names = append(names, r.Name)
		}
		name, err := resolveName("rule", rule, names, allowUnknown)
		rule = name
		errs = append(errs, err)
	}
	if symbol != "" {
		name, err := resolveName("symbol", symbol, e.knownSymbols(), allowUnknown)
		symbol = name
		errs = append(errs, err)
	}
	return rule, symbol, errors.Join(errs...)
}

// resolveName is name as spelled in known (matched regardless of case),
// or ErrUnknownName with a did-you-mean; with allowUnknown an unknown name
// is returned as given.
func resolveName(kind, name string, known []string, allowUnknown bool) (string, error) {
	if slices.Contains(known, name) {
		return name, nil
	}
	if i := slices.IndexFunc(known, func(k string) bool { return strings.EqualFold(k, name) }); i >= 0 {
		return known[i], nil
	}
	if allowUnknown {
		return name, nil
	}
	msg := fmt.Sprintf("%s %q: the guard knows no such %s", kind, name, kind)
	if hint := rules.DidYouMean(name, known); hint != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", hint)
	} else if len(known) == 0 && kind == "symbol" {
		msg += " (it has not read the exchange's symbols yet)"
	}
	if kind == "symbol" {
		msg += "; to name a symbol not open yet on purpose, add --allow-unknown (API: \"allowUnknown\": true)"
	} else {
		msg += "; to name a rule not loaded yet on purpose, add --allow-unknown (API: \"allowUnknown\": true)"
	}
	return name, fmt.Errorf("%w %s", ErrUnknownName, msg)
}

// knownSymbols are the symbols a control may name: those the exchange
// lists, the open positions' of the last snapshot, and "account".
func (e *Engine) knownSymbols() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := slices.Clone(e.listed)
	for _, p := range e.status.positions {
		name := "" // as Status shows a position of an unknown symbol
		if p.sym != nil {
			name = p.sym.Name
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return append(out, "account")
}

// Resume ends the pauses of exactly rule and symbol, or every pause when
// both are empty, and returns them; none is ErrNotFound.
func (e *Engine) Resume(ctx context.Context, now time.Time, rule, symbol, by string) ([]Pause, error) {
	if err := e.lead.OnStandby(now); err != nil {
		return nil, err
	}
	ended := e.ctl.Resume(rule, symbol, now)
	if len(ended) == 0 {
		return nil, fmt.Errorf("no pause of %s: %w", control.Scope(rule, symbol, ""), ErrNotFound)
	}
	for _, p := range ended {
		text := fmt.Sprintf("guard RESUMED by %s for %s (pause %s by %s ended): actions are sent again", by, p.Scope(), p.ID, p.CreatedBy)
		e.emit(ctx, nil, controlEvent(now, "pause", "resumed", p.Rule, p.Symbol, by, text, true))
	}
	e.controlChanged(now)
	return ended, nil
}

// Pauses lists the pauses in force at now, oldest first.
func (e *Engine) Pauses(now time.Time) []Pause {
	return e.ctl.Pauses(now)
}

// controlChanged saves the state file at once when no tick runs (else the
// tick saves it as it ends) and updates the gauges.
func (e *Engine) controlChanged(now time.Time) {
	e.controlGauges(now)
	if e.tick.TryLock() {
		if err := e.saveLocked(); err != nil {
			e.log.Error("save state", "err", err)
		}
		e.tick.Unlock()
	}
}

func (e *Engine) controlGauges(now time.Time) {
	if e.metrics == nil {
		return
	}
	e.metrics.Control(e.ctl.Counts(now))
}

// expireControl drops the silences and pauses that ended by now, saying
// so; the tick calls it.
func (e *Engine) expireControl(ctx context.Context, now time.Time) {
	silences, pauses := e.ctl.Expire(now)
	var evs []event
	for _, s := range silences {
		evs = append(evs, controlEvent(now, "silence", "expired", s.Rule, s.Symbol, s.CreatedBy,
			fmt.Sprintf("silence %s of %s ended at %s", s.ID, s.Scope(), s.EndsAt.UTC().Format(time.RFC3339)), false))
	}
	for _, p := range pauses {
		evs = append(evs, controlEvent(now, "pause", "resumed", p.Rule, p.Symbol, p.CreatedBy,
			fmt.Sprintf("pause %s of %s ended at %s: actions are sent again", p.ID, p.Scope(), p.EndsAt.UTC().Format(time.RFC3339)), true))
	}
	if len(evs) > 0 {
		e.dirty = true
	}
	for _, ev := range evs {
		e.emit(ctx, nil, ev)
	}
	e.controlGauges(now)
}

// resolveAcks ends the acknowledgements of rule on symbol when a
// transition takes the rule to inactive (its alert resolved), then says
// the transition and the acknowledgements ended: the transition's own
// notification is no longer muted by them.
func (e *Engine) resolveAcks(ctx context.Context, rep *TickReport, now time.Time, rule, symbol string, transition event) {
	ended := e.ctl.EndAcks(rule, symbol)
	e.emit(ctx, rep, transition)
	for _, s := range ended {
		e.emit(ctx, nil, controlEvent(now, "silence", "expired", rule, symbol, s.CreatedBy,
			fmt.Sprintf("acknowledgement %s of %s on %s ended: the alert resolved", s.ID, rule, symbol), false))
	}
}

// holdingPause returns the pause in force at t that holds back an action
// of rules on symbol.
func (e *Engine) holdingPause(rules []string, symbol string, t time.Time) (Pause, bool) {
	return e.ctl.Hold(rules, symbol, t)
}

// pauseSuffix says who holds the actions back, until when, and which
// pause: the text after "paused".
func pauseSuffix(p Pause) string {
	return fmt.Sprintf(" by %s %s (pause %s of %s)", p.CreatedBy, control.Until(p.EndsAt, "until resumed"), p.ID, p.Scope())
}

// sayPaused says an action held back by p: audited every time, notified
// once per pause, symbol and action. It returns the action's error.
func (e *Engine) sayPaused(ctx context.Context, rep *TickReport, base Record, desc, effect string, act *ActionEvent, p Pause) error {
	first := e.ctl.FirstSaid(p.ID, base.Symbol, base.Action)
	err := fmt.Errorf("%w%s", ErrPaused, pauseSuffix(p))
	ev := actionPhaseEvent(base, "paused", desc, effect, nil, err, act)
	if !first {
		ev.Note = nil // said once per pause; audited every time
	}
	e.emit(ctx, rep, ev)
	return err
}

// restoreControl takes the silences and pauses of the state file that
// have not ended.
// Their times after now are clamped to now; it returns how many.
func (e *Engine) restoreControl(s *savedState, now time.Time) int {
	return e.ctl.Restore(s.Silences, s.Pauses, now)
}

// saveControl copies the silences and pauses into the state to save.
func (e *Engine) saveControl(s *savedState) {
	s.Silences, s.Pauses = e.ctl.Snapshot()
}

// controlPending reports whether silences or pauses changed since the
// last save.
func (e *Engine) controlPending() bool { return e.ctl.Changed() }
