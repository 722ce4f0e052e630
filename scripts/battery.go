//go:build ignore

// battery runs a rules file through `riskguard backtest` on a battery of
// price paths × accounts and prints one table: liquidations without and
// with the guard, the ones the guard caused (self-inflicted), the equity
// difference, and the harmful actions it skipped. It exits 1 when the
// guard caused a liquidation or an account ended with negative equity and
// nothing liquidated (the margin model would be wrong).
//
//	go run scripts/battery.go                          # rules.example.yaml
//	go run scripts/battery.go -rules my-rules.yaml
//	go run scripts/battery.go -short                   # coarser steps, for CI
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// start prices of the indexes; the positions open at them.
var start = map[string]float64{"BTC": 65000, "ETH": 3010, "SOL": 150, "DOGE": 0.16}

// path is a price path: the factor applied to every index at t minutes.
type path struct {
	name string
	f    func(minutes float64) float64
}

func paths() []path {
	lin := func(t, t0, t1, a, b float64) float64 { // a at t0 to b at t1, held outside
		switch {
		case t <= t0:
			return a
		case t >= t1:
			return b
		}
		return a + (b-a)*(t-t0)/(t1-t0)
	}
	return []path{
		{"crash −25%", func(t float64) float64 { return lin(t, 10, 70, 1, 0.75) }},
		{"wick −12% and back", func(t float64) float64 {
			if t < 30 {
				return 1
			}
			if t < 32 {
				return lin(t, 30, 32, 1, 0.88)
			}
			return lin(t, 32, 40, 0.88, 0.99)
		}},
		{"slow grind −12%, half back", func(t float64) float64 {
			if t < 100 {
				return lin(t, 0, 100, 1, 0.88)
			}
			return lin(t, 100, 120, 0.88, 0.94)
		}},
		{"rally +15%", func(t float64) float64 { return lin(t, 10, 70, 1, 1.15) }},
		{"chop ±4%", func(t float64) float64 { return 1 + 0.04*math.Sin(2*math.Pi*t/10) }},
	}
}

// account is a starting account on the default scenario's symbols.
type account struct {
	name      string
	balance   string
	positions []sim.PositionSpec
}

func accounts() []account {
	d := decimal.RequireFromString
	pos := func(sym, dir, qty, entry string, lev int, cross bool) sim.PositionSpec {
		return sim.PositionSpec{Symbol: sym, Direction: dir, Quantity: d(qty), EntryPrice: d(entry), Leverage: lev, Cross: cross}
	}
	return []account{
		{"thin cross", "3000", []sim.PositionSpec{pos("XBTC", exchange.Long, "0.5", "65000", 20, true), pos("XSOL", exchange.Long, "400", "150", 10, false)}},
		{"several cross", "3000", []sim.PositionSpec{pos("XBTC", exchange.Long, "0.5", "65000", 20, true), pos("XETH", exchange.Long, "10", "3010", 20, true)}},
		{"funded isolated", "20000", []sim.PositionSpec{pos("XETH", exchange.Short, "12", "3010", 20, false), pos("XSOL", exchange.Long, "400", "150", 10, false)}},
		{"mixed", "3000", []sim.PositionSpec{pos("XBTC", exchange.Long, "0.5", "65000", 20, true), pos("XETH", exchange.Short, "12", "3010", 20, false),
			pos("XSOL", exchange.Long, "400", "150", 10, false)}},
		{"shorts", "3000", []sim.PositionSpec{pos("XBTC", exchange.Short, "0.5", "65000", 20, true), pos("XETH", exchange.Short, "10", "3010", 10, true)}},
	}
}

func main() {
	rulesFile := flag.String("rules", "rules.example.yaml", "rules or config file to test")
	short := flag.Bool("short", false, "one step a minute instead of every 10 s (for CI)")
	flag.Parse()
	step := 10 * time.Second
	if *short {
		step = time.Minute
	}
	dir, err := os.MkdirTemp("", "riskguard-battery-")
	check(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "riskguard")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/riskguard").CombinedOutput(); err != nil {
		fail("go build: %v\n%s", err, out)
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path\taccount\tliquidated without\twith guard\tself-inflicted\tequity Δ\tharmful skipped")
	bad := 0
	for _, p := range paths() {
		for _, a := range accounts() {
			csv := filepath.Join(dir, "prices.csv")
			check(writePath(csv, p, step))
			sc := filepath.Join(dir, "scenario.json")
			check(writeScenario(sc, a))
			cmd := exec.Command(bin, "backtest", "--config", *rulesFile, "--scenario", sc, "--csv", csv, "--interval", "2s", "--json", "--log-level", "error")
			cmd.Env = append(os.Environ(), "RISKGUARD_API_KEY=", "RISKGUARD_API_SECRET=")
			out, err := cmd.Output()
			if err != nil {
				fail("%s / %s: %v\n%s", p.name, a.name, err, out)
			}
			var s backtest.JSONSummary
			check(json.Unmarshal(out, &s))
			v := s.Verdict
			mark := ""
			for _, r := range []backtest.RunJSON{s.Without, s.With} {
				if r.Equity.IsNegative() && len(r.Liquidations) == 0 {
					mark, bad = " NEGATIVE EQUITY, NOTHING LIQUIDATED", bad+1
				}
			}
			if len(v.CausedSymbols) > 0 {
				bad++
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d%s\n", p.name, a.name, list(s.Without.Liquidations), list(s.With.Liquidations),
				list(v.CausedSymbols), v.EquityDelta.StringFixed(0), v.HarmfulSkipped, mark)
		}
	}
	tw.Flush()
	if bad > 0 {
		fmt.Printf("\n%d problems: a self-inflicted liquidation or an impossible account\n", bad)
		os.Exit(1)
	}
	fmt.Println("\nno self-inflicted liquidation; every account consistent")
}

func list(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, " ")
}

// writePath writes two hours of the path, one row per index and step.
func writePath(name string, p path, step time.Duration) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fmt.Fprintln(w, "time,name,price")
	for t := time.Duration(0); t <= 2*time.Hour; t += step {
		k := p.f(t.Minutes())
		for _, ix := range []string{"BTC", "ETH", "SOL", "DOGE"} {
			fmt.Fprintf(w, "%s,%s,%s\n", t0.Add(t).Format(time.RFC3339), ix, decimal.NewFromFloat(start[ix]*k).Round(5))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func writeScenario(name string, a account) error {
	sc := sim.DefaultScenario()
	sc.Balance = decimal.RequireFromString(a.balance)
	sc.Positions = a.positions
	sc.OpenOrders = nil
	b, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	return os.WriteFile(name, b, 0o600)
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "battery: "+format+"\n", args...)
	os.Exit(2)
}
