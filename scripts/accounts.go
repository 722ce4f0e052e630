//go:build ignore

// accounts measures one `riskguard run` process guarding many accounts
// (issue 21, "Figures"): its CPU, its memory and the requests per second
// each account costs.
//
//	go run scripts/accounts.go                          # 100 accounts × 20 positions, 2 s, 60 s measured
//	go run scripts/accounts.go -accounts 10 -measure 20s
//
// The guard is the real binary (built first into a temporary directory),
// run as a child process so that its CPU and memory are its own: read from
// /proc/PID/stat (user + system time) and /proc/PID/status (VmRSS sampled
// every second, VmHWM at the end). Each account has its own simulated
// exchange served over HTTP on 127.0.0.1 by this program, with 20 open
// positions on 20 contracts whose indexes walk at random; the requests per
// account are what its exchange logs over the measured window. Five rules
// guard every position (leverage over the maximum, near liquidation, a
// window over the index, the account's margin ratio); the walks are calm
// enough that none acts, so the figures are the steady state of reading
// and evaluating.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

const rulesYAML = `rules:
  - name: over-max-leverage
    when: position.leverage > riskLimit.maxLeverage
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
  - name: near-liquidation
    when: liquidationDistance < 0.02
    actions:
      - action: cancel_orders
  - name: high-leverage
    when: position.leverage >= 18
    severity: info
    actions:
      - action: notify
  - name: index-falling
    when: change(indexPrice, "1m") < -0.2
    severity: info
    actions:
      - action: notify
  - name: margin-ratio
    when: account.marginRatio > 0.9
    scope: account
    severity: critical
    actions:
      - action: notify
`

func main() {
	accounts := flag.Int("accounts", 100, "accounts guarded by the one process")
	positions := flag.Int("positions", 20, "open positions per account")
	interval := flag.Duration("interval", 2*time.Second, "engine.interval")
	warmup := flag.Duration("warmup", 10*time.Second, "ticks before the measured window")
	measure := flag.Duration("measure", 60*time.Second, "the measured window")
	flag.Parse()
	if err := run(*accounts, *positions, *interval, *warmup, *measure); err != nil {
		fmt.Fprintln(os.Stderr, "accounts:", err)
		os.Exit(1)
	}
}

func scenario(n int) *sim.Scenario {
	d := decimal.RequireFromString
	s := &sim.Scenario{Currencies: []string{"USDT"}, Balance: d("1000000"), SpotBalances: map[string]decimal.Decimal{"USDT": d("1000")}}
	for i := range n {
		base := fmt.Sprintf("C%02d", i)
		s.Currencies = append(s.Currencies, base)
		s.Contracts = append(s.Contracts, sim.ContractSpec{
			SymbolSpec: sim.SymbolSpec{Name: "X" + base, Base: base, Quote: "USDT", BaseScale: 3, QuoteScale: 2, BaseMaxQuantity: d("1000000")},
			RiskLimit:  sim.RiskLimitSpec{MaxLeverage: 20, MaintenanceMarginRate: d("0.01"), MaxQuantity: d("1000000")},
		})
		dir := exchange.Long
		if i%2 == 1 {
			dir = exchange.Short
		}
		s.Positions = append(s.Positions, sim.PositionSpec{Symbol: "X" + base, Direction: dir, Quantity: d("10"), EntryPrice: d("100"), Leverage: 5 + i%10, Cross: i%3 == 0})
		s.Indexes = append(s.Indexes, sim.IndexSpec{Name: base, Walk: &sim.WalkSpec{Start: d("100"), Volatility: 0.0005}})
	}
	return s
}

