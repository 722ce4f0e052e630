package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shopspring/decimal"
)

// Record is one line of the audit log: a state transition, an action phase,
// a breaker change or a tick failure. Every line carries the tick time.
type Record struct {
	Time time.Time `json:"time"`
	// Type is transition, action, breaker, exchange (unreachable or
	// reachable again), model (the exchange disagreed with a prediction),
	// tick, reload, silence or pause (with By, the author).
	Type string `json:"type"`
	// Account names the guarded account when the configuration lists
	// several (accounts:); absent with one, so such logs stay as they were.
	Account  string `json:"account,omitempty"`
	Rule     string `json:"rule,omitempty"`
	Symbol   string `json:"symbol,omitempty"`
	Position string `json:"position,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Action   string `json:"action,omitempty"`
	// Phase of an action: intended, dry_run, paused, standby (held on a
	// standby: another process leads the account), sent, result, error, skipped;
	// interrupted is written at start for a sent action with no outcome.
	Phase string `json:"phase,omitempty"`
	// Rules names every rule that asked for a merged action.
	Rules    []string `json:"rules,omitempty"`
	Cross    *bool    `json:"cross,omitempty"`
	Leverage int      `json:"leverage,omitempty"`
	// PrevLeverage and PrevCross are the position's values before the action.
	PrevLeverage int   `json:"prevLeverage,omitempty"`
	PrevCross    *bool `json:"prevCross,omitempty"`
	// Quantity is an order's quantity.
	Quantity *decimal.Decimal `json:"quantity,omitempty"`
	// ClientOrderID is an order's client order id, a function of its
	// intent (act.ClientOrderID): sent with the order when
	// exchange.client_order_id_field names the exchange's field.
	ClientOrderID string `json:"clientOrderId,omitempty"`
	Reason        string `json:"reason,omitempty"`
	// By is who made a silence, pause or acknowledgement (the control
	// API's author).
	By string `json:"by,omitempty"`
	// Prediction is a settings call's predicted effect, from the margin
	// model.
	Prediction *Prediction     `json:"prediction,omitempty"`
	Error      string          `json:"error,omitempty"`
	Response   json.RawMessage `json:"response,omitempty"`
	// Host and Term say which process wrote the record and under which
	// leadership term (ha:); both empty without ha, and Term on a standby.
	Host string `json:"host,omitempty"`
	Term int64  `json:"term,omitempty"`
}

// Prediction is a settings call's predicted effect in the audit log.
type Prediction struct {
	LiquidationBefore decimal.Decimal `json:"liquidationBefore"`
	LiquidationAfter  decimal.Decimal `json:"liquidationAfter"`
	// Distances are fractions of the index.
	DistanceBefore decimal.Decimal `json:"distanceBefore"`
	DistanceAfter  decimal.Decimal `json:"distanceAfter"`
	MarginMoved    decimal.Decimal `json:"marginMoved"`
	// FreeAfter is absent when the free balance could not be inferred.
	FreeAfter *decimal.Decimal `json:"freeAfter,omitempty"`
	// Actual is the liquidation price the exchange read back, on the
	// result.
	Actual *decimal.Decimal `json:"actual,omitempty"`
	// An order's: the PNL realised, the quantity left, and the
	// quantity the exchange read back (on the result).
	RealisedPNL    *decimal.Decimal `json:"realisedPnl,omitempty"`
	QuantityAfter  *decimal.Decimal `json:"quantityAfter,omitempty"`
	ActualQuantity *decimal.Decimal `json:"actualQuantity,omitempty"`
	// SurvivalBefore and SurvivalAfter are the account measure's smallest
	// adverse move of every index together (a fraction), and Account the
	// whole measure before and after as the log says it; absent when it
	// cannot be measured.
	SurvivalBefore *decimal.Decimal `json:"survivalBefore,omitempty"`
	SurvivalAfter  *decimal.Decimal `json:"survivalAfter,omitempty"`
	Account        string           `json:"account,omitempty"`
	// ExpectedLossBefore and ExpectedLossAfter are the stress grid's
	// expected loss (margin.Stress, in the quote currency), and Stress the
	// grid after as the log says it; absent without a grid.
	ExpectedLossBefore *decimal.Decimal `json:"expectedLossBefore,omitempty"`
	ExpectedLossAfter  *decimal.Decimal `json:"expectedLossAfter,omitempty"`
	Stress             string           `json:"stress,omitempty"`
	// StressLossBefore and StressLossAfter are the loss at each move of
	// −5σ … −1σ, +1σ … +5σ (margin.StressShown), every index together,
	// before and after the call.
	StressLossBefore []decimal.Decimal `json:"stressLossBefore,omitempty"`
	StressLossAfter  []decimal.Decimal `json:"stressLossAfter,omitempty"`
	// Unverified says why the prediction decided nothing: the margin model
	// did not fit the exchange's figures.
	Unverified string `json:"unverified,omitempty"`
}

// Audit appends records as JSON lines and syncs each one to disk, so a crash
// loses nothing that was reported as done. A record that cannot be written
// (a full disk, a vanished directory) is kept in memory, up to
// MaxAuditBacklog of them, and written before the next one; a write torn by
// the failure is cut off, never glued to the next record. A file-backed
// Audit follows its path: a file deleted or renamed away (logrotate) is
// recreated at the next write, and Reopen reopens it at once (SIGHUP).
type Audit struct {
	mu   sync.Mutex
	path string // "" for an Audit writing to a plain io.Writer
	open func(path string) (auditFile, error)
	// account is stamped on every record written (journal.Options.Account).
	account string
	f       auditFile // nil until opened, or after a failed reopen
	w       io.Writer // the writer of NewAudit
	// backlog holds the records not written yet, oldest first; dropped
	// counts the ones that did not fit, said in a record once it drains.
	backlog []pendingRecord
	dropped int
	lostAt  time.Time // the time of the last record dropped
	// torn: a failed write left part of a line that could not be cut off;
	// the next write ends it first.
	torn bool
}

// pendingRecord is a record kept for a later write.
type pendingRecord struct {
	at   time.Time
	line []byte
}

// MaxAuditBacklog bounds the records an Audit keeps while its file cannot
// be written; past it the oldest are dropped and counted.
const MaxAuditBacklog = 10000

// auditFile is the part of *os.File an Audit uses.
type auditFile interface {
	io.Writer
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
}

// OpenAudit opens (creating, mode 0600) the audit file at path for appending.
func OpenAudit(path string) (*Audit, error) {
	return openAuditWith(path, openAuditFile)
}

func openAuditWith(path string, open func(string) (auditFile, error)) (*Audit, error) {
	a := &Audit{path: path, open: open}
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	a.f = f
	return a, nil
}

// openAuditFile opens path for appending and ends a line torn by a crash,
// so the next record starts a line of its own instead of being glued to it.
func openAuditFile(path string) (auditFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log: %w", err)
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				return nil, fmt.Errorf("open audit log: %w", err)
			}
		}
	}
	return f, nil
}

// NewAudit writes records to w, with no sync; for tests and dry runs that
// audit to a terminal.
func NewAudit(w io.Writer) *Audit {
	return &Audit{w: w}
}

// Write appends one record and syncs it, after the records kept from
// earlier failures. On error the record is kept (see Audit) and the error
// says how many wait.
func (a *Audit) Write(r Record) error {
	if a == nil {
		return nil
	}
	return a.write(&r, nil)
}

// write is Write of *r, completed by stamp (nil: none), leaving *r as it
// was: the one copy of the record it makes is the one it marshals.
func (a *Audit) write(r *Record, stamp func(*Record)) error {
	rec := *r
	if stamp != nil {
		stamp(&rec)
	}
	if a.account != "" {
		rec.Account = a.account
	}
	b, err := json.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	b = append(b, '\n')
	a.mu.Lock()
	defer a.mu.Unlock()
	a.backlog = append(a.backlog, pendingRecord{at: rec.Time, line: b})
	if over := len(a.backlog) - MaxAuditBacklog; over > 0 {
		a.lostAt = a.backlog[over-1].at
		a.backlog = slices.Delete(a.backlog, 0, over)
		a.dropped += over
	}
	return a.flushLocked()
}

// Flush writes the records kept from earlier failures; nil when there are
// none left.
func (a *Audit) Flush() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.flushLocked()
}

// Backlog is the number of records waiting to be written.
func (a *Audit) Backlog() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.backlog)
}

// Reopen closes the audit file and opens its path again, as logrotate
// expects of a daemon on SIGHUP, then writes what was kept.
func (a *Audit) Reopen() error {
	if a == nil || a.path == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f != nil {
		a.f.Close()
		a.f = nil
	}
	if _, err := a.writerLocked(); err != nil {
		return err
	}
	return a.flushLocked()
}

func (a *Audit) flushLocked() error {
	if len(a.backlog) == 0 && a.dropped == 0 {
		return nil
	}
	w, err := a.writerLocked()
	if err == nil {
		for a.dropped > 0 && err == nil {
			lost, _ := json.Marshal(Record{Time: a.lostAt, Type: "audit",
				Reason: fmt.Sprintf("%d audit records were lost: the log could not be written and the backlog of %d was full", a.dropped, MaxAuditBacklog)})
			if err = a.writeLine(w, append(lost, '\n')); err == nil {
				a.dropped = 0
			}
		}
		for len(a.backlog) > 0 && err == nil {
			if err = a.writeLine(w, a.backlog[0].line); err == nil {
				a.backlog[0] = pendingRecord{}
				a.backlog = a.backlog[1:]
			}
		}
		if err == nil && a.f != nil {
			if serr := a.f.Sync(); serr != nil {
				err = fmt.Errorf("audit sync: %w", serr)
			}
		}
	}
	if err != nil && len(a.backlog) > 0 {
		return fmt.Errorf("%w (%d records kept, written when the log accepts them)", err, len(a.backlog))
	}
	return err
}

// writerLocked is where records go: the plain writer, or the file at path,
// opened again when it was closed, deleted or replaced (rotated).
func (a *Audit) writerLocked() (io.Writer, error) {
	if a.path == "" {
		return a.w, nil
	}
	if a.f != nil {
		cur, err := a.f.Stat()
		at, perr := os.Stat(a.path)
		if err == nil && perr == nil && os.SameFile(cur, at) {
			return a.f, nil
		}
		a.f.Close() // gone or replaced: the records go to the path
		a.f = nil
	}
	f, err := a.open(a.path)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	a.f, a.torn = f, false
	return f, nil
}

// writeLine writes one line. A failed write to the file is cut back to the
// file's size before it, so no torn line is left to be glued to the next
// one; when that fails too, the next write starts a new line first.
func (a *Audit) writeLine(w io.Writer, line []byte) error {
	var size int64 = -1
	if a.f != nil {
		if fi, err := a.f.Stat(); err == nil {
			size = fi.Size()
		}
	}
	if a.torn {
		if _, err := w.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		a.torn = false
	}
	n, err := w.Write(line)
	if err == nil {
		return nil
	}
	if n > 0 {
		if a.f == nil || size < 0 || a.f.Truncate(size) != nil {
			a.torn = true
		}
	}
	return fmt.Errorf("audit: %w", err)
}

// Close writes what it can of the backlog and closes the file, if any.
func (a *Audit) Close() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ferr := a.flushLocked()
	if a.f == nil {
		return ferr
	}
	err := a.f.Close()
	a.f = nil
	return errors.Join(ferr, err)
}

// maxAuditScan bounds how much of the audit log's end is read at start to
// find actions a crash left without a result.
const maxAuditScan = 4 << 20

// Unfinished returns the action records of the audit log at path that were
// sent and have no outcome after them (result, error, skipped, dry_run or
// interrupted; an order whose answer was lost, a later settled record of
// its action and symbol): the process stopped with the call in flight, or
// before a read settled it. Only the last
// maxAuditScan bytes are read; a missing file has none.
func Unfinished(path string) ([]Record, error) {
	data, err := auditTail(path, maxAuditScan)
	if err != nil {
		return nil, err
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
		case "settled":
			// An order whose answer was lost, settled by a later read:
			// closed, whatever the tick that settled it.
			for k, i := range open {
				if k.action == r.Action && k.symbol == r.Symbol && k.t <= r.Time.UnixNano() {
					sent[i].Phase = ""
					delete(open, k)
				}
			}
		case "result", "error", "skipped", "dry_run", "interrupted":
			if r.Phase == "error" && strings.Contains(r.Error, "outcome unknown") {
				continue // an order whose answer was lost stays open until settled
			}
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

// auditTail returns the whole lines of the last n bytes of the audit log at
// path; nothing for a missing file.
func auditTail(path string, n int64) ([]byte, error) {
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
	start := max(fi.Size()-n, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, start, fi.Size()-start))
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	if start > 0 { // the first line is cut
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			data = data[i+1:]
		}
	}
	return data, nil
}

// maxRecentScan bounds how much of the audit log's end is read at start
// for the last actions: the status page's "Last actions" after a restart.
const maxRecentScan = 512 << 10

// RecentFromAudit returns the last actions of the audit log at path, as
// Recent shows them, oldest first, at most RecentActionsKept, each marked
// Restored: the status page's "Last actions" survive a restart. An action
// is its outcome record (dry_run, paused, skipped, error, or result:
// sent); the intended and sent phases before it are not shown twice. Only
// the last maxRecentScan bytes are read; a missing file has none.
func RecentFromAudit(path string) ([]RecentAction, error) {
	data, err := auditTail(path, maxRecentScan)
	if err != nil {
		return nil, err
	}
	var out []RecentAction
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		var r Record
		if len(line) == 0 || json.Unmarshal(line, &r) != nil || r.Type != "action" {
			continue
		}
		a := RecentAction{Time: r.Time, Symbol: r.Symbol, Action: r.Action, Rules: r.Rules, Outcome: r.Phase, Error: r.Error, Restored: true}
		switch r.Phase {
		case "result":
			a.Outcome = "sent"
		case "dry_run", "paused", "skipped", "error", "interrupted":
			a.Effect = r.Reason
		default:
			continue
		}
		if r.Action != "notify" && r.Leverage != 0 && r.PrevLeverage != 0 {
			a.From, a.To = r.PrevLeverage, r.Leverage
		}
		out = append(out, a)
	}
	return out[max(len(out)-RecentActionsKept, 0):], nil
}
