//go:build ignore

// battery runs rule sets through `riskguard backtest` on a battery of price
// paths × accounts and prints, per rule set, one table — liquidations
// without and with the guard, the ones it avoided and the ones it caused
// (self-inflicted), the equity difference (in money and as a share of the
// starting equity), the account measure at its worst without and with the
// guard, the actions it skipped — then the skips by reason, the totals, the
// goals met or not, and a one-line judgement. It exits 1 when the guard
// caused a liquidation or an account ended with negative equity and nothing
// liquidated (the margin model would be wrong).
//
//	go run scripts/battery.go                          # every rule set of ruleSets
//	go run scripts/battery.go -rules my-rules.yaml     # one or more (comma-separated)
//	go run scripts/battery.go -short                   # the first rule set only, for CI
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// ruleSets are the rule files the battery runs side by side, each on every
// path and account: adding a rule set is one line.
func ruleSets() []string {
	return []string{
		"rules.example.yaml",
		// "rules.reduce.yaml", // the reduce-exposure rule set (issue 19 item 4), once reduce_position exists
	}
}

// step is the time between two rows of a path's prices, in every run: a
// wick of two minutes needs more than one row a minute.
const step = 10 * time.Second

// totals sums a rule set's runs.
type totals struct {
	runs, without, avoided, caused int
	delta, start                   decimal.Decimal
	skips                          map[[2]string]int // (action, reason) → count
	problems                       int
}

func main() {
	rulesFlag := flag.String("rules", "", "rules or config files to test, comma-separated (default: the battery's rule sets)")
	short := flag.Bool("short", false, "the first rule set only (for CI): its rows are the full run's, byte for byte")
	flag.Parse()
	sets := ruleSets()
	if *rulesFlag != "" {
		sets = strings.Split(*rulesFlag, ",")
	}
	if *short {
		sets = sets[:1]
	}
	dir, err := os.MkdirTemp("", "riskguard-battery-")
	check(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "riskguard")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/riskguard").CombinedOutput(); err != nil {
		fail("go build: %v\n%s", err, out)
	}
	bad := 0
	for i, rulesFile := range sets {
		if i > 0 {
			fmt.Println()
		}
		bad += runSet(bin, dir, rulesFile)
	}
	if bad > 0 {
		fmt.Printf("\n%d problems: a self-inflicted liquidation or an impossible account\n", bad)
		os.Exit(1)
	}
	fmt.Println("\nno self-inflicted liquidation; every account consistent")
}

// runSet runs one rule set on every path and account, prints its table and
// totals, and returns the number of problems.
func runSet(bin, dir, rulesFile string) int {
	fmt.Printf("%s:\n", rulesFile)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path\taccount\tliquidated without\twith guard\tavoided\tself-inflicted\tequity Δ\tΔ % of start\tworst measure without → with\tskipped")
	t := totals{delta: decimal.Zero, start: decimal.Zero, skips: map[[2]string]int{}}
	for _, p := range paths() {
		for _, a := range accounts() {
			csv := filepath.Join(dir, "prices.csv")
			check(writePath(csv, p, step))
			sc := filepath.Join(dir, "scenario.json")
			check(writeScenario(sc, a))
			cmd := exec.Command(bin, "backtest", "--config", rulesFile, "--scenario", sc, "--csv", csv, "--interval", "2s", "--json", "--log-level", "error")
			cmd.Env = append(os.Environ(), "RISKGUARD_API_KEY=", "RISKGUARD_API_SECRET=")
			out, err := cmd.Output()
			if err != nil {
				fail("%s / %s / %s: %v\n%s", rulesFile, p.name, a.name, err, out)
			}
			var s backtest.JSONSummary
			check(json.Unmarshal(out, &s))
			v := s.Verdict
			mark := ""
			for _, r := range []backtest.RunJSON{s.Without, s.With} {
				if r.Equity.IsNegative() && len(r.Liquidations) == 0 {
					mark, t.problems = " NEGATIVE EQUITY, NOTHING LIQUIDATED", t.problems+1
				}
			}
			if len(v.CausedSymbols) > 0 {
				t.problems++
			}
			skipped := 0
			for _, sk := range v.Skips {
				skipped += sk.Count
				t.skips[[2]string{sk.Action, sk.Reason}] += sk.Count
			}
			t.runs++
			t.without += v.LiquidatedWithout
			t.avoided += len(v.AvoidedSymbols)
			t.caused += len(v.CausedSymbols)
			t.delta = t.delta.Add(v.EquityDelta)
			t.start = t.start.Add(v.EquityStart)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s → %s\t%d%s\n", p.name, a.name, list(s.Without.Liquidations), list(s.With.Liquidations),
				list(v.AvoidedSymbols), list(v.CausedSymbols), v.EquityDelta.StringFixed(0), share(v.EquityDelta, v.EquityStart),
				measure(v.WorstMeasureWithout), measure(v.WorstMeasureWith), skipped, mark)
		}
	}
	tw.Flush()
	if len(t.skips) > 0 {
		fmt.Println("\nskipped, by reason:")
		keys := make([][2]string, 0, len(t.skips))
		for k := range t.skips {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b [2]string) int {
			return cmp.Or(cmp.Compare(t.skips[b], t.skips[a]), cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
		})
		for _, k := range keys {
			fmt.Printf("  %d %s: %s\n", t.skips[k], k[0], k[1])
		}
	}
	fmt.Printf("\ntotals over %d runs: liquidations avoided %d of %d, self-inflicted %d, equity Δ %s (%s of the starting equities, %s)\n",
		t.runs, t.avoided, t.without, t.caused, t.delta.StringFixed(0), share(t.delta, t.start), t.start.StringFixed(0))
	goal := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	fmt.Printf("goals: no self-inflicted liquidation: %s; summed equity Δ not negative: %s\n", goal(t.caused == 0), goal(!t.delta.IsNegative()))
	fmt.Printf("judgement: %s\n", backtest.Judge(t.avoided, t.caused, t.delta, t.start))
	return t.problems
}

// share is d as a signed percentage of start, one decimal.
func share(d, start decimal.Decimal) string {
	if !start.IsPositive() {
		return "n/a"
	}
	s := d.Div(start).Shift(2).StringFixed(1) + "%"
	if d.IsPositive() {
		s = "+" + s
	}
	return s
}

// measure is the account measure at its worst (0 in a run that lost a
// position), or n/a when it was never known.
func measure(m *float64) string {
	if m == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f%%", *m*100)
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
