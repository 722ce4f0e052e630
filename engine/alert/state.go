// Package alert is the rules' state machine: a rule on one position goes
// inactive → pending → firing (and to no data when its inputs are
// missing), as Prometheus alerting rules do. Step is a pure function of the
// previous state, the condition, the time and the rule's timing; ActionDue
// says when a firing rule acts. Nothing here reads a clock or does I/O.
package alert

import (
	"fmt"
	"time"
)

// State is where a rule stands for one position, as Prometheus alerting rules
// go inactive → pending → firing, with a state of its own for invalid inputs.
type State uint8

// The states of a rule on one position.
const (
	Inactive State = iota
	Pending
	Firing
	// NoData means the rule's inputs were missing or invalid at the last
	// evaluation. It can alert but never triggers an action.
	NoData
)

var stateNames = [...]string{"inactive", "pending", "firing", "nodata"}

// String returns the lowercase name used in logs, audit lines and metrics.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", s)
}

// MarshalText encodes the state by name for the state file.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes a state name.
func (s *State) UnmarshalText(b []byte) error {
	for i, n := range stateNames {
		if n == string(b) {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("unknown rule state %q", b)
}

// Condition is the outcome of one evaluation of a rule's `when`.
type Condition uint8

// The outcomes of an evaluation.
const (
	False Condition = iota
	True
	// Invalid means the inputs were missing or invalid (no data).
	Invalid
)

// RuleState is the remembered state of one rule on one position. The zero
// value is an inactive rule that never acted.
type RuleState struct {
	State State `json:"state"`
	// ActiveAt is when the condition last became true after being false:
	// the start of pending.
	ActiveAt time.Time `json:"activeAt,omitzero"`
	// FiredAt is when the rule last entered firing.
	FiredAt time.Time `json:"firedAt,omitzero"`
	// LastTrueAt is the last evaluation whose condition held; keep_firing_for
	// counts from it.
	LastTrueAt time.Time `json:"lastTrueAt,omitzero"`
	// LastActionAt is when the rule's actions last ran on this position
	// (sent and confirmed, or logged in a dry run); the cooldown counts from it.
	LastActionAt time.Time `json:"lastActionAt,omitzero"`
	// MissingSince is when a pending rule's data went missing: the ticks
	// without data neither advance nor reset pending.
	MissingSince time.Time `json:"missingSince,omitzero"`
	// HarmNotedAt is when an action of the rule was last skipped as
	// harmful and notified: once per firing.
	HarmNotedAt time.Time `json:"harmNotedAt,omitzero"`
	// MarginMoved is the free balance the rule's leverage cuts moved into
	// the position's margin since BudgetFrom (the firing, or the UTC day),
	// against its margin_budget. A float: it only bounds, and keeps the
	// state comparable.
	MarginMoved float64   `json:"marginMoved,omitempty"`
	BudgetFrom  time.Time `json:"budgetFrom,omitzero"`
	// Skipped says the rule's last actions were all left out as
	// unfunded, bounded or harmful; SkippedMoney and SkippedFree are the
	// account's money then (act.Model's MoneySig). The rule decides
	// again, inside its cooldown, once the money differs.
	Skipped      bool    `json:"skipped,omitempty"`
	SkippedMoney uint64  `json:"skippedMoney,omitempty"`
	SkippedFree  float64 `json:"skippedFree,omitempty"`
}

// Timing is the part of a rule that drives its state machine.
type Timing struct {
	For           time.Duration
	KeepFiringFor time.Duration
	Cooldown      time.Duration
}

// Transition names the edge a step took; empty when the state did not change.
type Transition string

// The transitions reported to the audit log and notifications.
const (
	ToPending  Transition = "pending"
	ToFiring   Transition = "firing"
	ToResolved Transition = "resolved" // firing → inactive
	ToInactive Transition = "inactive" // pending or nodata → inactive
	ToNoData   Transition = "nodata"
)

// Step is the pure state machine: the next state of a rule given its previous
// state, this evaluation's condition, the time and the rule's timing.
func Step(prev RuleState, cond Condition, now time.Time, t Timing) (RuleState, Transition) {
	next := prev
	switch cond {
	case Invalid:
		// Unknown is neither true nor false: pending neither advances nor
		// resets, and firing neither resolves nor acts, while data is
		// missing — unless it stays missing longer than for (firing: for
		// or keep_firing_for, whichever is longer).
		hold := t.For
		if prev.State == Firing {
			hold = max(t.For, t.KeepFiringFor)
		}
		if (prev.State == Pending || prev.State == Firing) && hold > 0 {
			if next.MissingSince.IsZero() {
				next.MissingSince = now
			}
			if now.Sub(next.MissingSince) <= hold {
				return next, ""
			}
		}
		if prev.State == NoData {
			return next, ""
		}
		next.State = NoData
		next.ActiveAt, next.MissingSince = time.Time{}, time.Time{}
		return next, ToNoData
	case True:
		next.LastTrueAt = now
		if !next.MissingSince.IsZero() {
			// The time without data does not count towards for.
			if prev.State == Pending {
				next.ActiveAt = next.ActiveAt.Add(now.Sub(next.MissingSince))
			}
			next.MissingSince = time.Time{}
		}
		switch prev.State {
		case Inactive, NoData:
			next.ActiveAt = now
			if t.For <= 0 {
				next.State = Firing
				next.FiredAt = now
				return next, ToFiring
			}
			next.State = Pending
			return next, ToPending
		case Pending:
			if now.Sub(prev.ActiveAt) >= t.For {
				next.State = Firing
				next.FiredAt = now
				return next, ToFiring
			}
			return next, ""
		default: // Firing
			return next, ""
		}
	default: // False
		switch prev.State {
		case Firing:
			if t.KeepFiringFor > 0 && now.Sub(prev.LastTrueAt) < t.KeepFiringFor {
				return next, ""
			}
			next.State = Inactive
			next.ActiveAt = time.Time{}
			return next, ToResolved
		case Pending, NoData:
			next.State = Inactive
			next.ActiveAt, next.MissingSince = time.Time{}, time.Time{}
			return next, ToInactive
		default:
			return next, ""
		}
	}
}

// ActionDue reports whether a firing rule should run its actions now: on
// entering firing, and again only once the cooldown has passed since the
// last run. Actions need the condition to hold in this very evaluation: a
// rule kept firing by keep_firing_for alone does not act. A restart that
// restores LastActionAt keeps the cooldown.
func ActionDue(s RuleState, now time.Time, cooldown time.Duration) bool {
	if s.State != Firing || !s.LastTrueAt.Equal(now) {
		return false
	}
	if s.LastActionAt.IsZero() {
		return true
	}
	return now.Sub(s.LastActionAt) >= cooldown
}
