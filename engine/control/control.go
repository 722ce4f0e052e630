// Package control holds what an operator says to the guard: silences
// (mute notifications, in Alertmanager's model), acknowledgements (a
// silence that ends when its alert resolves) and pauses (hold actions
// back). Its Store has its own lock, held for a few assignments only: the
// notification path, the executor and the control API read it while a
// tick runs. Its Service checks what an operator asks, keeps it in the
// Store and says what changed, through the emitter the engine gives it.
package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/riskguard/riskguard/internal/printable"
	"github.com/riskguard/riskguard/notify"
)

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
	// AllowUnknown, set by the caller, accepts a rule or symbol the guard
	// does not know (a symbol not open yet); it is not kept.
	AllowUnknown bool `json:"-"`
}

// ActiveAt reports whether the silence mutes at t.
func (s *Silence) ActiveAt(t time.Time) bool {
	return !t.Before(s.StartsAt) && (s.EndsAt.IsZero() || t.Before(s.EndsAt))
}

// Ended reports whether the silence is over at t for good.
func (s *Silence) Ended(t time.Time) bool { return !s.EndsAt.IsZero() && !t.Before(s.EndsAt) }

// Matches reports whether the silence's matchers select m.
func (s *Silence) Matches(m *notify.Message) bool {
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
	// AllowUnknown, set by the caller, accepts a rule or symbol the guard
	// does not know (a symbol not open yet); it is not kept.
	AllowUnknown bool `json:"-"`
	// InFlight, in the answer to a new pause only (never kept), names the
	// calls of its scope that were sent before it and had not ended when
	// the answer was given: they may still change the position.
	InFlight []string `json:"inFlight,omitempty"`
}

// Ended reports whether the pause is over at t.
func (p *Pause) Ended(t time.Time) bool { return !p.EndsAt.IsZero() && !t.Before(p.EndsAt) }

// Holds reports whether the pause holds back an action of rules on symbol.
func (p *Pause) Holds(rules []string, symbol string) bool {
	return (p.Rule == "" || slices.Contains(rules, p.Rule)) && (p.Symbol == "" || p.Symbol == symbol)
}

// Scope says what the silence covers: "rule r1, symbol XBTC".
func (s Silence) Scope() string { return Scope(s.Rule, s.Symbol, s.Severity) }

// Scope says what the pause covers: "every rule and symbol", "symbol XBTC".
func (p Pause) Scope() string { return Scope(p.Rule, p.Symbol, "") }

