package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

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

// Silence mutes the notifications of the rules it matches between StartsAt
// and EndsAt, in Alertmanager's model: every matcher that is set must equal
// the message's rule, symbol or severity. Only notifications about a rule
// (a transition, a rule's notify action, an action and its failure) can be
// muted; lifecycle, exchange, breaker and audit messages never are. A
// silence changes nothing but notifications: the rules are evaluated, the
// actions taken, logged and audited as without it.
type Silence struct {
	ID       string    `json:"id"`
	Rule     string    `json:"rule,omitempty"`
	Symbol   string    `json:"symbol,omitempty"`
	Severity string    `json:"severity,omitempty"`
	StartsAt time.Time `json:"startsAt"`
	// EndsAt is when it ends; zero for an acknowledgement without a
	// deadline.
	EndsAt time.Time `json:"endsAt,omitzero"`
	// Ack marks an acknowledgement: it also ends when the alert (its rule
	// on its symbol) resolves.
	Ack       bool      `json:"ack,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

// activeAt reports whether the silence mutes at t.
func (s *Silence) activeAt(t time.Time) bool {
	return !t.Before(s.StartsAt) && (s.EndsAt.IsZero() || t.Before(s.EndsAt))
}

// ended reports whether the silence is over at t for good.
func (s *Silence) ended(t time.Time) bool { return !s.EndsAt.IsZero() && !t.Before(s.EndsAt) }

// matches reports whether the silence's matchers select m.
func (s *Silence) matches(m *notify.Message) bool {
	if m.Rule == "" {
		return false
	}
	if s.Rule != "" && !slices.Contains(strings.Split(m.Rule, ","), s.Rule) {
		return false
	}
	if s.Symbol != "" && s.Symbol != m.Symbol {
		return false
	}
	return s.Severity == "" || s.Severity == m.Severity
}

// Pause stops the actions of the rules and symbols it matches (every one
// when Rule and Symbol are empty) until EndsAt, or until resumed when EndsAt
// is zero. The guard keeps evaluating, and says what it would do: each held
// action is logged, audited (phase paused), counted and notified.
type Pause struct {
	ID        string    `json:"id"`
	Rule      string    `json:"rule,omitempty"`
	Symbol    string    `json:"symbol,omitempty"`
	StartsAt  time.Time `json:"startsAt"`
	EndsAt    time.Time `json:"endsAt,omitzero"`
	Comment   string    `json:"comment,omitempty"`
	CreatedBy string    `json:"createdBy"`
}

func (p *Pause) ended(t time.Time) bool { return !p.EndsAt.IsZero() && !t.Before(p.EndsAt) }

// holds reports whether the pause holds back an action of rules on symbol.
func (p *Pause) holds(rules []string, symbol string) bool {
	return (p.Rule == "" || slices.Contains(rules, p.Rule)) && (p.Symbol == "" || p.Symbol == symbol)
}

// Scope says what the silence covers: "rule r1, symbol XBTC".
func (s Silence) Scope() string { return scope(s.Rule, s.Symbol, s.Severity) }

// Scope says what the pause covers: "every rule and symbol", "symbol XBTC".
func (p Pause) Scope() string { return scope(p.Rule, p.Symbol, "") }

// scope says what a pause or silence covers, for messages.
func scope(rule, symbol, severity string) string {
	var parts []string
	if rule != "" {
		parts = append(parts, "rule "+rule)
	}
	if symbol != "" {
		parts = append(parts, "symbol "+symbol)
	}
	if severity != "" {
		parts = append(parts, "severity "+severity)
	}
	if len(parts) == 0 {
		return "every rule and symbol"
	}
	return strings.Join(parts, ", ")
}

func until(t time.Time, open string) string {
	if t.IsZero() {
		return open
	}
	return "until " + t.UTC().Format(time.RFC3339)
}

// control holds the silences and pauses. Its own lock is held for a few
// assignments only: the notification path and the control API read it
// while a tick runs.
type control struct {
	mu       sync.Mutex
	silences []Silence
	pauses   []Pause
	// changed: not saved in the state file yet.
	changed bool
	// said holds the paused actions already notified, by pause, symbol
	// and action: one notification per pause, every one audited.
	said map[string]bool
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// controlEvent is a silence or pause being made or ended: audited with its
// author, logged, and, for pauses, notified (a paused guard is news).
func controlEvent(now time.Time, typ, to, rule, symbol, by, text string, notifyIt bool) event {
	ev := event{level: slog.LevelInfo, msg: text, attrs: []any{"rule", rule, "symbol", symbol, "by", by},
		audit: &Record{Time: now, Type: typ, To: to, Rule: rule, Symbol: symbol, By: by, Reason: text}}
	if notifyIt {
		ev.level = slog.LevelWarn
		ev.note = &notify.Message{Time: now, Kind: notify.KindLifecycle, Severity: "warning", Text: text}
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
	s.ID, s.CreatedAt = newID(), now
	e.ctl.mu.Lock()
	e.ctl.silences = append(e.ctl.silences, s)
	e.ctl.changed = true
	e.ctl.mu.Unlock()
	what := "silence"
	if s.Ack {
		what = "acknowledgement"
	}
	text := fmt.Sprintf("%s %s by %s: notifications of %s muted from %s %s", what, s.ID, s.CreatedBy, scope(s.Rule, s.Symbol, s.Severity),
		s.StartsAt.UTC().Format(time.RFC3339), until(s.EndsAt, "until the alert resolves"))
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
	e.ctl.mu.Lock()
	i := slices.IndexFunc(e.ctl.silences, func(s Silence) bool { return s.ID == id && !s.ended(now) })
	var s Silence
	if i >= 0 {
		s = e.ctl.silences[i]
		e.ctl.silences = slices.Delete(e.ctl.silences, i, i+1)
		e.ctl.changed = true
	}
	e.ctl.mu.Unlock()
	if i < 0 {
		return fmt.Errorf("silence %s: %w", id, ErrNotFound)
	}
	text := fmt.Sprintf("silence %s of %s expired by %s", id, scope(s.Rule, s.Symbol, s.Severity), by)
	e.emit(ctx, nil, controlEvent(now, "silence", "expired", s.Rule, s.Symbol, by, text, false))
	e.controlChanged(now)
	return nil
}

// Silences lists the silences that have not ended at now (those still to
// start included), oldest first.
func (e *Engine) Silences(now time.Time) []Silence {
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	var out []Silence
	for _, s := range e.ctl.silences {
		if !s.ended(now) {
			out = append(out, s)
		}
	}
	return out
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
	p.ID, p.StartsAt = newID(), now
	e.ctl.mu.Lock()
	e.ctl.pauses = append(e.ctl.pauses, p)
	e.ctl.changed = true
	e.ctl.mu.Unlock()
	text := fmt.Sprintf("guard PAUSED by %s for %s %s: no action is sent, the rules are still evaluated and what would be done is said (pause %s)",
		p.CreatedBy, scope(p.Rule, p.Symbol, ""), until(p.EndsAt, "until resumed"), p.ID)
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
	e.ctl.mu.Lock()
	var ended []Pause
	e.ctl.pauses = slices.DeleteFunc(e.ctl.pauses, func(p Pause) bool {
		if p.ended(now) || rule == "" && symbol == "" || p.Rule == rule && p.Symbol == symbol {
			if !p.ended(now) {
				ended = append(ended, p)
			}
			return true
		}
		return false
	})
	e.ctl.changed = true
	e.ctl.forgetSaid()
	e.ctl.mu.Unlock()
	if len(ended) == 0 {
		return nil, fmt.Errorf("no pause of %s: %w", scope(rule, symbol, ""), ErrNotFound)
	}
	for _, p := range ended {
		text := fmt.Sprintf("guard RESUMED by %s for %s (pause %s by %s ended): actions are sent again", by, scope(p.Rule, p.Symbol, ""), p.ID, p.CreatedBy)
		e.emit(ctx, nil, controlEvent(now, "pause", "resumed", p.Rule, p.Symbol, by, text, true))
	}
	e.controlChanged(now)
	return ended, nil
}

// Pauses lists the pauses in force at now, oldest first.
func (e *Engine) Pauses(now time.Time) []Pause {
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	var out []Pause
	for _, p := range e.ctl.pauses {
		if !p.ended(now) {
			out = append(out, p)
		}
	}
	return out
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
	sil, pau := 0, 0
	e.ctl.mu.Lock()
	for _, s := range e.ctl.silences {
		if s.activeAt(now) {
			sil++
		}
	}
	for _, p := range e.ctl.pauses {
		if !p.ended(now) {
			pau++
		}
	}
	e.ctl.mu.Unlock()
	e.metrics.control(sil, pau)
}

// expireControl drops the silences and pauses that ended by now, saying
// so; the tick calls it.
func (e *Engine) expireControl(ctx context.Context, now time.Time) {
	var evs []event
	e.ctl.mu.Lock()
	e.ctl.silences = slices.DeleteFunc(e.ctl.silences, func(s Silence) bool {
		if s.ended(now) {
			evs = append(evs, controlEvent(now, "silence", "expired", s.Rule, s.Symbol, s.CreatedBy,
				fmt.Sprintf("silence %s of %s ended at %s", s.ID, scope(s.Rule, s.Symbol, s.Severity), s.EndsAt.UTC().Format(time.RFC3339)), false))
			return true
		}
		return false
	})
	e.ctl.pauses = slices.DeleteFunc(e.ctl.pauses, func(p Pause) bool {
		if p.ended(now) {
			evs = append(evs, controlEvent(now, "pause", "resumed", p.Rule, p.Symbol, p.CreatedBy,
				fmt.Sprintf("pause %s of %s ended at %s: actions are sent again", p.ID, scope(p.Rule, p.Symbol, ""), p.EndsAt.UTC().Format(time.RFC3339)), true))
			return true
		}
		return false
	})
	if len(evs) > 0 {
		e.ctl.changed = true
		e.dirty = true
	}
	e.ctl.forgetSaid()
	e.ctl.mu.Unlock()
	for _, ev := range evs {
		e.emit(ctx, nil, ev)
	}
	e.controlGauges(now)
}

// resolvedAck ends the acknowledgements of rule on symbol: the alert
// resolved (emit calls it on a transition to inactive).
func (e *Engine) resolvedAck(ctx context.Context, now time.Time, rule, symbol string) {
	var ended []Silence
	e.ctl.mu.Lock()
	e.ctl.silences = slices.DeleteFunc(e.ctl.silences, func(s Silence) bool {
		if s.Ack && s.Rule == rule && s.Symbol == symbol {
			ended = append(ended, s)
			return true
		}
		return false
	})
	if len(ended) > 0 {
		e.ctl.changed = true
	}
	e.ctl.mu.Unlock()
	for _, s := range ended {
		e.emit(ctx, nil, controlEvent(now, "silence", "expired", rule, symbol, s.CreatedBy,
			fmt.Sprintf("acknowledgement %s of %s on %s ended: the alert resolved", s.ID, rule, symbol), false))
	}
}

// muted returns the silence that mutes m, if any.
func (e *Engine) muted(m *notify.Message) (Silence, bool) {
	t := m.Time
	if t.IsZero() {
		t = e.now()
	}
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	for _, s := range e.ctl.silences {
		if s.activeAt(t) && s.matches(m) {
			return s, true
		}
	}
	return Silence{}, false
}

// holdingPause returns the pause in force at t that holds back an action
// of rules on symbol.
func (e *Engine) holdingPause(rules []string, symbol string, t time.Time) (Pause, bool) {
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	i := slices.IndexFunc(e.ctl.pauses, func(p Pause) bool {
		return !p.ended(t) && !t.Before(p.StartsAt) && p.holds(rules, symbol)
	})
	if i < 0 {
		return Pause{}, false
	}
	return e.ctl.pauses[i], true
}

// pauseSuffix says who holds the actions back, until when, and which
// pause: the text after "paused".
func pauseSuffix(p Pause) string {
	return fmt.Sprintf(" by %s %s (pause %s of %s)", p.CreatedBy, until(p.EndsAt, "until resumed"), p.ID, scope(p.Rule, p.Symbol, ""))
}

// sayPaused says an action held back by p: audited every time, notified
// once per pause, symbol and action. It returns the action's error.
func (e *Engine) sayPaused(ctx context.Context, rep *TickReport, base Record, desc, effect string, act *ActionEvent, p Pause) error {
	key := p.ID + "\x00" + base.Symbol + "\x00" + base.Action
	e.ctl.mu.Lock()
	if e.ctl.said == nil {
		e.ctl.said = make(map[string]bool)
	}
	first := !e.ctl.said[key]
	e.ctl.said[key] = true
	e.ctl.mu.Unlock()
	err := fmt.Errorf("%w%s", ErrPaused, pauseSuffix(p))
	ev := actionPhaseEvent(base, "paused", desc, effect, nil, err, act)
	if !first {
		ev.note = nil // said once per pause; audited every time
	}
	e.emit(ctx, rep, ev)
	return err
}

// restoreControl takes the silences and pauses of the state file that
// have not ended.
func (e *Engine) restoreControl(s *savedState, now time.Time) {
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	for _, x := range s.Silences {
		if !x.ended(now) {
			e.ctl.silences = append(e.ctl.silences, x)
		}
	}
	for _, p := range s.Pauses {
		if !p.ended(now) {
			e.ctl.pauses = append(e.ctl.pauses, p)
		}
	}
}

// saveControl copies the silences and pauses into the state to save.
func (e *Engine) saveControl(s *savedState) {
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	s.Silences, s.Pauses = slices.Clone(e.ctl.silences), slices.Clone(e.ctl.pauses)
	e.ctl.changed = false
}

// controlPending reports whether silences or pauses changed since the
// last save.
func (e *Engine) controlPending() bool {
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	return e.ctl.changed
}

// forgetSaid drops what was said of the pauses no longer in force, so the
// record of the notified paused actions stays as small as the pauses.
// Call with mu held.
func (c *control) forgetSaid() {
	for key := range c.said {
		id, _, _ := strings.Cut(key, "\x00")
		if !slices.ContainsFunc(c.pauses, func(p Pause) bool { return p.ID == id }) {
			delete(c.said, key)
		}
	}
}
