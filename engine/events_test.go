package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/rules"
)

// The exchange going unreachable and coming back is audited as well as
// notified: every output of the event gets it.
func TestReachabilityIsAudited(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{UnreachableAfter: 2e9})
	h.fx.mu.Lock()
	h.fx.posErr = errDown
	h.fx.mu.Unlock()
	for sec := 0; sec <= 2; sec++ {
		if _, err := h.e.Tick(context.Background(), at(sec)); err == nil {
			t.Fatalf("tick %d: no error while positions fail", sec)
		}
	}
	h.fx.mu.Lock()
	h.fx.posErr = nil
	h.fx.mu.Unlock()
	h.tick(3)
	var got []string
	for _, r := range h.auditRecords() {
		if r.Type == "exchange" {
			got = append(got, r.To+": "+r.Reason)
		}
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "unreachable: exchange unreachable for 2s") || got[1] != "reachable: exchange reachable again after 3s" {
		t.Errorf("exchange records: %q", got)
	}
	notes := strings.Join(h.notes.all(), "\n")
	if !strings.Contains(notes, "exchange: exchange unreachable for 2s") || !strings.Contains(notes, "exchange: exchange reachable again after 3s") {
		t.Errorf("notifications:\n%s", notes)
	}
}

// A rule that resolves because its position was closed is reported,
// audited, logged and notified like any other transition.
func TestPositionClosedTransitionEverywhere(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	fx := newFake()
	notes := new(recorder)
	audit := new(bytes.Buffer)
	r := rules.Rule{Name: "any-long", When: `position.side > 0`}
	e, err := New(Config{}, &rules.Set{Rules: []*rules.Rule{rule(t, r)}}, Deps{Reader: fx, Actuator: fx, Notifier: notes,
		Audit: journal.NewAudit(audit), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Tick(context.Background(), at(0)); err != nil {
		t.Fatal(err)
	}
	fx.mu.Lock()
	fx.positions[0].Empty, fx.positions[0].Quantity = true, dec("0") // XBTC, the long, is closed
	fx.mu.Unlock()
	rep, err := e.Tick(context.Background(), at(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Transitions) != 1 || rep.Transitions[0].Reason != "position closed" || rep.Transitions[0].To != alert.Inactive {
		t.Errorf("report: %+v", rep.Transitions)
	}
	if !strings.Contains(audit.String(), `"type":"transition","rule":"any-long","symbol":"XBTC","position":"1_1","from":"firing","to":"inactive","reason":"position closed"`) {
		t.Errorf("audit:\n%s", audit.String())
	}
	if !strings.Contains(logs.String(), `msg="rule resolved" rule=any-long symbol=XBTC state=inactive from=firing reason="position closed"`) {
		t.Errorf("log:\n%s", logs.String())
	}
	if !strings.Contains(strings.Join(notes.all(), "\n"), "resolved: any-long resolved on XBTC: position closed") {
		t.Errorf("notifications: %q", notes.all())
	}
}

// failingWriter fails while broken is set.
type failingWriter struct {
	mu     sync.Mutex
	broken bool
	bytes.Buffer
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return 0, errors.New("no space left on device")
	}
	return w.Buffer.Write(p)
}

func (w *failingWriter) set(broken bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.broken = broken
}

// An audit log that fails to write is said once, critically, while the
// guard keeps acting; its recovery is said once too.
func TestAuditFailureNotifiedOnce(t *testing.T) {
	t.Parallel()
	fx := newFake()
	notes := new(recorder)
	w := &failingWriter{broken: true}
	// σ 0.1%: the isolation costs nothing and goes out with the cut
	// (what is tested is the audit's failure, not the decision).
	e, err := New(Config{StressSigmaFloor: 0.001}, &rules.Set{Rules: []*rules.Rule{rule(t, overMax), rule(t, nearLiq)}}, Deps{Reader: fx, Actuator: fx, Notifier: notes, Audit: journal.NewAudit(w)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Tick(context.Background(), at(0)); err != nil {
		t.Fatal(err)
	}
	if got := fx.position("XBTC").Leverage; got != 20 {
		t.Errorf("XBTC leverage = %d: the guard must act without its audit trail", got)
	}
	w.set(false)
	if _, err := e.Tick(context.Background(), at(1)); err != nil {
		t.Fatal(err)
	}
	fx.setIndex("BTC", "97000") // XBTC near liquidation: more records
	if _, err := e.Tick(context.Background(), at(2)); err != nil {
		t.Fatal(err)
	}
	var failed, again int
	for _, n := range notes.all() {
		if strings.HasPrefix(n, "audit: the audit log cannot be written (audit: no space left on device") {
			failed++
		}
		if n == "audit: audit log writes again; the records kept meanwhile were written" {
			again++
		}
	}
	if failed != 1 || again != 1 {
		t.Errorf("audit notifications: %d failed, %d again, want 1 and 1:\n%s", failed, again, strings.Join(notes.all(), "\n"))
	}
	// The records of the first tick were kept and written at the second,
	// in order, before the third's.
	var phases []string
	for line := range strings.SplitSeq(strings.TrimSpace(w.String()), "\n") {
		var r journal.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if r.Type == "action" && r.Symbol == "XBTC" && r.Time.Equal(at(0)) {
			phases = append(phases, r.Action+" "+r.Phase)
		}
	}
	if want := []string{"cancel_orders intended", "cancel_orders sent", "cancel_orders result"}; len(phases) < 6 || !slices.Equal(phases[:3], want) {
		t.Errorf("first tick's action records = %q, want them all, starting %q", phases, want)
	}
}
