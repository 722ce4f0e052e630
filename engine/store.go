package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/dispatch"
	"github.com/riskguard/riskguard/engine/journal"
)

// stateFileVersion is bumped when the state file's shape changes.
const stateFileVersion = 1

// savedState is the state file: rule states and cooldowns per position, and
// the action budget, so a restart does not repeat an action inside its
// cooldown nor reset an open breaker.
type savedState struct {
	Version int                  `json:"version"`
	SavedAt time.Time            `json:"savedAt"`
	Rules   map[string]savedRule `json:"rules"`
	Breaker act.Breaker          `json:"breaker"`
	Symbols map[string]string    `json:"symbols,omitempty"` // position id → symbol, for a reader of the file
	// Silences and Pauses are the control API's, kept across restarts;
	// a file without them (an older version) has none.
	Silences []control.Silence `json:"silences,omitempty"`
	Pauses   []control.Pause   `json:"pauses,omitempty"`
	// Intents are the calls the last leader made durable before they left
	// and whose outcome it did not save (under ha only; never in the file).
	Intents []act.Intent `json:"-"`
}

// savedRule is one rule's states, keyed by position id. The fingerprint
// tells whether the rule changed while the daemon was down.
type savedRule struct {
	Fingerprint string                     `json:"fingerprint"`
	Positions   map[string]alert.RuleState `json:"positions"`
}

// stateFile is the state file as the engine keeps it (tick-owned): the
// lock that holds it against a second guard (nil without one, or in a dry
// run, which never writes it), and whether the state to save changed since
// the last save.
type stateFile struct {
	lock  *os.File
	dirty bool
}

// changed marks the state to be saved.
func (f *stateFile) changed() { f.dirty = true }

// saved says the state was written.
func (f *stateFile) saved() { f.dirty = false }

// release lets the lock go.
func (f *stateFile) release() {
	if f.lock != nil {
		f.lock.Close()
		f.lock = nil
	}
}

// restore loads the state file's s at now: the states of the rules whose
// fingerprint is unchanged into v, the silences and pauses into ctl and
// the breaker into b, which opens for at most reset. Times after now (a
// host clock that ran ahead) are clamped to now, and an open breaker to at most BreakerReset from now, so that a
// state file from the future cannot hold the guard back; it returns the
// events that say so.
func restore(s *savedState, now time.Time, reset time.Duration, v *evaluator, ctl *control.Store, b *act.Breaker) []event {
	var events []event
	clamped := 0
	clamp := func(t *time.Time) {
		if t.After(now) {
			*t = now
			clamped++
		}
	}
	savedUntil := s.Breaker.OpenUntil
	future, dropped := s.Breaker.Restore(now, reset)
	clamped += dropped
	if !future.IsZero() {
		text := fmt.Sprintf("the state file's circuit breaker opened at %s, after now (%s; saved at %s, open until %s): a clock that ran ahead wrote it, so it is not credible; restored closed, and the guard's actions are not held for another breaker_reset",
			future.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), s.SavedAt.UTC().Format(time.RFC3339), savedUntil.UTC().Format(time.RFC3339))
		events = append(events, event{Level: slog.LevelWarn, Msg: text, Audit: &journal.Record{Time: now, Type: "state", Reason: text}})
	} else if s.Breaker.OpenUntil.Before(savedUntil) {
		clamped++
	}
	*b = s.Breaker
	clamped += ctl.Restore(s.Silences, s.Pauses, now)
	v.restore(s, clamp)
	if clamped > 0 {
		text := fmt.Sprintf("the state file holds %d times after now (saved at %s, now %s): the host clock ran ahead; they were clamped to now (the breaker's calls after now dropped, an open breaker held at most breaker_reset)",
			clamped, s.SavedAt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		events = append(events, event{Level: slog.LevelWarn, Msg: text, Audit: &journal.Record{Time: now, Type: "state", Reason: text}})
	}
	if b.Open(now) {
		text := fmt.Sprintf("circuit breaker OPEN from the saved state: no actions until %s", b.OpenUntil.UTC().Format(time.RFC3339))
		events = append(events, dispatch.BreakerEvent(now, true, text))
	}
	return events
}

// loadState reads the state file; a missing file is an empty state.
func loadState(path string) (*savedState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &savedState{Version: stateFileVersion}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	var s savedState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, &CorruptStateError{Path: path, Err: err}
	}
	if s.Version != stateFileVersion {
		return nil, &CorruptStateError{Path: path, Err: fmt.Errorf("version %d, want %d", s.Version, stateFileVersion)}
	}
	return &s, nil
}

// CorruptStateError is a state file that cannot be read as one: New moves
// it aside and starts with empty state rather than not starting (under a
// supervisor that would be a restart loop and no protection at all).
type CorruptStateError struct {
	Path string
	Err  error
}

func (e *CorruptStateError) Error() string { return fmt.Sprintf("state file %s: %v", e.Path, e.Err) }

func (e *CorruptStateError) Unwrap() error { return e.Err }

// moveAside renames a corrupt state file to PATH.corrupt-TIME, keeping it
// for a post-mortem, and returns the new name.
func moveAside(path string, now time.Time) (string, error) {
	aside := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	if err := os.Rename(path, aside); err != nil {
		return "", fmt.Errorf("move the corrupt state file aside: %w", err)
	}
	return aside, nil
}

// saveState writes the state file atomically: a synced temporary file
// renamed over the old one, so a crash leaves either the old or the new.
func saveState(path string, s *savedState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".riskguard-state-*")
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save state: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	return nil
}

// StateLockedError is a state file another running guard holds: a second
// guard on it (and so on the same account) refuses to start.
type StateLockedError struct {
	Path string
	PID  string // the holder's process id, as it wrote it
}

func (e *StateLockedError) Error() string {
	holder := "another riskguard"
	if e.PID != "" {
		holder += " (pid " + e.PID + ")"
	}
	return fmt.Sprintf("%s holds the state file %s: two guards on one account would both act; stop it, or give this one its own engine.state_file", holder, e.Path)
}
