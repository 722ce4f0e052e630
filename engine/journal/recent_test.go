package journal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The last actions are read back from the audit log's tail: one per
// outcome (not the intended and sent phases before it), oldest first, at
// most RecentActionsKept, marked restored; a torn last line and other
// records are skipped; a missing log has none; only the tail is read, so
// a long log costs no more than a short one.
func TestRecentFromAudit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if got, err := RecentFromAudit(filepath.Join(dir, "none.jsonl")); err != nil || len(got) != 0 {
		t.Errorf("missing log: %v, %v", got, err)
	}
	path := filepath.Join(dir, "audit.jsonl")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// A long history first: 20,000 transitions and actions, far more than
	// the tail that is read (written at once: Audit syncs every record).
	var old bytes.Buffer
	enc := json.NewEncoder(&old)
	for i := range 20000 {
		at := t0.Add(time.Duration(i) * time.Second)
		enc.Encode(Record{Time: at, Type: "transition", Rule: "r", Symbol: "XOLD", From: "inactive", To: "firing"})
		enc.Encode(Record{Time: at, Type: "action", Action: "cancel_orders", Symbol: "XOLD", Phase: "result"})
	}
	if err := os.WriteFile(path, old.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	end := t0.Add(20000 * time.Second)
	for i, r := range []Record{
		{Type: "action", Action: "lower_leverage", Symbol: "XSOL", Rules: []string{"over-max-leverage"}, Leverage: 10, PrevLeverage: 15, Phase: "intended"},
		{Type: "action", Action: "lower_leverage", Symbol: "XSOL", Rules: []string{"over-max-leverage"}, Leverage: 10, PrevLeverage: 15, Phase: "sent"},
		{Type: "action", Action: "lower_leverage", Symbol: "XSOL", Rules: []string{"over-max-leverage"}, Leverage: 10, PrevLeverage: 15, Phase: "result"},
		{Type: "action", Action: "cancel_orders", Symbol: "XETH", Phase: "error", Error: "status 500: INTERNAL_ERROR"},
		{Type: "action", Action: "notify", Symbol: "XETH", Rules: []string{"near"}, Phase: "result", Reason: "[critical] near on XETH"},
		{Type: "action", Action: "set_isolated", Symbol: "XBTC", Phase: "dry_run", Reason: "dry run: not sent"},
		{Type: "tick", Error: "snapshot incomplete"},
	} {
		r.Time = end.Add(time.Duration(i) * time.Second)
		if err := a.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"time":"2026-01-02T00:00:00Z","type":"action","action":"cancel_ord`) // torn by a crash
	f.Close()

	got, err := RecentFromAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != RecentActionsKept {
		t.Fatalf("%d actions, want %d", len(got), RecentActionsKept)
	}
	var lines []string
	for _, r := range got[len(got)-4:] {
		if !r.Restored {
			t.Errorf("%+v not marked restored", r)
		}
		lines = append(lines, fmt.Sprintf("%s %s %s %d→%d %q %q", r.Action, r.Symbol, r.Outcome, r.From, r.To, r.Error, r.Effect))
	}
	want := []string{
		`lower_leverage XSOL sent 15→10 "" ""`,
		`cancel_orders XETH error 0→0 "status 500: INTERNAL_ERROR" ""`,
		`notify XETH sent 0→0 "" ""`,
		`set_isolated XBTC dry_run 0→0 "" "dry run: not sent"`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("the last actions:\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if !got[0].Time.Before(got[1].Time) {
		t.Error("not oldest first")
	}

	j := New(Options{})
	j.Restore(got)
	if r := j.Recent(); len(r) != RecentActionsKept || r[0].Action != "set_isolated" {
		t.Errorf("Recent after Restore: %d, newest %+v", len(r), r[0])
	}
}

// The ring of recent actions owns its copies of their rules: an action
// written over its slot changes neither a list taken before nor the
// caller's rules, the newest RecentActionsKept are listed newest first,
// and nil rules stay nil (JSON null), empty ones empty.
func TestRecentActionsOwnTheirRules(t *testing.T) {
	t.Parallel()
	var r recentActions
	add := func(i int, rules []string) {
		r.add(RecentAction{Symbol: fmt.Sprint("X", i), Rules: rules})
	}
	for i := range RecentActionsKept {
		add(i, []string{fmt.Sprint("r", i), "shared"})
	}
	before := r.list()
	mine := []string{"m1", "m2", "m3"}
	for i := RecentActionsKept; i < 2*RecentActionsKept; i++ {
		add(i, mine)
		mine[0] = fmt.Sprint("changed", i) // the caller reuses its slice
	}
	for i, a := range before {
		n := RecentActionsKept - 1 - i
		if a.Symbol != fmt.Sprint("X", n) || len(a.Rules) != 2 || a.Rules[0] != fmt.Sprint("r", n) || a.Rules[1] != "shared" {
			t.Fatalf("an earlier list changed: %d: %+v", i, a)
		}
	}
	after := r.list()
	for i, a := range after {
		n := 2*RecentActionsKept - 1 - i
		want := fmt.Sprint("changed", n-1)
		if n == RecentActionsKept {
			want = "m1"
		}
		if a.Symbol != fmt.Sprint("X", n) || len(a.Rules) != 3 || a.Rules[0] != want || a.Rules[2] != "m3" {
			t.Fatalf("listed %d: %+v, want X%d with %s", i, a, n, want)
		}
	}
	after[0].Rules[1] = "edited"
	if got := r.list()[0].Rules[1]; got != "m2" {
		t.Errorf("a list shares the ring's rules: %q", got)
	}
	add(0, nil)
	add(1, []string{})
	l := r.list()
	if l[1].Rules != nil || l[0].Rules == nil || len(l[0].Rules) != 0 {
		t.Errorf("nil rules listed as %#v, empty ones as %#v", l[1].Rules, l[0].Rules)
	}
}
