package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/rules"
)

// A corrupt state file does not keep the guard from starting: it is moved
// aside, the guard starts with empty state and says so, critically.
func TestCorruptStateFileMovedAside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"rules":{`), 0o600); err != nil {
		t.Fatal(err)
	}
	fx, notes, audit := newFake(), new(recorder), new(bytes.Buffer)
	e, err := New(Config{StateFile: path}, &rules.Set{Rules: []*rules.Rule{rule(t, overMax)}},
		Deps{Reader: fx, Actuator: fx, Notifier: notes, Audit: journal.NewAudit(audit), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatalf("New with a corrupt state file: %v", err)
	}
	aside := path + ".corrupt-20261121T120000Z"
	if b, err := os.ReadFile(aside); err != nil || string(b) != `{"version":1,"rules":{` {
		t.Errorf("the corrupt file was not kept at %s: %v", aside, err)
	}
	msgs := strings.Join(notes.all(), "\n")
	if !strings.Contains(msgs, "lifecycle: the state file could not be read (unexpected end of JSON input); moved to "+aside) {
		t.Errorf("notifications: %s", msgs)
	}
	if !strings.Contains(audit.String(), `"type":"state"`) {
		t.Errorf("audit: %s", audit.String())
	}
	if _, err := e.Tick(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(path); err != nil {
		t.Errorf("the new state file: %v", err)
	}
}

// A state file written by a clock a day ahead cannot hold the guard back:
// its times are clamped to now, and its breaker, which claims to have
// opened after now, is restored closed with the reason audited.
func TestStateFromTheFutureClamped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	day := t0.Add(24 * time.Hour)
	r := rule(t, overMax)
	s := &savedState{Version: stateFileVersion, SavedAt: day, Breaker: act.Breaker{OpenUntil: day, Sent: []time.Time{day}},
		Rules: map[string]savedRule{r.Name: {Fingerprint: r.Fingerprint(), Positions: map[string]alert.RuleState{
			"1_1": {State: alert.Firing, ActiveAt: day, FiredAt: day, LastTrueAt: day, LastActionAt: day}}}}}
	if err := saveState(path, s); err != nil {
		t.Fatal(err)
	}
	fx, notes, audit := newFake(), new(recorder), new(bytes.Buffer)
	e, err := New(Config{StateFile: path, BreakerReset: 5 * time.Minute}, &rules.Set{Rules: []*rules.Rule{r}},
		Deps{Reader: fx, Actuator: fx, Notifier: notes, Audit: journal.NewAudit(audit), Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if b := e.disp.Breaker(); b.Open(t0) || len(b.Sent) != 0 {
		t.Errorf("breaker %+v, want closed with no calls", b)
	}
	if got := e.eval.book.Get(market.Key{ID: "1_1"}).Rules[0].LastActionAt; !got.Equal(t0) {
		t.Errorf("last action at %s, want clamped to %s", got, t0)
	}
	if msgs := strings.Join(notes.all(), "\n"); strings.Contains(msgs, "circuit breaker OPEN") {
		t.Errorf("a breaker from the future notified as open: %s", msgs)
	}
	want := "the state file's circuit breaker opened at 2026-11-22T11:55:00Z, after now (2026-11-21T12:00:00Z"
	if !strings.Contains(audit.String(), want) {
		t.Errorf("audit does not say %q:\n%s", want, audit.String())
	}
	// After the cooldown the guard acts again.
	if _, err := e.Tick(context.Background(), t0.Add(6*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if settings, _ := fx.calls(); len(settings) != 1 {
		t.Errorf("settings calls after the cooldown = %v, want one", settings)
	}
}

// A breaker saved open in the past is kept; one that claims a reset longer
// than today's is held at most today's breaker_reset.
func TestStateOpenBreakerKept(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	opened := t0.Add(-time.Minute)
	s := &savedState{Version: stateFileVersion, SavedAt: opened, Breaker: act.Breaker{OpenedAt: opened, OpenUntil: opened.Add(time.Hour)}}
	if err := saveState(path, s); err != nil {
		t.Fatal(err)
	}
	fx, notes := newFake(), new(recorder)
	e, err := New(Config{StateFile: path, BreakerReset: 5 * time.Minute}, &rules.Set{Rules: []*rules.Rule{rule(t, overMax)}},
		Deps{Reader: fx, Actuator: fx, Notifier: notes, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.disp.Breaker().OpenUntil; !got.Equal(t0.Add(5 * time.Minute)) {
		t.Errorf("breaker open until %s, want %s", got, t0.Add(5*time.Minute))
	}
	if msgs := strings.Join(notes.all(), "\n"); !strings.Contains(msgs, "circuit breaker OPEN from the saved state: no actions until 2026-11-21T12:05:00Z") {
		t.Errorf("the open breaker is not notified: %s", msgs)
	}
}

// A second guard on one state file refuses to start, naming the holder;
// closing the first releases it. A dry run takes no lock.
func TestStateFileLocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.json")
	fx := newFake()
	set := &rules.Set{Rules: []*rules.Rule{rule(t, overMax)}}
	first, err := New(Config{StateFile: path}, set, Deps{Reader: fx, Actuator: fx})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{StateFile: path}, set, Deps{Reader: fx, Actuator: fx})
	var locked *StateLockedError
	if !errors.As(err, &locked) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d) holds the state file %s", os.Getpid(), path)) {
		t.Fatalf("second guard: %v", err)
	}
	if _, err := New(Config{StateFile: path, DryRun: true}, set, Deps{Reader: fx, Actuator: fx}); err != nil {
		t.Errorf("a dry run beside the guard: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second, err := New(Config{StateFile: path}, set, Deps{Reader: fx, Actuator: fx})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	second.Close()
}
