package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The demo, README's first command, runs the example rules against the
// embedded simulated exchange: its first tick lowers XSOL's leverage, which
// is above the risk limit's maximum. The tick's table shows the position as
// read (15x) apart from the position after the action (10x); every line
// fits 100 columns; the demo's own directory is removed at exit.
//
// The interval is the demo's default, 1s: a tick says the outcome of its
// calls if they end within half its interval, and with 200ms (100ms for a
// signed HTTP call under -race) the first tick's table missed the action
// on a loaded CPU, said by a later tick instead.
func TestDemo(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), []string{"demo", "--config", "../../rules.example.yaml", "--duration", "1500ms",
		"--interval", "1s", "--log-format", "text"})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"── tick 1, t+0s",
		"as read by the tick:\nSYMBOL  SIDE   QTY  LEV  MODE      INDEX    LIQUIDATION  DISTANCE\n",
		"XSOL    LONG   400  15x  isolated  150.00   144.91       3.40%",
		"lower_leverage XSOL 15x→10x: sent [over-max-leverage]\n      liquidation 144.907 → 139.84 (3.40% → 6.77% away), +2026.67 margin, free balance 17973.33\n      after; XBTC liquidation 33101 → 35634.4 (49.08% → 45.18% away); account survives 3.40% → 5.38%\n      together (XSOL → XETH first, 5029.17 → 7971.91 lost), weakest alone XSOL 3.40% → XETH 5.38%;\n      stress: expected loss 84.30 → 31.84; after: expected loss 31.84 (σ XBTC 2.00%, XETH 2.00%,\n      XSOL 2.00%); within ±3σ: +5.40% (+2.7σ, every index together) liquidates XETH SHORT\n",
		"after the actions:\nSYMBOL  SIDE  QTY  LEV  MODE      INDEX   LIQUIDATION  DISTANCE  ORDERS\nXSOL    LONG  400  10x  isolated  150.00  139.84       6.77%     0\n",
		"lower_leverage (sent)",
		"── with and without the guard, on the same prices",
		"verdict: no liquidation either way",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	for i, l := range strings.Split(out, "\n") {
		if n := len([]rune(l)); n > 100 {
			t.Errorf("line %d is %d columns wide: %q", i+1, n, l)
		}
	}
	if !strings.Contains(stderr.String(), "lower_leverage XSOL 15→10") {
		t.Errorf("demo log lacks the action:\n%s", stderr.String())
	}
	m1 := regexp.MustCompile(`audit log: (\S+)`).FindStringSubmatch(out)
	if m1 == nil {
		t.Fatalf("no audit log path in:\n%s", out)
	}
	if _, err := os.Stat(filepath.Dir(m1[1])); !os.IsNotExist(err) {
		t.Errorf("the demo's temporary directory %s is still there (%v)", filepath.Dir(m1[1]), err)
	}

	// A directory given with --dir is the user's: it keeps the audit log.
	dir := t.TempDir()
	stdout.Reset()
	if err := m.Run(context.Background(), []string{"demo", "--config", "../../rules.example.yaml", "--duration", "300ms",
		"--interval", "100ms", "--dir", dir, "--log-format", "text"}); err != nil {
		t.Fatalf("demo --dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "audit.jsonl")); err != nil {
		t.Errorf("--dir lost the audit log: %v", err)
	}
}

// fastScenario is the default scenario's XSOL in seconds: the SOL index
// falls from 150 to 144.5 in 3 s, past the 15x position's liquidation price
// (144.907) but not the 10x one's (139.84).
const fastScenario = `currencies: [USDT, SOL]
contracts:
  - name: XSOL
    base: SOL
    quote: USDT
    baseScale: 1
    quoteScale: 3
    settlementFeeRate: "0.0006"
    riskLimit: {maxLeverage: 10, initialMarginRate: "0.1", maintenanceMarginRate: "0.02", maxQuantity: "20000"}
balance: "20000"
positions:
  - {symbol: XSOL, direction: LONG, quantity: "400", entryPrice: "152", leverage: 15}
openOrders: {XSOL: 5}
indexes:
  - name: SOL
    interval: 100ms
    points:
      - {at: 0s, price: "150"}
      - {at: 3s, price: "144.5"}
      - {at: 6s, price: "147"}
`

