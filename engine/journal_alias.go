package engine

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/engine/journal"
)

// The audit log, the metrics and the reports live in engine/journal; these
// names keep the engine's API as it was.
type (
	// Record is one line of the audit log.
	Record = journal.Record
	// Audit is the audit log.
	Audit = journal.Audit
	// Prediction is a settings call's predicted effect in the audit log.
	Prediction = journal.Prediction
	// Metrics are the guard's Prometheus collectors.
	Metrics = journal.Metrics
	// TransitionEvent is one rule changing state on one position.
	TransitionEvent = journal.TransitionEvent
	// ActionEvent is one action decided by a tick.
	ActionEvent = journal.ActionEvent
	// RecentAction is one of the last actions, for Status.
	RecentAction = journal.RecentAction
)

// Bounds of engine/journal.
const (
	MaxAuditBacklog   = journal.MaxAuditBacklog
	RecentActionsKept = journal.RecentActionsKept
)

// OpenAudit opens (creating, mode 0600) the audit file at path for
// appending.
func OpenAudit(path string) (*Audit, error) { return journal.OpenAudit(path) }

// NewAudit writes records to w, with no sync; for tests and dry runs.
func NewAudit(w io.Writer) *Audit { return journal.NewAudit(w) }

// NewMetrics creates the collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) { return journal.NewMetrics(reg) }
