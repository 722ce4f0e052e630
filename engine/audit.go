package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Record is one line of the audit log: a state transition, an action phase,
// a breaker change or a tick failure. Every line carries the tick time.
type Record struct {
	Time time.Time `json:"time"`
	// Type is transition, action, breaker, tick or reload.
	Type     string `json:"type"`
	Rule     string `json:"rule,omitempty"`
	Symbol   string `json:"symbol,omitempty"`
	Position string `json:"position,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Action   string `json:"action,omitempty"`
	// Phase of an action: intended, dry_run, sent, result, error, skipped.
	Phase string `json:"phase,omitempty"`
	// Rules names every rule that asked for a merged action.
	Rules    []string `json:"rules,omitempty"`
	Cross    *bool    `json:"cross,omitempty"`
	Leverage int      `json:"leverage,omitempty"`
	// PrevLeverage and PrevCross are the position's values before the action.
	PrevLeverage int             `json:"prevLeverage,omitempty"`
	PrevCross    *bool           `json:"prevCross,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Error        string          `json:"error,omitempty"`
	Response     json.RawMessage `json:"response,omitempty"`
}

// Audit appends records as JSON lines and syncs each one to disk, so a crash
// loses nothing that was reported as done.
type Audit struct {
	mu   sync.Mutex
	w    io.Writer
	sync func() error
	c    io.Closer
}

// OpenAudit opens (creating, mode 0600) the audit file at path for appending.
func OpenAudit(path string) (*Audit, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	return &Audit{w: f, sync: f.Sync, c: f}, nil
}

// NewAudit writes records to w, with no sync; for tests and dry runs that
// audit to a terminal.
func NewAudit(w io.Writer) *Audit {
	return &Audit{w: w, sync: func() error { return nil }}
}

// Write appends one record and syncs it.
func (a *Audit) Write(r Record) error {
	if a == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.w.Write(b); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if err := a.sync(); err != nil {
		return fmt.Errorf("audit sync: %w", err)
	}
	return nil
}

// Close closes the underlying file, if any.
func (a *Audit) Close() error {
	if a == nil || a.c == nil {
		return nil
	}
	return a.c.Close()
}
