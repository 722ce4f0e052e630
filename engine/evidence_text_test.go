package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// The evidence of a liquidation says in words what it holds: the month
// read and how many closed orders the exchange listed, not "202611 (0,
// raw)" (issue 40, item 9). Against the simulated exchange over HTTP.
func TestLiquidationEvidenceReads(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("watch.yaml", []byte(`rules:
  - name: near-edge
    when: liquidationDistance < 0.05
    severity: critical
    actions: [{action: notify}]
`))
	if err != nil {
		t.Fatal(err)
	}
	var audit bytes.Buffer
	e, ex := simEngineDeps(t, set, engine.Deps{Audit: journal.NewAudit(&audit)})
	ctx := context.Background()
	now := time.Now()
	ex.SetIndexPrice("SOL", decimal.RequireFromString("146"))
	if _, err := e.Tick(ctx, now); err != nil {
		t.Fatal(err)
	}
	ex.SetIndexPrice("SOL", decimal.RequireFromString("144.5")) // through 144.907: the exchange liquidates XSOL
	if _, err := e.Tick(ctx, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil { // waits for the evidence
		t.Fatal(err)
	}
	month := now.Add(2 * time.Second).UTC().Format("January 2006")
	var reason string
	for _, line := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var r journal.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Type == "liquidated" && r.Phase == "evidence" {
			reason = r.Reason
		}
	}
	if !strings.Contains(reason, " "+month+" ") || !strings.HasSuffix(reason, "as evidence of the liquidation of XSOL") ||
		strings.Contains(reason, "raw") || strings.Contains(reason, now.UTC().Format("200601")) {
		t.Errorf("evidence reason %q, want the month (%s) and the count in words", reason, month)
	}
}
