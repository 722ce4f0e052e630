package engine

import "github.com/riskguard/riskguard/engine/alert"

// The rules' state machine lives in engine/alert; these names keep the
// engine's API as it was.
type (
	// State is where a rule stands on one position.
	State = alert.State
	// Condition is the outcome of one evaluation.
	Condition = alert.Condition
	// RuleState is the remembered state of one rule on one position.
	RuleState = alert.RuleState
	// Timing drives a rule's state machine.
	Timing = alert.Timing
	// Transition names the edge a step took.
	Transition = alert.Transition
)

// The states, conditions and transitions of engine/alert.
const (
	Inactive = alert.Inactive
	Pending  = alert.Pending
	Firing   = alert.Firing
	NoData   = alert.NoData

	False   = alert.False
	True    = alert.True
	Invalid = alert.Invalid

	ToPending  = alert.ToPending
	ToFiring   = alert.ToFiring
	ToResolved = alert.ToResolved
	ToInactive = alert.ToInactive
	ToNoData   = alert.ToNoData
)
