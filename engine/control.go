package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/notify"
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
func (e *Engine) AddSilence(ctx context.Context, now time.Time, s Silence) (Silence, error) {
	if s.Rule == "" && s.Symbol == "" && s.Severity == "" {
		return Silence{}, errors.New("a silence needs a matcher: rule, symbol or severity")
	}
	if strings.TrimSpace(s.CreatedBy) == "" {
		return Silence{}, errors.New("a silence needs its author (createdBy)")
	}
	if s.StartsAt.IsZero() {
		s.StartsAt = now
	}
	if s.EndsAt.IsZero() && !s.Ack {
		return Silence{}, errors.New("a silence needs an end (endsAt)")
	}
	if !s.EndsAt.IsZero() && !s.EndsAt.After(s.StartsAt) || !s.EndsAt.IsZero() && !s.EndsAt.After(now) {
		return Silence{}, errors.New("the silence would end before it starts, or has ended already")
	}
	s.ID, s.CreatedAt = control.NewID(), now
	e.ctl.AddSilence(s)
	what := "silence"
	if s.Ack {
		what = "acknowledgement"
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
// until Resume.
func (e *Engine) Pause(ctx context.Context, now time.Time, p Pause) (Pause, error) {
	if strings.TrimSpace(p.CreatedBy) == "" {
		return Pause{}, errors.New("a pause needs its author (createdBy)")
	}
	if !p.EndsAt.IsZero() && !p.EndsAt.After(now) {
		return Pause{}, errors.New("the pause would end before it starts")
	}
	p.ID, p.StartsAt = control.NewID(), now
	e.ctl.AddPause(p)
	text := fmt.Sprintf("guard PAUSED by %s for %s %s: no action is sent, the rules are still evaluated and what would be done is said (pause %s)",
		p.CreatedBy, p.Scope(), control.Until(p.EndsAt, "until resumed"), p.ID)
	if p.Comment != "" {
		text += ": " + p.Comment
	}
	e.emit(ctx, nil, controlEvent(now, "pause", "paused", p.Rule, p.Symbol, p.CreatedBy, text, true))
	e.controlChanged(now)
	return p, nil
}

// Resume ends the pauses of exactly rule and symbol, or every pause when
// both are empty, and returns them; none is ErrNotFound.
func (e *Engine) Resume(ctx context.Context, now time.Time, rule, symbol, by string) ([]Pause, error) {
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
func (e *Engine) restoreControl(s *savedState, now time.Time) {
	e.ctl.Restore(s.Silences, s.Pauses, now)
}

// saveControl copies the silences and pauses into the state to save.
func (e *Engine) saveControl(s *savedState) {
	s.Silences, s.Pauses = e.ctl.Snapshot()
}

// controlPending reports whether silences or pauses changed since the
// last save.
func (e *Engine) controlPending() bool { return e.ctl.Changed() }
