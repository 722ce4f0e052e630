package engine_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

func readAudit(t *testing.T, path string) []journal.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []journal.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r journal.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			if strings.HasPrefix(sc.Text(), `{"time":"2026-03-01T12:00:01Z","type":"act`) && !strings.HasSuffix(sc.Text(), "}") {
				continue // the torn line, left on a line of its own
			}
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// A run killed with an action in flight leaves "sent" with no outcome in
// the audit log. The next start says so with an interrupted record (at the
// action's tick time, the start's time in the reason), once:
// a second start adds none, and completed actions get none.
func TestStartRecordsInterruptedActions(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tick := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	lines := []journal.Record{
		{Time: tick, Type: "action", Action: "cancel_orders", Symbol: "XBTC", Phase: "intended"},
		{Time: tick, Type: "action", Action: "cancel_orders", Symbol: "XBTC", Phase: "sent"},
		{Time: tick, Type: "action", Action: "cancel_orders", Symbol: "XBTC", Phase: "result"},
		{Time: tick, Type: "action", Action: "lower_leverage", Symbol: "XSOL", Phase: "intended", Rules: []string{"over-max"}, Leverage: 10},
		{Time: tick, Type: "action", Action: "lower_leverage", Symbol: "XSOL", Phase: "sent", Rules: []string{"over-max"}, Leverage: 10},
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	for _, r := range lines {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	f.WriteString(`{"time":"2026-03-01T12:00:01Z","type":"act`) // torn by the kill
	f.Close()

	client, err := exchange.New("http://127.0.0.1:1", "k", "s")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 12, 5, 0, 0, time.UTC)
	for range 2 {
		e, err := engine.New(engine.Config{AuditLog: path}, &rules.Set{}, engine.Deps{Reader: client, Actuator: client, Now: func() time.Time { return start }})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var got []journal.Record
	for _, r := range readAudit(t, path) {
		if r.Phase == "interrupted" {
			got = append(got, r)
		}
	}
	if len(got) != 1 {
		t.Fatalf("interrupted records = %+v, want one for XSOL", got)
	}
	r := got[0]
	if r.Symbol != "XSOL" || r.Action != "lower_leverage" || r.Leverage != 10 || !r.Time.Equal(tick) || len(r.Rules) != 1 {
		t.Errorf("interrupted record = %+v", r)
	}
	if !strings.Contains(r.Reason, "no result was recorded") || !strings.Contains(r.Reason, "2026-03-01T12:05:00Z") {
		t.Errorf("reason %q does not say what happened and when", r.Reason)
	}
}
