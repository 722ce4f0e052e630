package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// A process killed after its order filled and before the outcome was
// recorded (the audit log ends at "sent", the state file was never
// written): the restarted process takes the order as sent, starts its
// rules' cooldown from it and sends no second order inside it (issue 30,
// item 1: two fills every time, killed 5, 17 or 32 ms after the fill).
func TestRestartAfterAnUnrecordedFillSendsNoSecondOrder(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("halve.yaml", []byte(`rules:
  - name: halve
    when: position.leverage > 1
    symbols: [XSOL]
    cooldown: 10m
    actions: [{action: reduce_position, fraction: 0.5}]
`))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	// The killed run's order filled on the exchange...
	if _, err := ex.Local().PlaceOrder(context.Background(), "XSOL", exchange.ReduceOnlyIOC(exchange.Sell, decimal.NewFromInt(200))); err != nil {
		t.Fatal(err)
	}
	// ... and its audit log ends at "sent".
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.jsonl")
	sentAt := time.Now().Add(-3 * time.Second).UTC()
	qty := decimal.NewFromInt(200)
	var lines []byte
	for _, phase := range []string{"intended", "sent"} {
		b, _ := json.Marshal(journal.Record{Time: sentAt, Type: "action", Action: "reduce_position", Symbol: "XSOL", Position: "1_103",
			Phase: phase, Rules: []string{"halve"}, Quantity: &qty})
		lines = append(append(lines, b...), '\n')
	}
	if err := os.WriteFile(auditPath, lines, 0o600); err != nil {
		t.Fatal(err)
	}
	client := overHTTP(t, ex)
	e, err := engine.New(engine.Config{AuditLog: auditPath, StateFile: filepath.Join(dir, "state.json")}, set, engine.Deps{Reader: client, Actuator: client})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 3 {
		if _, err := e.Tick(context.Background(), now.Add(time.Duration(i)*2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range ex.Calls() {
		if c.Method == http.MethodPost && strings.HasSuffix(c.Path, "/create") {
			t.Fatalf("the restarted process sent a second order inside the cooldown: %+v", c)
		}
	}
	audit, _ := os.ReadFile(auditPath)
	for _, want := range []string{`"phase":"interrupted"`, "it is taken as sent (never sent again as such), its rules' cooldowns count from it", "left without a recorded outcome: taken as sent; the account now shows LONG 200 of XSOL"} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("audit lacks %q:\n%s", want, audit)
		}
	}
}
