package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/internal/golden"
)

// TestOutputsUnchanged pins what a user sees, byte for byte, against the
// files in testdata/golden: the summaries of `riskguard backtest` (JSON and
// text, with a baseline), the output of `riskguard test`, the guarded run's
// audit log of a backtest, and the table of the scenario battery
// (scripts/battery.go). It exists so that a refactoring — splitting package
// engine into subpackages — can show it changed nothing visible. After an
// intended change, rewrite the files (the flag after the package: go test
// hands the flags after the first it does not know to the test binary) with
//
//	go test ./cmd/riskguard/ -run TestOutputsUnchanged -update
//
// and review their diff.
//
// The inputs are files of the repository: rules.example.yaml and its tests,
// testdata/ruletest, scripts/testdata (the replay-year scenario and config)
// and the scenario and price paths in testdata/golden (thin-cross.prices.csv,
// every 20 s for 40 minutes: SOL the default scenario's dip through XSOL's
// liquidation price at 15×, BTC −4% and partly back, ETH −12% within three
// minutes and back to −3%, DOGE +12%; year.prices.csv, every minute for an
// hour: BTC −20% and partly back, ETH a −10% wick, SOL +13%, DOGE −4.5%
// within three minutes then −7%, XRP +9%, DOT −4.5%, LINK +12%). A
// command's golden file is its transcript: command line, exit status,
// stdout and stderr; the audit's is the JSON lines, the battery's its
// stdout. Every in-process
// output is produced twice and must be the same both times. Nothing is
// normalised except the wall-clock "time" of JSON log lines on stderr (see
// normaliseStderr); none is written by these runs today. The battery runs
// `go run scripts/battery.go -short` (the first rule set and the one-line
// stop, on the synthetic paths and one window of each real set: about a
// minute on two cores) and is skipped with -short or without the go
// command.
func TestOutputsUnchanged(t *testing.T) {
	if *update {
		if err := os.MkdirAll(filepath.Join("testdata", "golden"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const (
		example   = "../../rules.example.yaml"
		thinCross = "testdata/golden/thin-cross.scenario.yaml"
		thinCSV   = "testdata/golden/thin-cross.prices.csv"
		year      = "../../scripts/testdata/year-scenario.yaml"
		yearCSV   = "testdata/golden/year.prices.csv"
		yearRules = "../../scripts/testdata/year-config.yaml"
	)
	t.Run("battery", func(t *testing.T) {
		t.Parallel()
		testBatteryUnchanged(t, "battery-short.golden")
	})
	t.Run("audit", func(t *testing.T) {
		t.Parallel()
		first := backtestAudit(t, example, thinCross, thinCSV, 2*time.Second)
		if second := backtestAudit(t, example, thinCross, thinCSV, 2*time.Second); second != first {
			t.Errorf("two runs wrote different audit logs: %s", golden.FirstDiff(first, second))
		}
		checkGolden(t, "backtest-thin-cross.audit.jsonl.golden", first)
	})
	tests := []struct {
		name   string
		golden string
		args   []string
		code   int
	}{
		// A thin cross account through a crash: a leverage cut saves XSOL;
		// cancels, an isolation and harmful isolations skipped.
		{"backtest json thin cross", "backtest-thin-cross.json.golden",
			[]string{"backtest", "--config", example, "--scenario", thinCross, "--csv", thinCSV, "--interval", "2s", "--json"}, 0},
		{"backtest text thin cross with baseline", "backtest-thin-cross.txt.golden",
			[]string{"backtest", "--config", example, "--scenario", thinCross, "--csv", thinCSV, "--interval", "2s", "--baseline", yearRules}, 0},
		// Ten positions of scripts/replay-year.sh through an hour of
		// crashes and squeezes, one tick a minute: XDOT cut to its
		// maximum leverage, 33 cuts nothing could fund, cancels, five
		// liquidations either way.
		{"backtest json year scenario", "backtest-year.json.golden",
			[]string{"backtest", "--config", example, "--scenario", year, "--csv", yearCSV, "--json"}, 0},
		{"backtest text year scenario with baseline", "backtest-year.txt.golden",
			[]string{"backtest", "--config", example, "--scenario", year, "--csv", yearCSV, "--baseline", yearRules}, 0},
		{"test example", "test-example.golden", []string{"test", exampleTests}, 0},
		{"test account", "test-account.golden", []string{"test", "testdata/ruletest/account.test.yaml"}, 0},
		{"test loaders", "test-loaders.golden", []string{"test", "testdata/ruletest/loaders.test.yaml"}, 0},
		// The failures' format: a diff of the firing rules and actions,
		// and the load errors of a malformed file.
		{"test broken", "test-broken.golden", []string{"test", brokenTests}, 1},
		{"test malformed", "test-malformed.golden", []string{"test", "testdata/ruletest/malformed.test.yaml"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			first := transcript(t, tt.args, tt.code)
			if second := transcript(t, tt.args, tt.code); second != first {
				t.Errorf("two runs differ: %s", golden.FirstDiff(first, second))
			}
			checkGolden(t, tt.golden, first)
		})
	}
}

// transcript runs riskguard in-process with an empty environment and
// returns its command line, exit status, stdout and stderr as one text.
func transcript(t *testing.T, args []string, wantCode int) string {
	t.Helper()
	code, stdout, stderr := runOut(t, context.Background(), envMap(nil), args...)
	if code != wantCode {
		t.Errorf("riskguard %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, stderr)
	}
	return fmt.Sprintf("$ riskguard %s\nexit status %d\n-- stdout --\n%s-- stderr --\n%s",
		strings.Join(args, " "), code, stdout, normaliseStderr(stderr))
}

// logTime is the wall-clock time of a JSON log line.
var logTime = regexp.MustCompile(`(?m)^\{"time":"[^"]*"`)

// normaliseStderr replaces the "time" of each JSON log line, the wall clock
// when the line was logged, with <time>. Nothing else is changed.
func normaliseStderr(s string) string {
	return logTime.ReplaceAllString(s, `{"time":"<time>"`)
}

// backtestAudit replays csv from scenario through the rules of configPath as
// `riskguard backtest --scenario … --csv … --interval …` does, and returns
// the guarded run's audit log, which the command has no flag to write: its
// times are the replay's simulated clock.
func backtestAudit(t *testing.T, configPath, scenario, csv string, interval time.Duration) string {
	t.Helper()
	cfg, err := config.Load(configPath, envMap(nil), config.Options{SecretsOptional: true})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sim.LoadScenario(scenario)
	if err != nil {
		t.Fatal(err)
	}
	src, err := backtest.OpenCSV(csv)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var audit bytes.Buffer
	if _, err := backtest.Run(context.Background(), src, backtest.Options{Engine: cfg.Engine, Rules: cfg.Rules,
		Scenario: sc, Interval: interval, Seed: sim.DefaultSeed, Audit: &audit}); err != nil {
		t.Fatal(err)
	}
	return audit.String()
}

// testBatteryUnchanged runs the scenario battery as its comment says, from
// the repository's root, without the RISKGUARD_ variables of the
// environment (they would override rules.example.yaml), and compares its
// table with the golden file.
func testBatteryUnchanged(t *testing.T, name string) {
	t.Helper()
	if testing.Short() {
		t.Skip("the battery takes about a minute")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to run scripts/battery.go")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "run", "scripts/battery.go", "-short")
	cmd.Dir = filepath.Join("..", "..")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RISKGUARD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	began := time.Now()
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("go run scripts/battery.go: %v\n%s", err, stderr.String())
		}
		// Exit status 1 is a verdict (a self-inflicted liquidation), a
		// visible output like the table: the golden file says it.
		t.Errorf("go run scripts/battery.go -short: %v\n%s", err, stderr.String())
	}
	t.Logf("battery ran in %s", time.Since(began).Round(time.Second))
	checkGolden(t, name, stdout.String())
}

// checkGolden compares got with testdata/golden/name, or rewrites the file
// with -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "golden", name), got, *update)
}
