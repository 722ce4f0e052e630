package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"
)

// Record is one line of the audit log: a state transition, an action phase,
// a breaker change or a tick failure. Every line carries the tick time.
type Record struct {
	Time time.Time `json:"time"`
	// Type is transition, action, breaker, exchange (unreachable or
	// reachable again), model (the exchange disagreed with a prediction),
	// tick or reload.
	Type     string `json:"type"`
	Rule     string `json:"rule,omitempty"`
	Symbol   string `json:"symbol,omitempty"`
	Position string `json:"position,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Action   string `json:"action,omitempty"`
	// Phase of an action: intended, dry_run, sent, result, error, skipped;
	// interrupted is written at start for a sent action with no outcome.
	Phase string `json:"phase,omitempty"`
	// Rules names every rule that asked for a merged action.
	Rules    []string `json:"rules,omitempty"`
	Cross    *bool    `json:"cross,omitempty"`
	Leverage int      `json:"leverage,omitempty"`
	// PrevLeverage and PrevCross are the position's values before the action.
	PrevLeverage int    `json:"prevLeverage,omitempty"`
	PrevCross    *bool  `json:"prevCross,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Prediction is a settings call's predicted effect, from the margin
	// model.
	Prediction *Prediction     `json:"prediction,omitempty"`
	Error      string          `json:"error,omitempty"`
	Response   json.RawMessage `json:"response,omitempty"`
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
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	// A line torn by a crash is ended, so the next record starts a line
	// of its own instead of being glued to it.
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				return nil, fmt.Errorf("open audit log: %w", err)
			}
		}
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

// maxAuditScan bounds how much of the audit log's end is read at start to
// find actions a crash left without a result.
const maxAuditScan = 4 << 20

// unfinished returns the action records of the audit log at path that were
// sent and have no outcome after them (result, error, skipped, dry_run or
// interrupted): the process stopped with the call in flight. Only the last
// maxAuditScan bytes are read; a missing file has none.
func unfinished(path string) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	start := max(fi.Size()-maxAuditScan, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, start, fi.Size()-start))
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	if start > 0 { // the first line is cut
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	type key struct {
		t              int64
		action, symbol string
	}
	open := map[key]int{} // → index in sent
	var sent []Record
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		var r Record
		if len(line) == 0 || json.Unmarshal(line, &r) != nil || r.Type != "action" {
			continue // a torn last line is no record
		}
		k := key{r.Time.UnixNano(), r.Action, r.Symbol}
		switch r.Phase {
		case "sent":
			open[k] = len(sent)
			sent = append(sent, r)
		case "result", "error", "skipped", "dry_run", "interrupted":
			if i, ok := open[k]; ok {
				sent[i].Phase = ""
				delete(open, k)
			}
		}
	}
	var out []Record
	for _, r := range sent {
		if r.Phase == "sent" {
			out = append(out, r)
		}
	}
	return out, nil
}