// Scope says what a pause or silence of these matchers covers, for
// messages: "rule r1, symbol XBTC", or "every rule and symbol".
func Scope(rule, symbol, severity string) string {
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

// Until says an end time for messages: "until 2026-…Z", or open when t
// is zero.
func Until(t time.Time, open string) string {
	if t.IsZero() {
		return open
	}
	return "until " + t.UTC().Format(time.RFC3339)
}

// The bounds of what a control may say: every time it takes lies within
// them, so the state file can always be written (JSON times end at year
// 9999) and a mistyped date is refused rather than kept for years; the
// counts and the comment length keep the state file and the status answer,
// rewritten and polled often, small.
const (
	// MaxLead is how far from now a silence may start, either way.
	MaxLead = 24 * time.Hour
	// MaxDuration is the longest a silence, an acknowledgement's or a
	// pause's deadline may last from its start (or from now).
	MaxDuration = 90 * 24 * time.Hour
	// MaxComment is the longest comment, in characters.
	MaxComment = 1000
	// MaxName is the longest author, rule, symbol or severity, in
	// characters.
	MaxName = 200
	// MaxSilences is how many silences and acknowledgements may be kept
	// at once; MaxPauses how many pauses.
	MaxSilences = 100
	MaxPauses   = 100
)

// CheckTimes checks a control's start and end against now: the start
// within MaxLead of now, the end (zero: none) after the start and after
// now, and at most MaxDuration after both the start and now.
func CheckTimes(what string, startsAt, endsAt, now time.Time) error {
	if d := startsAt.Sub(now); d > MaxLead || d < -MaxLead {
		return fmt.Errorf("the %s would start at %s: it must start within %s of now (%s)", what,
			fmtTime(startsAt), fmtDuration(MaxLead), now.UTC().Format(time.RFC3339))
	}
	if endsAt.IsZero() {
		return nil
	}
	if !endsAt.After(startsAt) || !endsAt.After(now) {
		return fmt.Errorf("the %s would end (%s) before it starts, or has ended already", what, fmtTime(endsAt))
	}
	if endsAt.Sub(startsAt) > MaxDuration || endsAt.Sub(now) > MaxDuration {
		return fmt.Errorf("the %s would last until %s: it may last at most %s", what, fmtTime(endsAt), fmtDuration(MaxDuration))
	}
	return nil
}

// CheckText checks the free text of a control: the comment at most
// MaxComment characters, the author and matchers at most MaxName, all
// valid UTF-8.
func CheckText(comment string, names ...string) error {
	if !utf8.ValidString(comment) || utf8.RuneCountInString(comment) > MaxComment {
		return fmt.Errorf("the comment is %d characters long: at most %d (valid UTF-8)", utf8.RuneCountInString(comment), MaxComment)
	}
	for _, n := range names {
		if !utf8.ValidString(n) || utf8.RuneCountInString(n) > MaxName {
			return fmt.Errorf("a name (author, rule, symbol or severity) is %d characters long: at most %d (valid UTF-8)", utf8.RuneCountInString(n), MaxName)
		}
	}
	return nil
}

// fmtTime says a time that may be far out of range without failing.
func fmtTime(t time.Time) string {
	if y := t.Year(); y < 0 || y > 9999 {
		return fmt.Sprintf("year %d", y)
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtDuration says a bound in days or hours: "90 days", "24h".
func fmtDuration(d time.Duration) string {
	if d >= 48*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return fmt.Sprintf("%dh", d/time.Hour)
}

// Printable is s with its control characters and bidirectional overrides
// written as visible escapes (printable.Text), for a terminal or a table.
func Printable(s string) string { return printable.Text(s) }

// ErrLimit is the error of a silence or pause refused because as many as
// the store keeps are in force already.
var ErrLimit = errors.New("too many")

// Store holds the silences and pauses, and the gate between them and the
// executor: the calls checked against the pauses and not yet ended, so
// that a new pause can wait until none of its scope is on its way.
type Store struct {
	mu       sync.Mutex
	silences []Silence
	pauses   []Pause
	// changed: not saved in the state file yet.
	changed bool
	// said holds the paused actions already notified, by pause, symbol
	// and action: one notification per pause, every one audited.
	said map[string]bool
	// sending are the calls that passed Check and have not ended, by
	// ticket; ended is closed and replaced when one ends.
	sending map[uint64]sendingCall
	ticket  uint64
	ended   chan struct{}
}

// sendingCall is a call that passed the pauses: its rules, symbol and name.
type sendingCall struct {
	rules  []string
	symbol string
	name   string
}

// NewID is a new silence or pause id.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// AddSilence adds s as it is (checked by the caller), unless MaxSilences
// are kept already at now (ErrLimit).
func (c *Store) AddSilence(s Silence, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := countFunc(c.silences, func(x Silence) bool { return !x.Ended(now) }); n >= MaxSilences {
		return fmt.Errorf("%w silences: %d are kept, at most %d; expire some first (riskguard silence expire ID)", ErrLimit, n, MaxSilences)
	}
	c.silences = append(c.silences, s)
	c.changed = true
	return nil
}

func countFunc[T any](xs []T, f func(T) bool) int {
	n := 0
	for _, x := range xs {
		if f(x) {
			n++
		}
	}
	return n
}

// ExpireSilence removes the silence id if it has not ended at now.
func (c *Store) ExpireSilence(id string, now time.Time) (Silence, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.silences, func(s Silence) bool { return s.ID == id && !s.Ended(now) })
	if i < 0 {
		return Silence{}, false
	}
	s := c.silences[i]
	c.silences = slices.Delete(c.silences, i, i+1)
	c.changed = true
	return s, true
}

// Silences lists the silences that have not ended at now (those still to
// start included), oldest first.
func (c *Store) Silences(now time.Time) []Silence {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Silence
	for _, s := range c.silences {
		if !s.Ended(now) {
			out = append(out, s)
		}
	}
	return out
}

// AddPause adds p as it is (checked by the caller), unless MaxPauses are
// in force already at now (ErrLimit). From its return, Check holds every
// call p matches.
func (c *Store) AddPause(p Pause, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := countFunc(c.pauses, func(x Pause) bool { return !x.Ended(now) }); n >= MaxPauses {
		return fmt.Errorf("%w pauses: %d are in force, at most %d; resume some first, or pause everything (riskguard pause)", ErrLimit, n, MaxPauses)
	}
	c.pauses = append(c.pauses, p)
	c.changed = true
	return nil
}

// Resume ends the pauses of exactly rule and symbol (regardless of case,
// as the pause and the resume may be spelt differently), or every pause
// when both are empty, and returns those that were in force at now.
func (c *Store) Resume(rule, symbol string, now time.Time) []Pause {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ended []Pause
	c.pauses = slices.DeleteFunc(c.pauses, func(p Pause) bool {
		if p.Ended(now) || rule == "" && symbol == "" || strings.EqualFold(p.Rule, rule) && strings.EqualFold(p.Symbol, symbol) {
			if !p.Ended(now) {
				ended = append(ended, p)
			}
			return true
		}
		return false
	})
	c.changed = true
	c.forgetSaid()
	return ended
}

// Pauses lists the pauses in force at now, oldest first.
func (c *Store) Pauses(now time.Time) []Pause {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Pause
	for _, p := range c.pauses {
		if !p.Ended(now) {
			out = append(out, p)
		}
	}
	return out
}

// Counts are the silences muting and the pauses in force at now.
func (c *Store) Counts(now time.Time) (silences, pauses int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.silences {
		if s.ActiveAt(now) {
			silences++
		}
	}
	for _, p := range c.pauses {
		if !p.Ended(now) {
			pauses++
		}
	}
	return silences, pauses
}

// Expire removes the silences and pauses that ended by now and returns
// them.
func (c *Store) Expire(now time.Time) ([]Silence, []Pause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var silences []Silence
	var pauses []Pause
	c.silences = slices.DeleteFunc(c.silences, func(s Silence) bool {
		if s.Ended(now) {
			silences = append(silences, s)
			return true
		}
		return false
	})
	c.pauses = slices.DeleteFunc(c.pauses, func(p Pause) bool {
		if p.Ended(now) {
			pauses = append(pauses, p)
			return true
		}
		return false
	})
	if len(silences)+len(pauses) > 0 {
		c.changed = true
	}
	c.forgetSaid()
	return silences, pauses
}

// EndAcks removes the acknowledgements of rule on symbol (the alert
// resolved) and returns them.
func (c *Store) EndAcks(rule, symbol string) []Silence {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ended []Silence
	c.silences = slices.DeleteFunc(c.silences, func(s Silence) bool {
		if s.Ack && s.Rule == rule && s.Symbol == symbol {
			ended = append(ended, s)
			return true
		}
		return false
	})
	if len(ended) > 0 {
		c.changed = true
	}
	return ended
}

// Mutes returns the silence that mutes m at t, if any.
func (c *Store) Mutes(m *notify.Message, t time.Time) (Silence, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.silences {
		if s.ActiveAt(t) && s.Matches(m) {
			return s, true
		}
	}
	return Silence{}, false
}

// Hold returns the pause not ended at t that holds back an action of
// rules on symbol, if any. A pause holds from the moment it is added,
// whatever t says of its start: t may be the start of a tick that began
// reading before the pause was made.
func (c *Store) Hold(rules []string, symbol string, t time.Time) (Pause, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holdLocked(rules, symbol, t)
}

func (c *Store) holdLocked(rules []string, symbol string, t time.Time) (Pause, bool) {
	i := slices.IndexFunc(c.pauses, func(p Pause) bool { return !p.Ended(t) && p.Holds(rules, symbol) })
	if i < 0 {
		return Pause{}, false
	}
	return c.pauses[i], true
}

// Check is the last look at the pauses before a call (named name) of rules
// on symbol is sent: it returns the pause that holds it, or a release
// function to call once the call has ended (answered, failed or timed
// out). Between the two the call counts as on its way, and a new pause of
// its scope waits for it (Settle): a pause added after Check cannot miss a
// call that Check let through.
func (c *Store) Check(rules []string, symbol, name string, t time.Time) (Pause, func(), bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.holdLocked(rules, symbol, t); ok {
		return p, nil, true
	}
	if c.sending == nil {
		c.sending = make(map[uint64]sendingCall)
	}
	c.ticket++
	id := c.ticket
	c.sending[id] = sendingCall{rules: slices.Clone(rules), symbol: symbol, name: name}
	var once sync.Once
	return Pause{}, func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			delete(c.sending, id)
			if c.ended != nil {
				close(c.ended)
				c.ended = nil
			}
		})
	}, false
}

