package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The demo, README's first command, runs the example rules against the
// embedded simulated exchange: its first tick lowers XSOL's leverage, which
// is above the risk limit's maximum.
func TestDemo(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	err := m.Run(context.Background(), []string{"demo", "--config", "../../rules.example.yaml", "--duration", "1500ms",
		"--interval", "200ms", "--dir", t.TempDir(), "--log-format", "text"})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"SYMBOL  SIDE", "XSOL    LONG   400  10x", "lower_leverage (sent)", "no position was liquidated"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "lower_leverage XSOL 15→10") {
		t.Errorf("demo log lacks the action:\n%s", stderr.String())
	}
}
