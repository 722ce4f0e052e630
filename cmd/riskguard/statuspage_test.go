package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// pageStatus is what these tests read of GET /api/v1/status.
type pageStatus struct {
	Account *struct {
		Equity, FreeBalance, MarginRatio *float64
	}
	Positions []struct {
		Symbol   string
		Distance *float64 `json:"liquidationDistance"`
	}
	Actions []struct {
		Symbol, Action, Outcome string
		Restored                bool
	}
}

func readStatus(t *testing.T, addr string) (pageStatus, bool) {
	t.Helper()
	var st pageStatus
	resp, err := http.Get("http://" + addr + "/api/v1/status")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&st) == nil
}

// The real daemon's status page after a restart: "Last actions" holds the
// action taken before it (read back from the audit log, marked), and the
// account line has the margin model's figures; Chromium renders both, the
// positions closest to liquidation first.
func TestStatusPageAfterRestart(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "  listen: 127.0.0.1:0\n", overMaxRule)
	addr, _, stop := g.serve()
	waitFor(t, "XSOL lowered", 20*time.Second, func() bool {
		st, ok := readStatus(t, addr)
		for _, a := range st.Actions {
			if ok && a.Symbol == "XSOL" && a.Action == "lower_leverage" && a.Outcome == "sent" && !a.Restored {
				return true
			}
		}
		return false
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	addr, logs, stop := g.serve()
	defer stop()
	var st pageStatus
	waitFor(t, "the first tick after the restart", 20*time.Second, func() bool {
		var ok bool
		st, ok = readStatus(t, addr)
		return ok && st.Account != nil && len(st.Positions) > 0
	})
	found := false
	for _, a := range st.Actions {
		if a.Symbol == "XSOL" && a.Action == "lower_leverage" && a.Outcome == "sent" {
			found = true
			if !a.Restored {
				t.Error("the action before the restart is not marked restored")
			}
		}
	}
	if !found {
		t.Errorf("the last actions after a restart lack lower_leverage XSOL: %+v\n%s", st.Actions, logs.String())
	}
	// XBTC is cross: the free balance is inferred from it, so every figure
	// of the account line is known (the rules read no account here: the
	// status alone asks for it).
	if a := st.Account; a.Equity == nil || a.FreeBalance == nil || a.MarginRatio == nil || *a.Equity <= 0 {
		t.Errorf("account line: %+v", *a)
	}

	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed: the page is not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", "http://"+addr+"/")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	dom := out.String()
	for _, want := range []string{"before the restart", `data-action="lower_leverage"`, `id="equity">`, "free balance:", "margin ratio:"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %s", want)
		}
	}
	// XSOL (about 7% from liquidation at 10x) above XETH and XBTC (49%).
	xsol, xbtc := strings.Index(dom, `<tr data-symbol="XSOL"`), strings.Index(dom, `<tr data-symbol="XBTC"`)
	if xsol < 0 || xbtc < 0 || xsol > xbtc {
		t.Errorf("XSOL at %d, XBTC at %d: not sorted by distance", xsol, xbtc)
	}
}
