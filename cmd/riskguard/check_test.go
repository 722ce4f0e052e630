package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const badConfig = `exchange:
  base_url: https://api.example.com
engine:
  intervall: 2s
rules:
  - name: lev
    when: position.levrage > riskLimit.maxLeverage
    cooldwon: 5m
  - name: lower
    when: liquidationDistance < 0.03
    actions:
      - action: lower_leverage
`

// badWant are the lines check must print for badConfig, in order.
var badWant = []string{
	`:4:3: unknown key "engine.intervall" (did you mean "engine.interval"?)`,
	`:7:20: rule "lev": when: unknown field position.levrage (did you mean position.leverage?)`,
	`        when: position.levrage > riskLimit.maxLeverage`,
	`                       ^`,
	`:8:5: rule "lev": unknown key "cooldwon" (did you mean "cooldown"?)`,
	`:12:17: rule "lower": lower_leverage: missing parameter "leverage" (an expression giving the target leverage, e.g. riskLimit.maxLeverage / 2)`,
	`: 4 errors`, // the summary line: path + ": 4 errors"
}

func checkOutputs(t *testing.T, code int, stdout, stderr string, path string) {
	t.Helper()
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if stdout != "" {
		t.Errorf("stdout = %q, want nothing", stdout)
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != len(badWant) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(badWant), stderr)
	}
	for i, w := range badWant {
		if strings.HasPrefix(w, ":") {
			w = path + w
		}
		if lines[i] != w {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, lines[i], w)
		}
	}
}

func TestCheckInProcess(t *testing.T) {
	t.Parallel()
	t.Run("example", func(t *testing.T) {
		t.Parallel()
		var stdout, stderr bytes.Buffer
		m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: envMap(nil)}
		if err := m.Run(context.Background(), []string{"check", "--config", "../../rules.example.yaml"}); err != nil {
			t.Fatalf("check: %v\n%s", err, stderr.String())
		}
		out := stdout.String()
		for _, want := range []string{
			"rules.example.yaml: OK, 12 rules; exchange https://api.example.com, every 2s",
			"liquidation-distance-5pct  [critical]",
			"when:     liquidationDistance < 0.05",
			"actions:  cancel_orders; set_isolated; notify",
			"actions:  lower_leverage to riskLimit.maxLeverage; notify",
			"symbols:  XBTC, XETH",
			"timing:   for 10s, keep firing 1m, cooldown 15m, on no data: alert",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("summary lacks %q:\n%s", want, out)
			}
		}
		if stderr.Len() != 0 {
			t.Errorf("stderr = %q", stderr.String())
		}
	})
	t.Run("bad file", func(t *testing.T) {
		t.Parallel()
		path := writeConfig(t, badConfig)
		var stdout, stderr bytes.Buffer
		m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: envMap(nil)}
		err := m.Run(context.Background(), []string{"check", "--config", path})
		var ec exitCode
		if !errors.As(err, &ec) {
			t.Fatalf("err = %v, want an exit code", err)
		}
		checkOutputs(t, int(ec), stdout.String(), stderr.String(), path)
	})
	t.Run("warnings", func(t *testing.T) {
		t.Parallel()
		path := writeConfig(t, "exchange:\n  base_url: http://exchange.example.com\n  api_secret: hunter2-secret\n"+minimalRules)
		var stdout, stderr bytes.Buffer
		m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: envMap(nil)}
		if err := m.Run(context.Background(), []string{"check", "--config", path}); err != nil {
			t.Fatal(err)
		}
		out := stdout.String()
		if !strings.Contains(out, "warning: exchange.api_secret is set in the config file") ||
			!strings.Contains(out, "warning: exchange.base_url uses plain http") {
			t.Errorf("warnings missing:\n%s", out)
		}
		if strings.Contains(out+stderr.String(), "hunter2") {
			t.Error("the secret was printed")
		}
	})
	t.Run("usage", func(t *testing.T) {
		t.Parallel()
		var stdout, stderr bytes.Buffer
		m := &Main{Stdout: &stdout, Stderr: &stderr}
		err := m.Run(context.Background(), []string{"check", "--config", "a", "extra"})
		if ec, ok := err.(exitCode); !ok || ec != 2 {
			t.Errorf("err = %v, want exit status 2", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		var stdout, stderr bytes.Buffer
		m := &Main{Stdout: &stdout, Stderr: &stderr}
		err := m.Run(context.Background(), []string{"check", "--config", filepath.Join(t.TempDir(), "none.yaml")})
		if ec, ok := err.(exitCode); !ok || ec != 1 || !strings.Contains(stderr.String(), "no config at ") {
			t.Errorf("err = %v, stderr %q", err, stderr.String())
		}
	})
}

// TestCheckBinary runs the real program, built once, without credentials
// in its environment.
func TestCheckBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "riskguard")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(t *testing.T, args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"} // no credentials
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, stdout.String(), stderr.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), stdout.String(), stderr.String()
		}
		t.Fatalf("run %v: %v", args, err)
		return 0, "", ""
	}
	t.Run("example", func(t *testing.T) {
		code, stdout, stderr := run(t, "check", "--config", "../../rules.example.yaml")
		if code != 0 || !strings.Contains(stdout, "OK, 12 rules") || stderr != "" {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
	t.Run("bad file", func(t *testing.T) {
		path := writeConfig(t, badConfig)
		code, stdout, stderr := run(t, "check", "--config", path)
		checkOutputs(t, code, stdout, stderr, path)
	})
}
