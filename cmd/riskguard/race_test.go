package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/shopspring/decimal"
)

// The daemon's control API, its reloads (SIGHUP: audit log reopened, config
// applied) and its ticks run at once while the audit log keeps failing and
// working again (its directory is moved away and back): each of them writes
// audit records and so flips the engine's audit failure state. Under -race
// nothing may be reported; the daemon exits 0, and every control call's
// record is in the audit log once the directory is back.
//
// On 416ba0c `go test -race` fails: (*Engine).audited reads and writes
// e.auditFailing without a lock, from the tick, from the control handlers
// (AddSilence, ExpireSilence, Pause, Resume) and from the reload's
// ReopenAudit ("WARNING: DATA RACE"). The engine-level version is
// engine.TestConcurrentControlReloadAndTicks.
func TestRunConcurrentControlReloadAndTicks(t *testing.T) {
	t.Parallel()
	const (
		rounds   = 60               // control rounds: a silence, a pause and their ends each
		minTicks = 15               // the rounds go on until the daemon has ticked this often…
		maxFor   = 30 * time.Second // …but never longer than this (a loaded machine ticks late)
		by       = "race-ctl"
	)
	const ethNear = `
  - name: eth-near
    when: liquidationDistance < 0.05
    symbols: [XETH]
    cooldown: 100ms
    actions:
      - action: cancel_orders
`
	g := newControlEnv(t, ethNear+overMaxRule, "")
	auditDir := filepath.Join(g.dir, "audit")
	if err := os.Mkdir(auditDir, 0o700); err != nil {
		t.Fatal(err)
	}
	auditLog := filepath.Join(auditDir, "audit.jsonl")
	env := campaignEnv(g.url)
	env["RISKGUARD_ENGINE_AUDIT_LOG"] = auditLog
	d := g.start(env)

	var addr string
	waitFor(t, "the listen address", 10*time.Second, func() bool {
		for line := range strings.SplitSeq(d.logs.String(), "\n") {
			var l struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "serving /metrics and /healthz" {
				addr = l.Addr
				return true
			}
		}
		return false
	})
	waitHealthy(t, addr)

	// XETH alternates between 3% and 5.4% from its liquidation price:
	// eth-near fires and resolves, so the ticks write records too.
	xeth := g.position("XETH")
	near := xeth.LiquidationPrice.Div(decimal.NewFromFloat(1.03)).Round(2)
	far, _ := g.ex.IndexPrice("ETH")
	config, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(threshold string) { // atomic: the reload never reads half a file
		t.Helper()
		body := strings.Replace(string(config), "liquidationDistance < 0.05", "liquidationDistance < "+threshold, 1)
		tmp := g.config + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, g.config); err != nil {
			t.Fatal(err)
		}
	}
	away := auditDir + ".away"
	move := func(from, to string) {
		t.Helper()
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	ticks := func() int { return positionReads(g.ex.Calls()) }
	start := ticks()

	var added, expired, paused, resumed int
	round := 0
	deadline := time.Now().Add(maxFor)
	for ; round < rounds || (ticks()-start < minTicks && time.Now().Before(deadline)); round++ {
		if round%2 == 0 {
			g.ex.SetIndexPrice("ETH", near)
		} else {
			g.ex.SetIndexPrice("ETH", far)
		}
		rewrite([]string{"0.05", "0.06"}[round%2])
		select {
		case d.reload <- syscall.SIGHUP:
		default: // a reload is still waiting: the next round sends another
		}
		move(auditDir, away) // the audit log fails…
		code, body := api(t, addr, "POST", "/api/v1/silences", testToken, map[string]string{"rule": "eth-near", "duration": "1h", "createdBy": by})
		if code != http.StatusCreated {
			t.Fatalf("add silence: %d %s", code, body)
		}
		added++
		var s control.Silence
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			t.Fatalf("silence answer %q: %v", body, err)
		}
		if code, body := api(t, addr, "POST", "/api/v1/pause", testToken, map[string]string{"rule": "over-max-leverage", "createdBy": by}); code != http.StatusCreated {
			t.Fatalf("pause: %d %s", code, body)
		}
		paused++
		move(away, auditDir) // …and works again
		if code, body := api(t, addr, "DELETE", "/api/v1/silences/"+s.ID+"?createdBy="+by, testToken, nil); code != http.StatusOK {
			t.Fatalf("expire silence: %d %s", code, body)
		}
		expired++
		if code, body := api(t, addr, "POST", "/api/v1/resume", testToken, map[string]string{"rule": "over-max-leverage", "createdBy": by}); code != http.StatusOK {
			t.Fatalf("resume: %d %s", code, body)
		}
		resumed++
		if code, body := api(t, addr, "GET", "/api/v1/status", "", nil); code != http.StatusOK {
			t.Fatalf("status: %d %s", code, body)
		}
	}
	if n := ticks() - start; n < minTicks {
		t.Fatalf("%d ticks in %d rounds, want at least %d ticks alongside the control calls", n, round, minTicks)
	}
	d.running(t)
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}

	// Every control call's record reached the audit log once (those made
	// while it failed were kept and written later).
	count := map[string]int{}
	data, err := os.ReadFile(auditLog)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
		var r journal.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q is not one record: %v", line, err)
		}
		count[r.Type]++
		if r.By == by {
			count[r.Type+" "+r.To]++
		}
	}
	for key, want := range map[string]int{"silence added": added, "silence expired": expired, "pause paused": paused, "pause resumed": resumed} {
		if got := count[key]; got != want {
			t.Errorf("%d %q records by %s in the audit log, want %d (one per call)", got, key, by, want)
		}
	}
	for _, typ := range []string{"transition", "reload"} {
		if count[typ] == 0 {
			t.Errorf("no %q record in the audit log", typ)
		}
	}
	logs := d.logs.String()
	for _, want := range []string{"audit write failed", "audit log writes again", "config reloaded"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q", want)
		}
	}
	if t.Failed() {
		t.Logf("record counts: %v", count)
	}
}
