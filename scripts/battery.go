//go:build ignore

// battery runs rule sets through `riskguard backtest` on a battery of price
// paths × accounts and prints, per rule set, one table — liquidations
// without and with the guard, the ones it avoided and the ones it caused
// (self-inflicted), the equity difference (in money and as a share of the
// starting equity), the account measure at its worst without and with the
// guard, the actions it skipped — then the skips by reason, the totals, the
// goals met or not with their counts, and a one-line judgement; at the end,
// the liquidations no leverage cut or isolation can avoid, with why. It
// exits 1 when the guard caused a liquidation or an account ended with
// negative equity and nothing liquidated (the margin model would be wrong).
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
	"gopkg.in/yaml.v3"
)

// start prices of the indexes; the positions open at them.
var start = map[string]float64{"BTC": 65000, "ETH": 3010, "SOL": 150, "DOGE": 0.16}

// path is a price path: the factor applied to every index at t minutes.
type path struct {
	name string
	f    func(minutes float64) float64
	// soft paths come back (the wick, the grind, the chop): the goal for
	// reduce_position is every liquidation on a cross account there.
	soft bool
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
	ps := []path{
		{"crash −25%", func(t float64) float64 { return lin(t, 10, 70, 1, 0.75) }, false},
		{"wick −12% and back", func(t float64) float64 {
			if t < 30 {
				return 1
			}
			if t < 32 {
				return lin(t, 30, 32, 1, 0.88)
			}
			return lin(t, 32, 40, 0.88, 0.99)
		}, true},
		{"slow grind −12%, half back", func(t float64) float64 {
			if t < 100 {
				return lin(t, 0, 100, 1, 0.88)
			}
			return lin(t, 100, 120, 0.88, 0.94)
		}, true},
		{"rally +15%", func(t float64) float64 { return lin(t, 10, 70, 1, 1.15) }, false},
		{"chop ±4%", func(t float64) float64 { return 1 + 0.04*math.Sin(2*math.Pi*t/10) }, true},
	}
	// The wick families (issue 31): an ordinary day's moves, down and
	// back or up and back, once or twice, 4% to 12% in two minutes and
	// back in eight. "wick −12% and back" above is one of them.
	wick := func(t, at, depth float64) float64 {
		switch {
		case t < at || t >= at+10:
			return 0
		case t < at+2:
			return depth * (t - at) / 2
		}
		return depth * (1 - (t-at-2)/8)
	}
	for _, depth := range []float64{4, 8, 12} {
		for _, sign := range []float64{-1, 1} {
			d := sign * depth / 100
			dir := fmt.Sprintf("−%g%%", depth)
			if sign > 0 {
				dir = fmt.Sprintf("+%g%%", depth)
			}
			if !(sign < 0 && depth == 12) { // the wick above
				ps = append(ps, path{fmt.Sprintf("wick %s and back", dir), func(t float64) float64 { return 1 + wick(t, 30, d) }, true})
			}
			ps = append(ps, path{fmt.Sprintf("two wicks %s", dir), func(t float64) float64 { return 1 + wick(t, 30, d) + wick(t, 70, d) }, true})
		}
	}
	return ps
}

// account is a starting account on the default scenario's symbols.
type account struct {
	name      string
	balance   string
	positions []sim.PositionSpec
}

// cross reports whether the account holds a cross position.
func (a account) cross() bool {
	return slices.ContainsFunc(a.positions, func(p sim.PositionSpec) bool { return p.Cross })
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
		// Issue 31's two accounts, where isolating a healthy cross
		// position on leverage alone turned an ordinary wick into a
		// liquidation.
		{"thin all-cross", "3000", []sim.PositionSpec{pos("XBTC", exchange.Long, "0.5", "65000", 20, true), pos("XSOL", exchange.Long, "200", "150", 10, true)}},
		{"cross shorts", "4000", []sim.PositionSpec{pos("XBTC", exchange.Short, "0.5", "65000", 15, true), pos("XETH", exchange.Short, "10", "3010", 15, true)}},
	}
}

