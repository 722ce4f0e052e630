package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
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
// already on their way (each is bounded by the action timeout): its answer
// says those still running then.
const settleWait = 5 * time.Second

// Guard is what a Service reads of the guard it controls (the engine): the
// rules in force, and the alerts pending, firing or without data as the
// last tick left them.
type Guard interface {
	Rules() *rules.Set
	Active() []alert.Alert
}

// Emitter fans an event out to the audit log, the log, the metrics and the
// notifications (the engine's journal); r is the tick's report, or nil.
type Emitter interface {
	Emit(ctx context.Context, r *journal.Report, ev journal.Event)
}

// Gauges are the metrics of the silences muting and the pauses in force.
type Gauges interface {
	Control(silences, pauses int)
}

// Standby refuses a change made where it would be lost: on a standby under
// ha, whose controls the leader's replace at the next takeover.
type Standby interface {
	OnStandby(now time.Time) error
}

// Options are what a Service needs of the guard it serves.
type Options struct {
	// Store holds the silences and pauses; nil starts an empty one.
	Store *Store
	// Guard says the rules a control may name and the active alerts.
	Guard Guard
	// Symbols are the symbols a control may name besides "account": those
	// the exchange lists and those of the open positions.
	Symbols func() []string
	// Emitter says every control made or ended.
	Emitter Emitter
	// Save saves the state at once when no tick runs (a tick saves it as
	// it ends); nil saves nothing.
	Save func()
	// Gauges, when set, are updated with every change.
	Gauges Gauges
	// Standby, when set, refuses the changes made on a standby.
	Standby Standby
	// Logger; nil discards.
	Logger *slog.Logger
}

// Service is what an operator says to the guard, checked and said: it
// validates a silence, acknowledgement or pause, resolves the names it
// gives to the guard's spelling, keeps it in the Store, says it (audit,
// log, notification) and saves it. The control API and Telegram call it;
// the tick asks it what is paused and muted, and ends what expired.
type Service struct {
	store   *Store
	guard   Guard
	symbols func() []string
	emitter Emitter
	save    func()
	gauges  Gauges
	standby Standby
	log     *slog.Logger
}

