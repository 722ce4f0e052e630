package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/exchange/sim"
)

// lockedBuffer is a bytes.Buffer safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startSim runs `riskguard sim` in-process with env and args and returns
// its base URL, its stderr, and a stop function that cancels it and
// returns Run's error.
func startSim(t *testing.T, env map[string]string, args ...string) (string, *lockedBuffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{}
	m := &Main{Stdout: outW, Stderr: stderr, Getenv: func(k string) string { return env[k] }}
	done := make(chan error, 1)
	go func() {
		err := m.Run(ctx, append([]string{"sim"}, args...))
		outW.Close()
		done <- err
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	stop := func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("riskguard sim did not stop within 10s of cancel")
			return nil
		}
	}
	select {
	case line := <-lines:
		_, rest, ok := strings.Cut(line, "listening on ")
		if !ok {
			stop()
			t.Fatalf("first line = %q", line)
		}
		base, _, _ := strings.Cut(rest, " ")
		return base, stderr, stop
	case err := <-done:
		cancel()
		t.Fatalf("riskguard sim ended before listening: %v; stderr:\n%s", err, stderr.String())
	case <-time.After(10 * time.Second):
		stop()
		t.Fatal("riskguard sim did not print its address within 10s")
	}
	return "", nil, nil
}

func TestSimCommand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RISKGUARD_API_KEY": "shell-key", "RISKGUARD_API_SECRET": "shell-secret"}
	base, stderr, stop := startSim(t, env, "--listen", "127.0.0.1:0", "--seed", "9", "--step", "10ms")
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("base = %q", base)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A client with the key pair of the environment is accepted…
	c, err := exchange.New(base, "shell-key", "shell-secret")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := c.Positions(ctx)
	if err != nil {
		t.Fatalf("positions: %v", err)
	}
	if len(ps) != 4 {
		t.Errorf("got %d positions, want the default scenario's 4", len(ps))
	}
	// …one with the default pair is not.
	d, err := exchange.New(base, sim.DefaultKey, sim.DefaultSecret)
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *exchange.APIError
	if _, err := d.Positions(ctx); !errors.As(err, &apiErr) || apiErr.Code != sim.CodeAPIKeyInvalid {
		t.Errorf("default key: err = %v, want API_KEY_INVALID", err)
	}
	res, err := http.Get(base + "/v1/market/indexPrices")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()

	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil after cancel", err)
	}
	log := stderr.String()
	for _, want := range []string{"path=/v1/contracts/positions", "status=200", "status=401", "path=/v1/market/indexPrices", "duration="} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "shell-secret") {
		t.Error("the secret is in the log")
	}
}

func TestSimCommandDefaults(t *testing.T) {
	t.Parallel()
	// No key pair in the environment: the documented defaults; a scenario
	// file.
	dir := t.TempDir()
	file := filepath.Join(dir, "one.yaml")
	scenario := `
currencies: [USDT, BTC]
contracts:
  - {name: XBTC, base: BTC, quote: USDT, riskLimit: {maxLeverage: 20, maintenanceMarginRate: 0.005}}
positions:
  - {symbol: XBTC, quantity: 1, entryPrice: 60000, leverage: 10}
indexes:
  - {name: BTC, walk: {start: 60000, volatility: 0.001}}
`
	if err := os.WriteFile(file, []byte(scenario), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _, stop := startSim(t, nil, "--listen", "127.0.0.1:0", "--scenario", file)
	defer stop()
	c, err := exchange.New(base, sim.DefaultKey, sim.DefaultSecret)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps, err := c.Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 1 || !ps[0].LiquidationPrice.Equal(margin.LiquidationPrice(exchange.Long, ps[0].Quantity, ps[0].EntryPrice, ps[0].Margin, ps[0].RiskLimit.MaintenanceMarginRate, 2)) {
		t.Errorf("positions = %+v", ps)
	}
}

func TestSimCommandErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("contracts: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // in the error or on stderr
	}{
		{"unknown flag", []string{"--port", "1"}, "flag provided but not defined"},
		{"extra argument", []string{"now"}, `unexpected argument "now"`},
		{"bad step", []string{"--step", "0s"}, "--step must be positive"},
		{"bad scenario", []string{"--scenario", bad}, "at least one contract symbol"},
		{"missing scenario", []string{"--scenario", filepath.Join(dir, "none.yaml")}, "no such file"},
		{"bad address", []string{"--listen", "127.0.0.1:notaport"}, "127.0.0.1:notaport"},
		{"forbid a public route", []string{"--forbid", "/v1/market/trades"}, `forbidden route "/v1/market/trades": not a private route the exchange serves`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			m := &Main{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := m.Run(ctx, append([]string{"sim"}, tc.args...))
			if err == nil {
				t.Fatal("Run succeeded")
			}
			if got := err.Error() + stderr.String(); !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// The banner gives the public demo key pair ready to paste, and never the
// secret of a pair from the environment.
func TestSimBannerKeyPair(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env        map[string]string
		want, hide string
	}{
		{nil, "API key demo-key, secret demo-secret: export RISKGUARD_API_KEY=demo-key RISKGUARD_API_SECRET=demo-secret", ""},
		{map[string]string{"RISKGUARD_API_KEY": "k1", "RISKGUARD_API_SECRET": "shell-secret"}, `API key "k1" and the secret from RISKGUARD_API_SECRET`, "shell-secret"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		outR, outW := io.Pipe()
		m := &Main{Stdout: outW, Stderr: io.Discard, Getenv: func(k string) string { return tt.env[k] }}
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx, []string{"sim", "--listen", "127.0.0.1:0"}); outW.Close() }()
		banner := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(outR)
			var lines []string
			for len(lines) < 2 && sc.Scan() {
				lines = append(lines, sc.Text())
			}
			banner <- strings.Join(lines, "\n")
			io.Copy(io.Discard, outR)
		}()
		select {
		case b := <-banner:
			if !strings.Contains(b, tt.want) || (tt.hide != "" && strings.Contains(b, tt.hide)) {
				t.Errorf("banner:\n%s\nwant %q", b, tt.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no banner within 10s")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sim: %v", err)
		}
	}
}

// The scenario example of docs/simulator.md (moved there from README) is a
// valid scenario file: every key it shows exists and the values pass
// validation.
func TestReadmeScenarioExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/simulator.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Scenario files")
	if !ok {
		t.Fatal("docs/simulator.md has no Scenario files section")
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("no yaml block in the Scenario files section")
	}
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(path, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sc, err := sim.LoadScenario(path)
	if err != nil {
		t.Fatalf("docs/simulator.md's scenario: %v", err)
	}
	if len(sc.Contracts) != 1 || len(sc.Positions) != 1 || len(sc.Indexes) != 2 {
		t.Errorf("scenario read as %+v", sc)
	}
}