// The demo ends with the verdict of the same run with and without the
// guard: without it XSOL is liquidated, with it (its leverage lowered at
// the first tick) it is not. While it runs, the status page is served at
// the address it prints, and the control command it prints, token
// included, pauses the guard.
func TestDemoVerdictStatusPageAndControl(t *testing.T) {
	t.Parallel()
	scenario := filepath.Join(t.TempDir(), "fast.yaml")
	if err := os.WriteFile(scenario, []byte(fastScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	outR, outW := io.Pipe()
	var stderr lockedBuffer
	m := &Main{Stdout: outW, Stderr: &stderr, Getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		done <- m.Run(context.Background(), []string{"demo", "--config", "../../rules.example.yaml", "--scenario", scenario,
			"--duration", "5s", "--interval", "200ms", "--log-format", "text"})
		outW.Close()
	}()
	var out lockedBuffer
	control := make(chan [2]string, 1) // the export line and the command
	go func() {
		sc := bufio.NewScanner(outR)
		next := 0
		var lines [2]string
		for sc.Scan() {
			out.Write(append(sc.Bytes(), '\n'))
			if next > 0 {
				lines[2-next] = strings.TrimSpace(sc.Text())
				if next--; next == 0 {
					control <- lines
				}
			}
			if strings.HasPrefix(sc.Text(), "control, from another shell") {
				next = 2
			}
		}
	}()
	var lines [2]string
	select {
	case lines = <-control:
	case err := <-done:
		t.Fatalf("demo ended before printing its control command: %v\n%s\n%s", err, out.String(), stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("no control command printed:\n%s", out.String())
	}
	page := regexp.MustCompile(`status page: (http://127\.0\.0\.1:\d+/) \(while the demo runs\)`).FindStringSubmatch(out.String())
	if page == nil {
		t.Fatalf("no status page address printed:\n%s", out.String())
	}
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(page[1]); code != 200 || !strings.Contains(body, "<title>riskguard status</title>") {
		t.Errorf("GET %s: %d\n%.200s", page[1], code, body)
	}
	// The status API shows the position and the first tick's action; the
	// pause below comes after it, so that it holds nothing that matters.
	waitFor(t, "the status API to show XSOL lowered", 10*time.Second, func() bool {
		code, body := get(page[1] + "api/v1/status")
		var st struct {
			Positions []struct{ Symbol string }
			Actions   []struct{ Symbol, Action, Outcome string }
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil || len(st.Positions) == 0 || st.Positions[0].Symbol != "XSOL" {
			return false
		}
		for _, a := range st.Actions {
			if a.Symbol == "XSOL" && a.Action == "lower_leverage" && a.Outcome == "sent" {
				return true
			}
		}
		return false
	})

	// The printed commands, as a user pastes them: export
	// RISKGUARD_CONTROL_TOKEN=T, then riskguard pause --addr A.
	// (How the program is named is TestDemoPrintsACommandThatRuns's.)
	token, ok := strings.CutPrefix(lines[0], "export RISKGUARD_CONTROL_TOKEN=")
	f := strings.Fields(lines[1])
	at := slices.Index(f, "pause")
	if !ok || token == "" || at < 1 {
		t.Fatalf("control lines %q", lines)
	}
	f = append([]string{""}, f[at:]...)
	line := lines[1]
	code, _, cerr := runOut(t, context.Background(), envMap(map[string]string{"RISKGUARD_CONTROL_TOKEN": token}), append(f[1:], "--by", "test")...)
	if code != 0 {
		t.Errorf("%s: exit %d\n%s", line, code, cerr)
	}
	if _, body := get(page[1] + "api/v1/status"); !strings.Contains(body, `"createdBy": "test"`) {
		t.Errorf("the pause is not in the status:\n%s", body)
	}
	// A wrong token is refused.
	if code, _, _ := runOut(t, context.Background(), envMap(map[string]string{"RISKGUARD_CONTROL_TOKEN": "wrong"}), append(f[1:], "--by", "test")...); code == 0 {
		t.Error("pause with a wrong token succeeded")
	}

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("demo: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not end")
	}
	waitFor(t, "the demo's output to be read", 5*time.Second, func() bool { return strings.Contains(out.String(), "(the demo's audit log") })
	got := out.String()
	for _, re := range []string{
		`\n\s+WITH THE GUARD\s+WITHOUT \(nobody acting\)\n`,
		`\nliquidated\s+none\s+XSOL at 144\.\d+ \(t\+\ds\)\n`,
		`\nverdict: the guard avoided the liquidation of XSOL \(equity \+\d+\.\d\d\)\n`,
	} {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("demo output does not match %s:\n%s", re, got)
		}
	}
	if _, err := http.Get(page[1]); err == nil {
		t.Errorf("the status page is still served after the demo")
	}
}

// The operator's own control token (RISKGUARD_CONTROL_TOKEN from the
// shell) is never printed: the control line names the variable instead
// (issue 32, item 5).
func TestDemoKeepsTheShellsTokenOffTheScreen(t *testing.T) {
	t.Parallel()
	const secret = "operators-real-token-123456"
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string {
		if k == "RISKGUARD_CONTROL_TOKEN" {
			return secret
		}
		return ""
	}}
	err := m.Run(context.Background(), []string{"demo", "--config", "../../rules.example.yaml", "--duration", "1s",
		"--interval", "1s", "--listen", "127.0.0.1:0", "--log-format", "text"})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr.String())
	}
	if out := stdout.String() + stderr.String(); strings.Contains(out, secret) {
		t.Errorf("the shell's token was printed:\n%s", out)
	}
	if !regexp.MustCompile(`with the same RISKGUARD_CONTROL_TOKEN exported \(pause, resume, silence, ack\):\n  \S.* pause --addr 127\.0\.0\.1:`).MatchString(stdout.String()) {
		t.Errorf("no control line naming the variable:\n%s", stdout.String())
	}
}