// Settle waits until no call that p holds is on its way (between Check
// and its release), or until ctx ends; it returns the names of those still
// on their way then (none when it did not have to give up).
func (c *Store) Settle(ctx context.Context, p Pause) []string {
	for {
		c.mu.Lock()
		var left []string
		for _, s := range c.sending {
			if p.Holds(s.rules, s.symbol) {
				left = append(left, s.name)
			}
		}
		if len(left) == 0 {
			c.mu.Unlock()
			return nil
		}
		if c.ended == nil {
			c.ended = make(chan struct{})
		}
		ended := c.ended
		c.mu.Unlock()
		select {
		case <-ended:
		case <-ctx.Done():
			slices.Sort(left)
			return left
		}
	}
}

// FirstSaid reports whether the action of symbol held back by pause is
// said for the first time in that pause, and marks it said.
func (c *Store) FirstSaid(pause, symbol, action string) bool {
	key := pause + "\x00" + symbol + "\x00" + action
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.said == nil {
		c.said = make(map[string]bool)
	}
	first := !c.said[key]
	c.said[key] = true
	return first
}

// forgetSaid drops what was said of the pauses no longer in force, so the
// record of the notified paused actions stays as small as the pauses.
// Call with mu held.
func (c *Store) forgetSaid() {
	for key := range c.said {
		id, _, _ := strings.Cut(key, "\x00")
		if !slices.ContainsFunc(c.pauses, func(p Pause) bool { return p.ID == id }) {
			delete(c.said, key)
		}
	}
}

