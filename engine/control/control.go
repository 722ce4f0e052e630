// Package control holds what an operator says to the guard: silences
// (mute notifications, in Alertmanager's model), acknowledgements (a
// silence that ends when its alert resolves) and pauses (hold actions
// back). Its Store has its own lock, held for a few assignments only: the
// notification path, the executor and the control API read it while a
// tick runs. It says nothing itself: the engine says what changed.
package control

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"time"

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

// Store holds the silences and pauses.
type Store struct {
	mu       sync.Mutex
	silences []Silence
	pauses   []Pause
	// changed: not saved in the state file yet.
	changed bool
	// said holds the paused actions already notified, by pause, symbol
	// and action: one notification per pause, every one audited.
	said map[string]bool
}

// NewID is a new silence or pause id.
func NewID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// AddSilence adds s as it is (checked by the caller).
func (c *Store) AddSilence(s Silence) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.silences = append(c.silences, s)
	c.changed = true
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

// AddPause adds p as it is (checked by the caller).
func (c *Store) AddPause(p Pause) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pauses = append(c.pauses, p)
	c.changed = true
}

// Resume ends the pauses of exactly rule and symbol, or every pause when
// both are empty, and returns those that were in force at now.
func (c *Store) Resume(rule, symbol string, now time.Time) []Pause {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ended []Pause
	c.pauses = slices.DeleteFunc(c.pauses, func(p Pause) bool {
		if p.Ended(now) || rule == "" && symbol == "" || p.Rule == rule && p.Symbol == symbol {
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

// Hold returns the pause in force at t that holds back an action of rules
// on symbol, if any.
func (c *Store) Hold(rules []string, symbol string, t time.Time) (Pause, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.pauses, func(p Pause) bool {
		return !p.Ended(t) && !t.Before(p.StartsAt) && p.Holds(rules, symbol)
	})
	if i < 0 {
		return Pause{}, false
	}
	return c.pauses[i], true
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
// ended at now.
func (c *Store) Restore(silences []Silence, pauses []Pause, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range silences {
		if !x.Ended(now) {
			c.silences = append(c.silences, x)
		}
	}
	for _, p := range pauses {
		if !p.Ended(now) {
			c.pauses = append(c.pauses, p)
		}
	}
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
