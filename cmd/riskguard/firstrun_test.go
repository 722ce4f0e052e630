package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
)

// run without a config file says so in one line, with the next step.
func TestRunWithoutConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "riskguard.yaml")
	code, stdout, stderr := runOut(t, context.Background(), envMap(nil), "run", "--config", path)
	want := "riskguard run: no config at " + path + ": copy rules.example.yaml to it and set exchange.base_url (README: Start here), or pass --config FILE\n"
	if code != 1 || stderr != want || stdout != "" {
		t.Errorf("exit %d, stdout %q\nstderr %q\nwant   %q", code, stdout, stderr, want)
	}
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// The real binary against a dead port: the exchange's failure is said once
// per kind of line, each with the next step, instead of a warning per retry
// and an error per tick; the metrics still count every failed tick, and
// durations in the JSON log are text ("100ms").
func TestRunDeadPortSaysItOnce(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "riskguard.yaml")
	body := "exchange:\n  base_url: http://" + closedPort(t) + "\n  timeout: 200ms\nengine:\n  interval: 100ms\n  listen: 127.0.0.1:0\n" +
		"  audit_log: " + filepath.Join(dir, "audit.jsonl") + "\n  state_file: " + filepath.Join(dir, "state.json") + "\nrules:\n" + overMaxRule
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg, "--log-format", "json")
	cmd.Env = append(os.Environ(), "RISKGUARD_API_KEY="+sim.DefaultKey, "RISKGUARD_API_SECRET="+sim.DefaultSecret)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, logs := listenAddr(t, stderr, 20*time.Second)
	failedTicks := func() int {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`riskguard_ticks_total\{result="error"\} (\d+)`).FindSubmatch(b)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	waitFor(t, "five failed ticks in the metrics", 30*time.Second, func() bool { return failedTicks() >= 5 })
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Errorf("run: %v", err)
	}

	var problems []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line: %q", sc.Text())
		}
		if line["msg"] == "riskguard started" && line["interval"] != "100ms" {
			t.Errorf("interval logged as %v, want \"100ms\"", line["interval"])
		}
		if lvl := line["level"]; (lvl == "WARN" || lvl == "ERROR") && line["msg"] != "notify: riskguard stopped" {
			problems = append(problems, line)
		}
	}
	msgs := map[string]int{}
	for _, p := range problems {
		msg := p["msg"].(string)
		msgs[msg]++
		if next, _ := p["next"].(string); !strings.HasPrefix(next, "nothing listens at exchange.base_url") {
			t.Errorf("%q without the next step: %v", msg, p)
		}
		if d, ok := p["delay"]; ok {
			if _, isText := d.(string); !isText {
				t.Errorf("delay logged as %v, want text", d)
			}
		}
	}
	for _, want := range []string{"exchange request failed, retrying", "the rules' symbols could not be checked against the exchange; starting anyway", "tick failed"} {
		if msgs[want] != 1 {
			t.Errorf("%q logged %d times, want once", want, msgs[want])
		}
	}
	if len(problems) > 4 {
		t.Errorf("%d warnings and errors for one dead port, want at most 4:\n%s", len(problems), logs.String())
	}
}

// The collapser writes a repeated warning once a window and then says how
// many it left out; another error, or the same one on another symbol or
// notification channel, is written at once; info lines are never held
// back.
func TestCollapserRepeats(t *testing.T) {
	t.Parallel()
	var buf lockedBuffer
	log := slog.New(newCollapser(slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: durationText}), time.Minute))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(at time.Duration, lvl slog.Level, msg string, attrs ...any) {
		r := slog.NewRecord(t0.Add(at), lvl, msg, 0)
		r.Add(attrs...)
		log.Handler().Handle(context.Background(), r)
	}
	for i := range 30 {
		write(time.Duration(i)*2*time.Second, slog.LevelError, "tick failed", "err", "connection refused")
		write(time.Duration(i)*2*time.Second, slog.LevelInfo, "tick", "n", i)
	}
	write(61*time.Second, slog.LevelError, "tick failed", "err", "connection refused")
	write(62*time.Second, slog.LevelError, "tick failed", "err", "status 503")
	write(63*time.Second, slog.LevelWarn, "actions failed", "symbol", "XBTC", "err", "status 503")
	write(63*time.Second, slog.LevelWarn, "actions failed", "symbol", "XSOL", "err", "status 503")
	// Two channels failing alike are two problems: the second was hidden
	// behind the first (TestBinarySecretsNeverShown waited in vain for it).
	write(63*time.Second, slog.LevelError, "notification not delivered", "channel", "team", "err", "status 500")
	write(63*time.Second, slog.LevelError, "notification not delivered", "channel", "pager", "err", "status 500")
	for range 2 { // said every time: a transition, an operator's reload
		write(64*time.Second, slog.LevelWarn, "rule firing", "rule", "r", "symbol", "XBTC")
		write(64*time.Second, slog.LevelError, "config reload rejected; the old rules keep running", "err", "bad file")
	}
	out := buf.String()
	if strings.Count(out, `"msg":"rule firing"`) != 2 || strings.Count(out, `"msg":"config reload rejected`) != 2 {
		t.Errorf("a transition or a reload was collapsed:\n%s", out)
	}
	if n := strings.Count(out, `"msg":"tick"`); n != 30 {
		t.Errorf("%d info lines, want 30", n)
	}
	if n := strings.Count(out, `"err":"connection refused"`); n != 2 {
		t.Errorf("the repeated error written %d times, want 2 (once a minute):\n%s", n, out)
	}
	if !strings.Contains(out, `"repeated":"29 more times in the last 1m0s, not logged"`) {
		t.Errorf("no count of the lines left out:\n%s", out)
	}
	for _, want := range []string{`"err":"status 503"`, `"symbol":"XBTC"`, `"symbol":"XSOL"`, `"channel":"team"`, `"channel":"pager"`} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %s:\n%s", want, out)
		}
	}
}

// run on a listen address already taken says so in one line, with the
// next step.
func TestRunListenAddressTaken(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	g := newGuardEnv(t, "  listen: "+taken.Addr().String()+"\n", overMaxRule)
	code, stderr := g.run(context.Background(), "run", "--config", g.config, "--log-format", "json")
	want := "riskguard run: listen " + taken.Addr().String() + ": "
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "address already in use: another riskguard (or another program) listens there: stop it, or change engine.listen") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
}

// https:// in exchange.base_url against an exchange that answers plain
// HTTP (and the reverse) says which scheme to write (issue 32, item 15).
func TestRunSchemeMismatchSaysTheScheme(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	g.url = strings.Replace(g.url, "http://", "https://", 1)
	g.writeConfig("", overMaxRule)
	_, stderr := g.once()
	if !strings.Contains(stderr, "the exchange answers plain HTTP at that address: write http:// in exchange.base_url") {
		t.Errorf("https:// against plain HTTP:\n%s", stderr)
	}
	tls := httptest.NewTLSServer(g.ex)
	t.Cleanup(tls.Close)
	g.url = strings.Replace(tls.URL, "https://", "http://", 1)
	g.writeConfig("", overMaxRule)
	_, stderr = g.once()
	if !strings.Contains(stderr, "the exchange answers HTTPS at that address: write https:// in exchange.base_url") {
		t.Errorf("http:// against HTTPS:\n%s", stderr)
	}
}