// Restore takes the silences and pauses of a state file that have not
// ended at now. Their times after now (a host clock that ran ahead when
// they were made) are clamped to now, as the rule states' are, so that a
// pause listed as in force holds and a silence listed mutes; it returns
// how many times it clamped.
func (c *Store) Restore(silences []Silence, pauses []Pause, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	clamped := 0
	clamp := func(t *time.Time) {
		if t.After(now) {
			*t = now
			clamped++
		}
	}
	for _, x := range silences {
		if !x.Ended(now) {
			clamp(&x.StartsAt)
			clamp(&x.CreatedAt)
			c.silences = append(c.silences, x)
		}
	}
	for _, p := range pauses {
		if !p.Ended(now) {
			clamp(&p.StartsAt)
			p.InFlight = nil
			c.pauses = append(c.pauses, p)
		}
	}
	if clamped > 0 {
		c.changed = true
	}
	return clamped
}

// Replace puts the silences and pauses of another process's state (a
// leader's, at takeover) in place of this store's, as Restore takes them.
func (c *Store) Replace(silences []Silence, pauses []Pause, now time.Time) int {
	c.mu.Lock()
	c.silences, c.pauses = nil, nil
	c.changed = true
	c.mu.Unlock()
	return c.Restore(silences, pauses, now)
}

// Snapshot copies the silences and pauses for the state file and marks
// them saved.
func (c *Store) Snapshot() ([]Silence, []Pause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changed = false
	return slices.Clone(c.silences), slices.Clone(c.pauses)
}

// Changed reports whether silences or pauses changed since the last
// Snapshot.
func (c *Store) Changed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}