// The control command the demo prints runs, pasted into another shell, at
// the point of README's Start here where the demo is: with riskguard
// installed on PATH it is "riskguard …", and without, the program's own
// path (under go run, "go run ./cmd/riskguard …"), never a riskguard the
// shell cannot find (issue 40, item 5).
func TestDemoPrintsACommandThatRuns(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	scenario := filepath.Join(t.TempDir(), "fast.yaml")
	if err := os.WriteFile(scenario, []byte(fastScenario), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"installed, on PATH", filepath.Dir(bin) + string(filepath.ListSeparator) + "/usr/bin:/bin", "riskguard"},
		{"not on PATH", "/usr/bin:/bin", bin},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		demo := exec.CommandContext(ctx, bin, "demo", "--config", "../../rules.example.yaml", "--scenario", scenario,
			"--duration", "20s", "--interval", "200ms")
		demo.Env = []string{"PATH=" + tc.path, "HOME=" + t.TempDir()}
		out, err := demo.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := demo.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		var export, line string
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "control, from another shell") && sc.Scan() {
				export = strings.TrimSpace(sc.Text())
				sc.Scan()
				line = strings.TrimSpace(sc.Text())
				break
			}
		}
		go io.Copy(io.Discard, out)
		if f := strings.Fields(line); !strings.HasPrefix(export, "export RISKGUARD_CONTROL_TOKEN=") || len(f) < 2 || f[0] != tc.want {
			t.Errorf("%s: control lines %q, %q, want the command %s", tc.name, export, line, tc.want)
		}
		// Pasted into a shell with the same PATH, as a user would.
		sh := exec.CommandContext(ctx, "/bin/sh", "-c", export+"\n"+line+" --by test")
		sh.Env, sh.Dir = demo.Env, t.TempDir()
		if b, err := sh.CombinedOutput(); err != nil || !strings.Contains(string(b), "paused") {
			t.Errorf("%s: %s: %v\n%s", tc.name, line, err, b)
		}
		demo.Process.Signal(os.Interrupt)
		demo.Wait()
		cancel()
	}
}
