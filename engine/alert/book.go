package alert

import (
	"cmp"
	"iter"
	"slices"
	"time"

	"github.com/riskguard/riskguard/engine/market"
)

// Entry is the state of every rule on one position (or the account),
// aligned with the rule set in force, and X, what the book's owner keeps
// beside it.
type Entry[X any] struct {
	// Key is the entry's key in its book; Dropped is set when the book
	// forgets it, so a pointer kept elsewhere can tell.
	Key     market.Key
	Dropped bool
	Symbol  string
	Rules   []RuleState
	// Seen is the last tick that listed the position; MissingSince when
	// it went missing from the answers.
	Seen, MissingSince time.Time
	X                  X
}

// Book is the rule states by position. It is owned by the tick.
type Book[X any] struct {
	m map[market.Key]*Entry[X]
	// alerts is Alerts' list in the making, whose copy it returns: the
	// list is made once at its length, where appends grew it in steps.
	alerts []Alert
}

// NewBook returns an empty book.
func NewBook[X any]() *Book[X] { return &Book[X]{m: make(map[market.Key]*Entry[X])} }

// Get returns the entry of k, nil when there is none.
func (b *Book[X]) Get(k market.Key) *Entry[X] { return b.m[k] }

// Len is the number of entries.
func (b *Book[X]) Len() int { return len(b.m) }

// All yields every entry, in no order.
func (b *Book[X]) All() iter.Seq2[market.Key, *Entry[X]] {
	return func(yield func(market.Key, *Entry[X]) bool) {
		for k, e := range b.m {
			if !yield(k, e) {
				return
			}
		}
	}
}

// Ensure returns the entry of k with n rule states, creating it. State
// saved under the position id alone (before positions were told apart by
// direction) is adopted as k's.
func (b *Book[X]) Ensure(k market.Key, symbol string, n int) *Entry[X] {
	e, ok := b.m[k]
	if !ok {
		legacy := market.Key{ID: k.ID}
		if old, had := b.m[legacy]; had && k != legacy {
			delete(b.m, legacy)
			old.Key = k
			b.m[k], e, ok = old, old, true
		}
	}
	if !ok {
		e = &Entry[X]{Key: k}
		b.m[k] = e
	}
	if len(e.Rules) != n {
		rs := make([]RuleState, n)
		copy(rs, e.Rules)
		e.Rules = rs
	}
	e.Symbol = symbol
	return e
}

// Forget drops the entry of k.
func (b *Book[X]) Forget(k market.Key) {
	if e := b.m[k]; e != nil {
		e.Dropped = true
		delete(b.m, k)
	}
}

// Remap aligns every entry's rule states with a new rule set: the new
// set's i-th rule takes the state of the old set's mapping[i]-th (-1: a
// new rule, which starts inactive).
func (b *Book[X]) Remap(mapping []int) {
	for _, e := range b.m {
		next := make([]RuleState, len(mapping))
		for i, j := range mapping {
			if j >= 0 && j < len(e.Rules) {
				next[i] = e.Rules[j]
			}
		}
		e.Rules = next
	}
}

// Alert is a rule in a given state on a symbol.
type Alert struct {
	Symbol, Rule string
	State        State
	// Since is when it became pending or fired; zero otherwise.
	Since time.Time
	// LastActionAt is when its actions last ran (its cooldown counts
	// from it); zero when they never did.
	LastActionAt time.Time
}

// Alerts lists the rules whose state keep says to (names are the rule
// set's, by index), sorted by symbol and rule, in a list of its own.
func (b *Book[X]) Alerts(names []string, keep func(State) bool) []Alert {
	out := b.AlertsView(names, keep)
	if len(out) == 0 {
		return nil // as ever: no list
	}
	return slices.Clone(out)
}

// AlertsView is Alerts in the book's own list, which its next call writes
// again: for a caller that copies what it keeps (an empty list for none).
func (b *Book[X]) AlertsView(names []string, keep func(State) bool) []Alert {
	out := b.alerts[:0]
	for _, e := range b.m {
		for ri := range e.Rules {
			s := &e.Rules[ri] // not a copy: a state is some 230 bytes
			if ri >= len(names) || !keep(s.State) {
				continue
			}
			a := Alert{Symbol: e.Symbol, Rule: names[ri], State: s.State, LastActionAt: s.LastActionAt}
			switch s.State {
			case Pending:
				a.Since = s.ActiveAt
			case Firing:
				a.Since = s.FiredAt
			}
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Alert) int {
		return cmp.Or(cmp.Compare(a.Symbol, b.Symbol), cmp.Compare(a.Rule, b.Rule))
	})
	b.alerts = out
	return out
}

// Counts counts the states of each rule (names by index) over the book.
func (b *Book[X]) Counts(names []string) map[string]*[4]int {
	c := make(map[string]*[4]int, len(names))
	for _, n := range names {
		c[n] = new([4]int)
	}
	for _, e := range b.m {
		for ri := range e.Rules {
			if s := &e.Rules[ri]; ri < len(names) && int(s.State) < 4 {
				c[names[ri]][s.State]++
			}
		}
	}
	return c
}