// NewService builds the service over o.Store.
func NewService(o Options) (*Service, error) {
	if o.Guard == nil || o.Symbols == nil || o.Emitter == nil {
		return nil, errors.New("control: guard, symbols and emitter are required")
	}
	c := &Service{store: o.Store, guard: o.Guard, symbols: o.Symbols, emitter: o.Emitter, save: o.Save,
		gauges: o.Gauges, standby: o.Standby, log: o.Logger}
	if c.store == nil {
		c.store = new(Store)
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// event is a silence or pause being made or ended: audited with its
// author, logged, and, for pauses, notified (a paused guard is news).
func event(now time.Time, typ, to, rule, symbol, by, text string, notifyIt bool) journal.Event {
	ev := journal.Event{Level: slog.LevelInfo, Msg: text, Attrs: []any{"rule", rule, "symbol", symbol, "by", by},
		Audit: &journal.Record{Time: now, Type: typ, To: to, Rule: rule, Symbol: symbol, By: by, Reason: text}}
	if notifyIt {
		ev.Level = slog.LevelWarn
		ev.Note = &notify.Message{Time: now, Kind: notify.KindLifecycle, Severity: "warning", Text: text}
	}
	return ev
}

func (c *Service) emit(ctx context.Context, ev journal.Event) { c.emitter.Emit(ctx, nil, ev) }

func (c *Service) onStandby(now time.Time) error {
	if c.standby == nil {
		return nil
	}
	return c.standby.OnStandby(now)
}

// AddSilence adds a silence; a zero StartsAt starts it at now. It needs at
// least one matcher, an author, and an end after its start.
//
// Its rule and symbol must be known to the guard (see resolveNames),
// unless AllowUnknown; its times lie within the bounds of CheckTimes
// (starting within a day of now, lasting at most 90 days), its comment is
// at most 1,000 characters, and at most 100 silences are kept.
func (c *Service) AddSilence(ctx context.Context, now time.Time, s Silence) (Silence, error) {
	if err := c.onStandby(now); err != nil {
		return Silence{}, err
	}
	if s.Rule == "" && s.Symbol == "" && s.Severity == "" {
		return Silence{}, errors.New("a silence needs a matcher: rule, symbol or severity")
	}
	if strings.TrimSpace(s.CreatedBy) == "" {
		return Silence{}, errors.New("a silence needs its author (createdBy)")
	}
	if err := CheckText(s.Comment, s.CreatedBy, s.Rule, s.Symbol, s.Severity); err != nil {
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
	if err := CheckTimes(what, s.StartsAt, s.EndsAt, now); err != nil {
		return Silence{}, err
	}
	var err error
	if s.Rule, s.Symbol, err = c.resolveNames(s.Rule, s.Symbol, s.AllowUnknown); err != nil {
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
	s.ID, s.CreatedAt, s.AllowUnknown = NewID(), now, false
	if err := c.store.AddSilence(s, now); err != nil {
		return Silence{}, err
	}
	text := fmt.Sprintf("%s %s by %s: notifications of %s muted from %s %s", what, s.ID, s.CreatedBy, s.Scope(),
		s.StartsAt.UTC().Format(time.RFC3339), Until(s.EndsAt, "until the alert resolves"))
	if s.Comment != "" {
		text += ": " + s.Comment
	}
	c.emit(ctx, event(now, "silence", "added", s.Rule, s.Symbol, s.CreatedBy, text, false))
	c.changed(now)
	return s, nil
}

// Ack acknowledges the alert of rule on symbol: its notifications are
// muted until it resolves (or until, when not zero). The rule must be
// pending, firing or without data on the symbol.
func (c *Service) Ack(ctx context.Context, now time.Time, rule, symbol, by, comment string, until time.Time) (Silence, error) {
	if rule == "" || symbol == "" {
		return Silence{}, errors.New("an acknowledgement names a rule and a symbol")
	}
	if err := CheckText(comment, by, rule, symbol); err != nil {
		return Silence{}, err
	}
	var err error
	if rule, symbol, err = c.resolveNames(rule, symbol, false); err != nil {
		// The alert of a rule or symbol the guard does not know is not
		// active either: both errors hold (the API answers 400).
		return Silence{}, fmt.Errorf("%w (%w)", err, ErrNotActive)
	}
	found := false
	for _, a := range c.guard.Active() {
		found = found || a.Rule == rule && a.Symbol == symbol
	}
	if !found {
		return Silence{}, fmt.Errorf("%w: rule %s on %s is inactive", ErrNotActive, rule, symbol)
	}
	return c.AddSilence(ctx, now, Silence{Rule: rule, Symbol: symbol, EndsAt: until, Ack: true, Comment: comment, CreatedBy: by})
}

// ExpireSilence ends a silence now.
func (c *Service) ExpireSilence(ctx context.Context, now time.Time, id, by string) error {
	if err := c.onStandby(now); err != nil {
		return err
	}
	s, ok := c.store.ExpireSilence(id, now)
	if !ok {
		return fmt.Errorf("silence %s: %w", id, ErrNotFound)
	}
	text := fmt.Sprintf("silence %s of %s expired by %s", id, s.Scope(), by)
	c.emit(ctx, event(now, "silence", "expired", s.Rule, s.Symbol, by, text, false))
	c.changed(now)
	return nil
}

// Silences lists the silences that have not ended at now (those still to
// start included), oldest first.
func (c *Service) Silences(now time.Time) []Silence {
	return c.store.Silences(now)
}

// Pause holds back the actions p matches from now; a zero EndsAt lasts
// until Resume. Its rule and symbol must be known (see resolveNames),
// unless AllowUnknown; its end at most 90 days away; its comment at most
// 1,000 characters; at most 100 pauses are in force.
//
// It holds every call of its scope not yet sent when it is added: the
// executor looks at the pauses just before each call (Check) and after
// this returns none of its scope passes. It returns once no call of its
// scope is on its way, or after settleWait with the names of those still
// running (p.InFlight): sent before the pause, they may still land.
func (c *Service) Pause(ctx context.Context, now time.Time, p Pause) (Pause, error) {
	if err := c.onStandby(now); err != nil {
		return Pause{}, err
	}
	if strings.TrimSpace(p.CreatedBy) == "" {
		return Pause{}, errors.New("a pause needs its author (createdBy)")
	}
	if err := CheckText(p.Comment, p.CreatedBy, p.Rule, p.Symbol); err != nil {
		return Pause{}, err
	}
	if err := CheckTimes("pause", now, p.EndsAt, now); err != nil {
		return Pause{}, err
	}
	var err error
	if p.Rule, p.Symbol, err = c.resolveNames(p.Rule, p.Symbol, p.AllowUnknown); err != nil {
		return Pause{}, err
	}
	p.ID, p.StartsAt, p.AllowUnknown, p.InFlight = NewID(), now, false, nil
	if err := c.store.AddPause(p, now); err != nil {
		return Pause{}, err
	}
	text := fmt.Sprintf("guard PAUSED by %s for %s %s: no action is sent, the rules are still evaluated and what would be done is said (pause %s)",
		p.CreatedBy, p.Scope(), Until(p.EndsAt, "until resumed"), p.ID)
	if p.Comment != "" {
		text += ": " + p.Comment
	}
	c.emit(ctx, event(now, "pause", "paused", p.Rule, p.Symbol, p.CreatedBy, text, true))
	c.changed(now)
	wctx, cancel := context.WithTimeout(ctx, settleWait)
	defer cancel()
	if p.InFlight = c.store.Settle(wctx, p); len(p.InFlight) > 0 {
		c.log.Warn("pause made while calls of its scope were on their way; they may still land",
			"rule", p.Rule, "symbol", p.Symbol, "calls", strings.Join(p.InFlight, "; "))
	}
	return p, nil
}

// Resume ends the pauses of exactly rule and symbol, or every pause when
// both are empty, and returns them; none is ErrNotFound.
func (c *Service) Resume(ctx context.Context, now time.Time, rule, symbol, by string) ([]Pause, error) {
	if err := c.onStandby(now); err != nil {
		return nil, err
	}
	ended := c.store.Resume(rule, symbol, now)
	if len(ended) == 0 {
		return nil, fmt.Errorf("no pause of %s: %w", Scope(rule, symbol, ""), ErrNotFound)
	}
	for _, p := range ended {
		text := fmt.Sprintf("guard RESUMED by %s for %s (pause %s by %s ended): actions are sent again", by, p.Scope(), p.ID, p.CreatedBy)
		c.emit(ctx, event(now, "pause", "resumed", p.Rule, p.Symbol, by, text, true))
	}
	c.changed(now)
	return ended, nil
}

// Pauses lists the pauses in force at now, oldest first.
func (c *Service) Pauses(now time.Time) []Pause {
	return c.store.Pauses(now)
}

// resolveNames checks the rule and symbol a control names (either may be
// empty) against what the guard knows: the rules of the loaded set, and
// the symbols the exchange lists, the open positions' and "account" (an
// account rule's). Names match regardless of case and are returned as the
// guard spells them (xbtc → XBTC). An unknown name is ErrUnknownName with
// the closest known one, unless allowUnknown, when it is kept as given.
func (c *Service) resolveNames(rule, symbol string, allowUnknown bool) (string, string, error) {
	var errs []error
	if rule != "" {
		var names []string
		for _, r := range c.guard.Rules().Rules {
			names = append(names, r.Name)
		}
		name, err := resolveName("rule", rule, names, allowUnknown)
		rule = name
		errs = append(errs, err)
	}
	if symbol != "" {
		name, err := resolveName("symbol", symbol, append(c.symbols(), "account"), allowUnknown)
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

// changed saves the state at once when no tick runs (else the tick saves
// it as it ends) and updates the gauges.
func (c *Service) changed(now time.Time) {
	c.updateGauges(now)
	if c.save != nil {
		c.save()
	}
}

func (c *Service) updateGauges(now time.Time) {
	if c.gauges == nil {
		return
	}
	c.gauges.Control(c.store.Counts(now))
}

// Expire drops the silences and pauses that ended by now, saying so, and
// reports whether any did; the tick calls it.
func (c *Service) Expire(ctx context.Context, now time.Time) bool {
	silences, pauses := c.store.Expire(now)
	var evs []journal.Event
	for _, s := range silences {
		evs = append(evs, event(now, "silence", "expired", s.Rule, s.Symbol, s.CreatedBy,
			fmt.Sprintf("silence %s of %s ended at %s", s.ID, s.Scope(), s.EndsAt.UTC().Format(time.RFC3339)), false))
	}
	for _, p := range pauses {
		evs = append(evs, event(now, "pause", "resumed", p.Rule, p.Symbol, p.CreatedBy,
			fmt.Sprintf("pause %s of %s ended at %s: actions are sent again", p.ID, p.Scope(), p.EndsAt.UTC().Format(time.RFC3339)), true))
	}
	for _, ev := range evs {
		c.emit(ctx, ev)
	}
	c.updateGauges(now)
	return len(evs) > 0
}

// ResolveAcks ends the acknowledgements of rule on symbol when a
// transition takes the rule to inactive (its alert resolved), then says
// the transition (with the tick's report r) and the acknowledgements
// ended: the transition's own notification is no longer muted by them.
func (c *Service) ResolveAcks(ctx context.Context, r *journal.Report, now time.Time, rule, symbol string, transition journal.Event) {
	ended := c.store.EndAcks(rule, symbol)
	c.emitter.Emit(ctx, r, transition)
	for _, s := range ended {
		c.emit(ctx, event(now, "silence", "expired", rule, symbol, s.CreatedBy,
			fmt.Sprintf("acknowledgement %s of %s on %s ended: the alert resolved", s.ID, rule, symbol), false))
	}
}

// Hold returns the pause in force at t that holds back an action of rules
// on symbol; see Store.Hold.
func (c *Service) Hold(rules []string, symbol string, t time.Time) (Pause, bool) {
	return c.store.Hold(rules, symbol, t)
}

// Check is the last look at the pauses before a call is sent; see
// Store.Check.
func (c *Service) Check(rules []string, symbol, name string, t time.Time) (Pause, func(), bool) {
	return c.store.Check(rules, symbol, name, t)
}

// pauseSuffix says who holds the actions back, until when, and which
// pause: the text after "paused".
func pauseSuffix(p Pause) string {
	return fmt.Sprintf(" by %s %s (pause %s of %s)", p.CreatedBy, Until(p.EndsAt, "until resumed"), p.ID, p.Scope())
}

// SayPaused says an action on symbol held back by p: its error wraps
// ErrPaused and says who holds it, until when and which pause; paused
// makes the action's event of it, which is audited every time (with the
// tick's report r) and notified once per pause, symbol and action. It
// returns the error.
func (c *Service) SayPaused(ctx context.Context, r *journal.Report, p Pause, symbol, action string, paused func(error) journal.Event) error {
	first := c.store.FirstSaid(p.ID, symbol, action)
	err := fmt.Errorf("%w%s", ErrPaused, pauseSuffix(p))
	ev := paused(err)
	if !first {
		ev.Note = nil // said once per pause; audited every time
	}
	c.emitter.Emit(ctx, r, ev)
	return err
}

// Mutes returns the id of the silence that mutes m at t, if any.
func (c *Service) Mutes(m *notify.Message, t time.Time) (string, bool) {
	s, ok := c.store.Mutes(m, t)
	return s.ID, ok
}

// Replace puts the silences and pauses of another process's state (a
// leader's, at takeover) in place of these; see Store.Replace.
func (c *Service) Replace(silences []Silence, pauses []Pause, now time.Time) int {
	return c.store.Replace(silences, pauses, now)
}

// Snapshot copies the silences and pauses for the state file and marks
// them saved.
func (c *Service) Snapshot() ([]Silence, []Pause) { return c.store.Snapshot() }

// Changed reports whether silences or pauses changed since the last
// Snapshot.
func (c *Service) Changed() bool { return c.store.Changed() }