// ruleSet is a rules or config file the battery runs, under a name.
type ruleSet struct {
	name, file string
	// dropReduce runs the file without its reduce_position actions: the
	// rules as they were with leverage cuts and isolation only.
	dropReduce bool
}

// ruleSets are the rule files the battery runs side by side, each on every
// path and account: adding a rule set is one line.
//   - the example rules as shipped (cuts, isolation, and reduce_position
//     close to liquidation and on the account rule);
//   - the same without reduce_position, derived from the file when the
//     battery runs (so the two never drift): the goal "avoid every
//     liquidation a leverage cut or an isolation can avoid" is theirs;
//   - a reduce-exposure set: no leverage cut, no isolation, reduce_position
//     on distance tiers and on the account rules.
func ruleSets() []ruleSet {
	return []ruleSet{
		{name: "rules.example.yaml", file: "rules.example.yaml"},
		{name: "rules.example.yaml without reduce_position", file: "rules.example.yaml", dropReduce: true},
		{name: "scripts/testdata/rules.reduce.yaml (reduce exposure)", file: "scripts/testdata/rules.reduce.yaml"},
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
	// savable sums, over the runs, the liquidations without the guard one
	// cut or isolation can avoid (oracle); savedOfSavable the guard's
	// avoided ones up to that many; missed lists the runs short of it.
	savable, savedOfSavable int
	missed                  []string
	// crossSoft and crossSoftSaved count the liquidations on an account
	// with a cross position in the wick, grind and chop paths, and those
	// avoided; crossSoftMissed lists the others.
	crossSoft, crossSoftSaved int
	crossSoftMissed           []string
	// liquidations counts the exchange's liquidations over both runs of
	// every path, said those the guard itself said as one (its audit's
	// liquidated records); unsaid lists the runs where the two differ.
	liquidations, said int
	unsaid             []string
	// costs are the equity Δ, as a fraction of the start, of the runs in
	// which nothing would be liquidated without the guard: what the guard
	// costs on a day it was not needed (a gain counts as 0).
	costs []float64
	// costlyRuns names those that cost more than maxQuietCost.
	costlyRuns []string
	// closer are the calls that left a position closer to its
	// liquidation price, with their run and what became of it;
	// closerLost counts those whose position was then liquidated.
	closer     []string
	closerLost int
}

// maxQuietCost is the most a run where nothing would be liquidated may
// cost (a fraction of the starting equity): a guard that costs more on an
// ordinary day is switched off by its owner.
const maxQuietCost = 0.05

func main() {
	rulesFlag := flag.String("rules", "", "rules or config files to test, comma-separated (default: the battery's rule sets)")
	short := flag.Bool("short", false, "the first rule set only (for CI): its rows are the full run's, byte for byte")
	inputs := flag.String("inputs", "", "also write each run's scenario and prices into `DIR` (PATH-ACCOUNT.scenario.json, .csv), to replay one run with riskguard backtest")
	flag.Parse()
	sets := ruleSets()
	if *rulesFlag != "" {
		sets = nil
		for _, f := range strings.Split(*rulesFlag, ",") {
			sets = append(sets, ruleSet{name: f, file: f})
		}
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
	or := newOracle()
	bad := 0
	for i, set := range sets {
		if i > 0 {
			fmt.Println()
		}
		file := set.file
		if set.dropReduce {
			file = filepath.Join(dir, fmt.Sprintf("rules-%d.yaml", i))
			check(withoutReduce(set.file, file))
		}
		bad += runSet(bin, dir, *inputs, set.name, file, or)
	}
	or.printUnsavable()
	if bad > 0 {
		fmt.Printf("\n%d problems: a self-inflicted liquidation or an impossible account\n", bad)
		os.Exit(1)
	}
	fmt.Println("\nno self-inflicted liquidation; every account consistent")
}

// runSet runs one rule set on every path and account, prints its table and
// totals, and returns the number of problems.
func runSet(bin, dir, inputs, name, rulesFile string, or *oracle) int {
	fmt.Printf("%s:\n", name)
	reduces, err := hasReduce(rulesFile)
	check(err)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path\taccount\tliquidated without\twith guard\tavoided\tself-inflicted\tequity Δ\tΔ % of start\tworst measure without → with\tskipped")
	t := totals{delta: decimal.Zero, start: decimal.Zero, skips: map[[2]string]int{}}
	for _, p := range paths() {
		for _, a := range accounts() {
			csv := filepath.Join(dir, "prices.csv")
			check(writePath(csv, p, step))
			sc := filepath.Join(dir, "scenario.json")
			check(writeScenario(sc, a))
			if inputs != "" {
				base := filepath.Join(inputs, strings.NewReplacer(" ", "_", "%", "", ",", "", "±", "pm", "−", "-", "+", "").Replace(p.name+"-"+a.name))
				check(writeScenario(base+".scenario.json", a))
				check(writePath(base+".csv", p, step))
			}
			cmd := exec.Command(bin, "backtest", "--config", rulesFile, "--scenario", sc, "--csv", csv, "--interval", "2s", "--json", "--log-level", "error")
			cmd.Env = append(os.Environ(), "RISKGUARD_API_KEY=", "RISKGUARD_API_SECRET=")
			out, err := cmd.Output()
			if err != nil {
				fail("%s / %s / %s: %v\n%s", name, p.name, a.name, err, out)
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
			for _, r := range []struct {
				name string
				run  backtest.RunJSON
			}{{"without", s.Without}, {"with", s.With}} {
				t.liquidations += len(r.run.Liquidations)
				said := sameSymbols(r.run.Liquidations, r.run.LiquidationsSaid)
				t.said += said
				if said != len(r.run.Liquidations) || len(r.run.LiquidationsSaid) != len(r.run.Liquidations) {
					t.unsaid = append(t.unsaid, fmt.Sprintf("%s on %s %s the guard: the exchange %s, the guard said %s", p.name, a.name, r.name,
						list(r.run.Liquidations), list(r.run.LiquidationsSaid)))
					t.problems++
				}
			}
			skipped := 0
			for _, sk := range v.Skips {
				skipped += sk.Count
				t.skips[[2]string{sk.Action, sk.Reason}] += sk.Count
			}
			if len(s.Without.Liquidations) == 0 && v.EquityStart.IsPositive() {
				c := math.Max(0, -v.EquityDelta.Div(v.EquityStart).InexactFloat64())
				t.costs = append(t.costs, c)
				if c > maxQuietCost {
					// How near the account came without the guard says what
					// the guard was up against.
					near := ""
					if w := v.WorstMeasureWithout; w != nil {
						near = fmt.Sprintf(", %.2f%% from its liquidation without the guard", *w*100)
					}
					t.costlyRuns = append(t.costlyRuns, fmt.Sprintf("%s on %s (%.1f%%%s)", p.name, a.name, c*100, near))
				}
			}
			for _, c := range v.Closer {
				t.closer = append(t.closer, fmt.Sprintf("%s on %s: %s", p.name, a.name, c))
				if !c.LiquidatedAt.IsZero() {
					t.closerLost++
				}
			}
			t.runs++
			t.without += v.LiquidatedWithout
			t.avoided += len(v.AvoidedSymbols)
			t.caused += len(v.CausedSymbols)
			t.delta = t.delta.Add(v.EquityDelta)
			t.start = t.start.Add(v.EquityStart)
			if best := or.canAvoid(p, a, s.Without.Liquidations).best; best > 0 { // memoised per path and account
				t.savable += best
				t.savedOfSavable += min(len(v.AvoidedSymbols), best)
				if len(v.AvoidedSymbols) < best {
					t.missed = append(t.missed, fmt.Sprintf("%s on %s, %d of %d (%s)", p.name, a.name, len(v.AvoidedSymbols), best, or.canAvoid(p, a, nil).move))
				}
			}
			for _, sym := range s.Without.Liquidations {
				saved := !slices.Contains(s.With.Liquidations, sym)
				where := fmt.Sprintf("%s in %s on %s", sym, p.name, a.name)
				if p.soft && a.cross() {
					t.crossSoft++
					if saved {
						t.crossSoftSaved++
					} else {
						t.crossSoftMissed = append(t.crossSoftMissed, where)
					}
				}
			}
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
	missing := func(ls []string) string {
		if len(ls) == 0 {
			return ""
		}
		return "; not avoided: " + strings.Join(ls, ", ")
	}
	if len(t.costs) > 0 {
		cs := slices.Clone(t.costs)
		slices.Sort(cs)
		over := 0
		for _, c := range cs {
			if c > 0.01 {
				over++
			}
		}
		fmt.Printf("what it costs where nothing would be liquidated (%d runs): %d over 1%% of equity, worst %.1f%%, median %.1f%%\n",
			len(cs), over, cs[len(cs)-1]*100, cs[len(cs)/2]*100)
	}
	fmt.Println("goals:")
	fmt.Printf("  no self-inflicted liquidation: %s (%d)\n", goal(t.caused == 0), t.caused)
	fmt.Printf("  summed equity Δ not negative: %s (%s)\n", goal(!t.delta.IsNegative()), t.delta.StringFixed(0))
	fmt.Printf("  every liquidation a leverage cut or an isolation can avoid, avoided: %s (%d of %d%s)\n",
		goal(t.savedOfSavable == t.savable), t.savedOfSavable, t.savable, strings.Replace(missing(t.missed), "not avoided", "short", 1))
	if reduces {
		fmt.Printf("  with reduce_position, every liquidation on a cross account in the wick, grind and chop avoided: %s (%d of %d%s)\n",
			goal(t.crossSoftSaved == t.crossSoft), t.crossSoftSaved, t.crossSoft, missing(t.crossSoftMissed))
	}
	fmt.Printf("  no run where nothing would be liquidated costs more than %.0f%% of equity: %s (%d%s)\n", maxQuietCost*100,
		goal(len(t.costlyRuns) == 0), len(t.costlyRuns), strings.Replace(missing(t.costlyRuns), "not avoided", "over", 1))
	fmt.Printf("  every liquidation said as one by the guard (a critical liquidated record), none said that was not: %s (%d of %d%s)\n",
		goal(len(t.unsaid) == 0), t.said, t.liquidations, strings.Replace(missing(t.unsaid), "not avoided", "differ", 1))
	closer := "; no call left a position closer to its liquidation price"
	if len(t.closer) > 0 {
		closer = fmt.Sprintf("; %d calls left a position closer to its liquidation price, %d of them then liquidated:\n  %s", len(t.closer), t.closerLost, strings.Join(t.closer, "\n  "))
	}
	fmt.Printf("judgement: %s%s\n", backtest.Judge(t.avoided, t.caused, t.delta, t.start), closer)
	return t.problems
}

// sameSymbols is how many of the exchange's liquidations the guard's
// list has, each matched once.
func sameSymbols(exchange, said []string) int {
	left := slices.Clone(said)
	n := 0
	for _, sym := range exchange {
		if i := slices.Index(left, sym); i >= 0 {
			left = slices.Delete(left, i, i+1)
			n++
		}
	}
	return n
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

// duration is the length of every path.
const duration = 2 * time.Hour

// t0 is the time of every path's first row.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pricesAt are the indexes' prices on the path at t, as the rows say them.
func pricesAt(p path, t time.Duration) map[string]decimal.Decimal {
	k := p.f(t.Minutes())
	out := make(map[string]decimal.Decimal, len(start))
	for ix, s := range start {
		out[ix] = decimal.NewFromFloat(s * k).Round(5)
	}
	return out
}

// writePath writes two hours of the path, one row per index and step.
func writePath(name string, p path, step time.Duration) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "time,name,price")
	for t := time.Duration(0); t <= duration; t += step {
		prices := pricesAt(p, t)
		for _, ix := range []string{"BTC", "ETH", "SOL", "DOGE"} {
			fmt.Fprintf(w, "%s,%s,%s\n", t0.Add(t).Format(time.RFC3339), ix, prices[ix])
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// oracle knows, per path and account, how many of the liquidations
// without the guard a leverage cut or an isolation can avoid. It asks the
// simulated exchange itself, with no engine and no rule: the account as it
// starts, one move made at the first row (when the free balance is whole
// and nothing has lost yet), then the path's rows; the exchange liquidates
// what they cross. The moves, for each position liquidated without the
// guard, each tried alone:
//   - the position isolated (when cross) at the lowest leverage the
//     exchange accepts (the free balance funds it): the most margin any
//     cut can put behind it;
//   - for a cross position, every other cross position isolated at its
//     leverage, which takes their losses out of the pool that backs it.
//
// A move counts only when it loses no position that survives without the
// guard: keeping one position by liquidating another is not avoiding a
// liquidation. The best move's count is what a cut or an isolation can
// avoid in the run (moves are not combined: the free balance one takes is
// the other's). It is an upper bound for rules that act later, when the
// price has already moved: a cut then buys the same margin, an isolation
// less.
type oracle struct {
	memo      map[string]oracleRow
	unsavable []string // in the order found
}

// oracleRow is the oracle's answer for one path and account.
type oracleRow struct {
	best int    // the most liquidations one move avoids
	move string // that move
}

func newOracle() *oracle { return &oracle{memo: map[string]oracleRow{}} }

// canAvoid is how many of the liquidations without the guard (without) a
// single cut or isolation avoids on path p and account a, and the move.
func (o *oracle) canAvoid(p path, a account, without []string) oracleRow {
	key := p.name + "\x00" + a.name
	if r, ok := o.memo[key]; ok {
		return r
	}
	var row oracleRow
	for _, sym := range without {
		var spec sim.PositionSpec
		for _, ps := range a.positions {
			if ps.Symbol == sym {
				spec = ps
			}
		}
		type tried struct {
			desc string
			move func(*sim.Exchange) bool // false: the exchange refuses it
		}
		lev := 0
		moves := []tried{{"", func(ex *sim.Exchange) bool {
			for l := 1; l <= spec.Leverage; l++ {
				if _, err := ex.SetSettings(sym, exchange.Settings{Leverage: l, Cross: false}); err == nil {
					lev = l
					return true
				}
			}
			return false
		}}}
		others := slices.ContainsFunc(a.positions, func(q sim.PositionSpec) bool { return q.Cross && q.Symbol != sym })
		if spec.Cross && others {
			moves = append(moves, tried{"the other cross positions isolated", func(ex *sim.Exchange) bool {
				for _, q := range a.positions {
					if q.Cross && q.Symbol != sym {
						if _, err := ex.SetSettings(q.Symbol, exchange.Settings{Leverage: q.Leverage, Cross: false}); err != nil {
							return false
						}
					}
				}
				return true
			}})
		}
		saved := false
		var notes []string
		for i, m := range moves {
			ok, lost, worst, liq, err := replayWith(p, a, m.move, sym)
			check(err)
			desc := m.desc
			if i == 0 {
				desc = fmt.Sprintf("%s isolated at %d×", sym, lev)
			}
			if !ok {
				notes = append(notes, "the exchange accepts no isolation of it at any leverage")
				continue
			}
			kept, fair := 0, true
			var sacrificed []string
			for _, l := range lost {
				if !slices.Contains(without, l) {
					fair = false
					sacrificed = append(sacrificed, l)
				}
			}
			for _, w := range without {
				if !slices.Contains(lost, w) {
					kept++
				}
			}
			if fair && kept > row.best {
				row.best, row.move = kept, desc
			}
			keptSym := !slices.Contains(lost, sym)
			switch {
			case fair && keptSym:
				saved = true
			case keptSym:
				notes = append(notes, fmt.Sprintf("%s keeps it but loses %s, which survives without the guard", desc, strings.Join(sacrificed, " ")))
			case i == 0:
				notes = append(notes, fmt.Sprintf("%s (the lowest leverage the free balance funds) it liquidates at %s, and the index reaches %s", desc, liq, worst))
			default:
				notes = append(notes, "with "+desc+", the pool still runs out")
			}
		}
		if !saved {
			w := strings.Join(notes, "; ")
			if !spec.Cross {
				w += " (isolated: no other move gives it margin)"
			}
			o.unsavable = append(o.unsavable, fmt.Sprintf("%s in %s on %s: %s", sym, p.name, a.name, w))
		}
	}
	o.memo[key] = row
	return row
}

// replayWith replays path p on account a's exchange after move, and
// reports the positions liquidated, the index's worst price for sym, and
// sym's liquidation price after the move; ok is false when the exchange
// refused the move.
func replayWith(p path, a account, move func(*sim.Exchange) bool, sym string) (ok bool, lost []string, worst, liq decimal.Decimal, err error) {
	now := t0
	sc := scenario(a)
	first := pricesAt(p, 0)
	for i, ix := range sc.Indexes {
		sc.Indexes[i] = sim.IndexSpec{Name: ix.Name, Scale: ix.Scale, Points: []sim.PricePoint{{Price: first[ix.Name]}}}
	}
	ex, err := sim.New(sim.Config{Key: "oracle", Secret: "oracle", Now: func() time.Time { return now }, Scenario: sc, HistoryLimit: 16})
	if err != nil {
		return false, nil, worst, liq, err
	}
	if !move(ex) {
		return false, nil, worst, liq, nil
	}
	pos, _ := ex.Position(sym)
	liq = pos.LiquidationPrice
	var base string
	for _, c := range sc.Contracts {
		if c.Name == sym {
			base = c.Base
		}
	}
	worst = first[base]
	for t := step; t <= duration; t += step {
		now = t0.Add(t)
		prices := pricesAt(p, t)
		if x := prices[base]; (pos.Direction == exchange.Long && x.LessThan(worst)) || (pos.Direction == exchange.Short && x.GreaterThan(worst)) {
			worst = x
		}
		ex.SetIndexPrices(prices)
		ex.Step(now)
	}
	for _, l := range ex.Liquidations() {
		lost = append(lost, l.Symbol)
	}
	return true, lost, worst, liq, nil
}

// printUnsavable lists the liquidations no cut or isolation can avoid.
func (o *oracle) printUnsavable() {
	if len(o.unsavable) == 0 {
		return
	}
	fmt.Println("\nliquidations no leverage cut or isolation can avoid without losing another position (reduce_position can: it realises the loss on what it takes off):")
	for _, u := range o.unsavable {
		fmt.Printf("  %s\n", u)
	}
}

// withoutReduce writes the rules or config file in without its
// reduce_position actions to out.
func withoutReduce(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	for _, rule := range ruleNodes(&doc) {
		acts := mapValue(rule, "actions")
		if acts == nil || acts.Kind != yaml.SequenceNode {
			continue
		}
		acts.Content = slices.DeleteFunc(acts.Content, func(a *yaml.Node) bool {
			v := mapValue(a, "action")
			return v != nil && v.Value == "reduce_position"
		})
	}
	b, err = yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o600)
}

// hasReduce reports whether a rule of the file asks for reduce_position.
func hasReduce(file string) (bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return false, fmt.Errorf("%s: %w", file, err)
	}
	for _, rule := range ruleNodes(&doc) {
		if acts := mapValue(rule, "actions"); acts != nil {
			for _, a := range acts.Content {
				if v := mapValue(a, "action"); v != nil && v.Value == "reduce_position" {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// ruleNodes are the rule mappings of a rules or config file.
func ruleNodes(doc *yaml.Node) []*yaml.Node {
	if len(doc.Content) == 0 {
		return nil
	}
	rs := mapValue(doc.Content[0], "rules")
	if rs == nil {
		return nil
	}
	return rs.Content
}

// mapValue is the value of key in a mapping node, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// scenario is the simulated exchange's starting state for account a.
func scenario(a account) *sim.Scenario {
	sc := sim.DefaultScenario()
	sc.Balance = decimal.RequireFromString(a.balance)
	sc.Positions = a.positions
	sc.OpenOrders = nil
	return sc
}

func writeScenario(name string, a account) error {
	b, err := json.Marshal(scenario(a))
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