func run(accounts, positions int, interval, warmup, measure time.Duration) error {
	dir, err := os.MkdirTemp("", "riskguard-accounts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "riskguard")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/riskguard").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, out)
	}
	key, secret := filepath.Join(dir, "key"), filepath.Join(dir, "secret")
	os.WriteFile(key, []byte(sim.DefaultKey), 0o600)
	os.WriteFile(secret, []byte(sim.DefaultSecret), 0o600)

	exs := make([]*sim.Exchange, accounts)
	var b strings.Builder
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	listen := ln.Addr().String()
	ln.Close()
	fmt.Fprintf(&b, "exchange:\n  rate_limit: 20\nengine:\n  interval: %s\n  audit_log: %s\n  state_file: %s\n  listen: %s\naccounts:\n",
		interval, filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "state.json"), listen)
	for i := range accounts {
		ex, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: int64(i + 1), Scenario: scenario(positions)})
		if err != nil {
			return err
		}
		srv := httptest.NewServer(ex)
		defer srv.Close()
		exs[i] = ex
		fmt.Fprintf(&b, "  - name: acct%03d\n    exchange: {base_url: %s, api_key_file: %s, api_secret_file: %s}\n", i, srv.URL, key, secret)
	}
	b.WriteString(rulesYAML)
	cfg := filepath.Join(dir, "riskguard.yaml")
	if err := os.WriteFile(cfg, []byte(b.String()), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg, "--log-format", "json", "--log-level", "warn")
	logf, _ := os.Create(filepath.Join(dir, "log"))
	cmd.Stderr, cmd.Stdout = logf, logf
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	for {
		resp, err := http.Get("http://" + listen + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Since(start) > 40*time.Second {
			data, _ := os.ReadFile(filepath.Join(dir, "log"))
			return fmt.Errorf("not healthy after 40 s (%v)\n%s", err, tail(string(data), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	ready := time.Since(start)
	time.Sleep(warmup)
	cpu0, calls0 := cpuTime(pid), counts(exs)
	t0 := time.Now()
	var rss []float64
	for time.Since(t0) < measure {
		time.Sleep(time.Second)
		rss = append(rss, status(pid, "VmRSS"))
	}
	cpu1, calls1, el := cpuTime(pid), counts(exs), time.Since(t0)
	hwm := status(pid, "VmHWM")
	resp, err := http.Get("http://" + listen + "/metrics")
	okTicks, errTicks := 0.0, 0.0
	if err == nil {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if strings.HasPrefix(l, "riskguard_ticks_total{") {
				v, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				if strings.Contains(l, `result="ok"`) {
					okTicks += v
				} else {
					errTicks += v
				}
			}
		}
		resp.Body.Close()
	}
	cancel()
	cmd.Wait()

	var rates []float64
	for i := range exs {
		rates = append(rates, float64(calls1[i]-calls0[i])/el.Seconds())
	}
	slices.Sort(rates)
	sum := 0.0
	for _, r := range rates {
		sum += r
	}
	slices.Sort(rss)
	cpu := (cpu1 - cpu0) / el.Seconds()
	fmt.Printf("machine: %d CPUs, %s, %s/%s\n", runtime.NumCPU(), cpuModel(), runtime.GOOS, runtime.GOARCH)
	fmt.Printf("guard: %d accounts × %d positions, interval %s, 5 rules; healthy after %s; measured %s after %s of warm-up\n",
		accounts, positions, interval, ready.Round(time.Millisecond), el.Round(time.Second), warmup)
	fmt.Printf("CPU: %.1f%% of one core (%.2f ms per account-tick)\n", cpu*100, cpu*1000*interval.Seconds()/float64(accounts))
	fmt.Printf("memory: RSS median %.1f MB, max %.1f MB, high-water %.1f MB\n", rss[len(rss)/2], rss[len(rss)-1], hwm)
	fmt.Printf("requests per second per account: mean %.3f, min %.3f, max %.3f (%.1f/s for the process)\n", sum/float64(len(rates)), rates[0], rates[len(rates)-1], sum)
	fmt.Printf("ticks (whole run): %.0f ok, %.0f failed\n", okTicks, errTicks)
	return nil
}

func counts(exs []*sim.Exchange) []int {
	out := make([]int, len(exs))
	for i, ex := range exs {
		out[i] = len(ex.Calls())
	}
	return out
}

// cpuTime is the process's user + system CPU in seconds.
func cpuTime(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// status is a /proc/PID/status figure in MB.
func status(pid int, key string) float64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "unknown CPU"
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
