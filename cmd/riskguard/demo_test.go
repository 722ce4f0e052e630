package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The demo, README's first command, runs the example rules against the
// embedded simulated exchange: its first tick lowers XSOL's leverage, which
// is above the risk limit's maximum. The tick's table shows the position as
// read (15x) apart from the position after the action (10x); every line
// fits 100 columns; the demo's own directory is removed at exit.
func TestDemo(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), []string{"demo", "--config", "../../rules.example.yaml", "--duration", "1500ms",
		"--interval", "200ms", "--log-format", "text"})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"── tick 1, t+0s",
		"as read by the tick:\nSYMBOL  SIDE   QTY  LEV  MODE      INDEX    LIQUIDATION  DISTANCE\n",
		"XSOL    LONG   400  15x  isolated  150.00   144.91       3.40%",
		"lower_leverage XSOL 15x→10x: sent [over-max-leverage]\n      liquidation 144.907 → 139.84 (3.40% → 6.77% away), +2026.67 margin, free balance 17973.33\n      after; XBTC liquidation 33101 → 35634.4 (49.08% → 45.18% away); account survives 3.40% → 5.38%\n      together (XSOL → XETH first, 5029.17 → 7971.91 lost), weakest alone XSOL 3.40% → XETH 5.38%\n",
		"after the actions:\nSYMBOL  SIDE  QTY  LEV  MODE      INDEX   LIQUIDATION  DISTANCE  ORDERS\nXSOL    LONG  400  10x  isolated  150.00  139.84       6.77%     0\n",
		"lower_leverage (sent)", "no position was liquidated",
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
