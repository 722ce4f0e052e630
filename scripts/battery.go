//go:build ignore

// battery runs rule sets through `riskguard backtest` on a battery of price
// paths × accounts — sixteen synthetic two-hour paths, and half-overlapping
// 12-hour windows of three sets of real one-minute bars
// (scripts/testdata/real) — beside the peer every set is judged against: the
// one-line stop a trader would write instead (scripts/testdata/rules.stop.yaml,
// close a position 2% from its liquidation price). Per group of paths
// (the synthetic battery, each real set) it prints, per rule set, one table —
// liquidations without and with the guard, the ones it avoided and the ones
// it caused (self-inflicted), the equity difference (in money and as a
// share of the starting equity), the account measure at its worst without
// and with the guard, the actions it skipped, and the stop's outcome on the
// same run — then the skips by reason, the totals, the goals met or not with
// their counts, and a one-line judgement; then the rule sets side by side;
// at the end, the liquidations no leverage cut or isolation can avoid, with
// why, and a verdict line per rule set and group against the stop. It exits
// 1 when the guard caused a liquidation or an account ended with negative
// equity and nothing liquidated (the margin model would be wrong); how a
// set compares with the stop is printed (and written with -summary), never
// an exit status.
//
//	go run scripts/battery.go                          # every rule set of ruleSets, every group of paths
//	go run scripts/battery.go -paths ftx,binance,coinbase -summary out.json   # the real sets only
//	go run scripts/battery.go -rules my-rules.yaml     # one or more (comma-separated), beside the stop
//	go run scripts/battery.go -short                   # the first rule set and the stop, one window a real set, for CI
package main

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// indexes are the default scenario's indexes, in the order of a row.
var indexes = []string{"BTC", "ETH", "SOL", "DOGE"}

// row is the indexes' prices at one time of a path.
type row struct {
	at     time.Time
	prices map[string]decimal.Decimal
}

// path is a price path the accounts are run on.
type path struct {
	name string
	// group is the set of paths it belongs to (groups): the synthetic
	// battery or one real set; every measure is summed per group.
	group string
	// rows are its prices, every index at every time, made when run.
	rows func() []row
	// interval is the guard's tick on it.
	interval time.Duration
	// soft paths come back (the wick, the grind, the chop): the goal for
	// reduce_position is every liquidation on a cross account there.
	soft bool
	// short paths are run by -short too.
	short bool
}

// synthetic is the group of the generated paths.
const synthetic = "synthetic"

// synth is a generated path: the factor f applied to every index at t
// minutes, a row every step for duration, a tick every 2 s.
func synth(name string, f func(minutes float64) float64, soft bool) path {
	return path{name: name, group: synthetic, interval: 2 * time.Second, soft: soft, short: true, rows: func() []row {
		var rs []row
		for t := time.Duration(0); t <= duration; t += step {
			k := f(t.Minutes())
			r := row{at: t0.Add(t), prices: make(map[string]decimal.Decimal, len(start))}
			for ix, s := range start {
				r.prices[ix] = decimal.NewFromFloat(s * k).Round(5)
			}
			rs = append(rs, r)
		}
		return rs
	}}
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
		synth("crash −25%", func(t float64) float64 { return lin(t, 10, 70, 1, 0.75) }, false),
		synth("wick −12% and back", func(t float64) float64 {
			if t < 30 {
				return 1
			}
			if t < 32 {
				return lin(t, 30, 32, 1, 0.88)
			}
			return lin(t, 32, 40, 0.88, 0.99)
		}, true),
		synth("slow grind −12%, half back", func(t float64) float64 {
			if t < 100 {
				return lin(t, 0, 100, 1, 0.88)
			}
			return lin(t, 100, 120, 0.88, 0.94)
		}, true),
		synth("rally +15%", func(t float64) float64 { return lin(t, 10, 70, 1, 1.15) }, false),
		synth("chop ±4%", func(t float64) float64 { return 1 + 0.04*math.Sin(2*math.Pi*t/10) }, true),
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
				ps = append(ps, synth(fmt.Sprintf("wick %s and back", dir), func(t float64) float64 { return 1 + wick(t, 30, d) }, true))
			}
			ps = append(ps, synth(fmt.Sprintf("two wicks %s", dir), func(t float64) float64 { return 1 + wick(t, 30, d) + wick(t, 70, d) }, true))
		}
	}
	return ps
}

// realSet is a file of real one-minute bars (scripts/testdata/real, its
// README says where each comes from) whose 12-hour windows the accounts
// are run on.
type realSet struct {
	key, name, file string
	// follow names, for each index of the accounts, the set's market
	// whose moves it follows: BTC the set's BTC, the others the set's
	// other market (the alt) when it has one.
	follow map[string]string
	// short is the start of the window -short runs: one through the
	// set's named event (its README): the 2022-01-24 crash and turn, the
	// CPI spike, the ETH sell-off of 2017-09-04.
	short time.Time
}

func realSets() []realSet {
	at := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }
	all := func(btc, alt string) map[string]string {
		return map[string]string{"BTC": btc, "ETH": alt, "SOL": alt, "DOGE": alt}
	}
	return []realSet{
		{"ftx", "FTX BTC perpetual, 2022-01-18..27", "ftx-btc-perp-1m-2022-01-18_2022-01-27.csv.gz", all("BTC", "BTC"), at(2022, 1, 24, 6)},
		{"binance", "Binance BTC and ADA perpetuals, 2022-12-13", "binance-perp-btc-ada-1m-2022-12-13.csv.gz", all("BTC", "ADA"), at(2022, 12, 13, 6)},
		{"coinbase", "Coinbase BTC and ETH, 2017-09-03..04", "coinbase-btc-eth-1m-2017-09-03_2017-09-04.csv.gz", all("BTC", "ETH"), at(2017, 9, 4, 6)},
	}
}

// window is the length of a real path; windows start every windowEvery
// (half-overlapping), from the set's first row while a whole one fits.
const (
	window      = 12 * time.Hour
	windowEvery = 6 * time.Hour
	// realInterval is the guard's tick on a real path: a row every 15 s.
	realInterval = 15 * time.Second
)

// realPaths reads a real set's file in dir and cuts it into windows. On
// each, every index moves as the market it follows does, from its start
// price: the account opened at the window's first price with the notional
// it has on the synthetic paths (see docs/battery.md, "The real paths").
func realPaths(dir string, rs realSet) ([]path, error) {
	times, px, err := readBars(filepath.Join(dir, rs.file))
	if err != nil {
		return nil, err
	}
	for _, m := range rs.follow {
		if px[m] == nil {
			return nil, fmt.Errorf("%s: no market %s", rs.file, m)
		}
	}
	end := times[len(times)-1].Add(realInterval)
	var ps []path
	for from := times[0]; !from.Add(window).After(end); from = from.Add(windowEvery) {
		lo, _ := slices.BinarySearchFunc(times, from, time.Time.Compare)
		hi, _ := slices.BinarySearchFunc(times, from.Add(window), time.Time.Compare)
		ps = append(ps, path{
			name:     fmt.Sprintf("%s %s–%s", rs.key, from.Format("01-02 15:04"), from.Add(window).Format("15:04")),
			group:    rs.key,
			interval: realInterval,
			short:    from.Equal(rs.short),
			rows: func() []row {
				first := map[string]float64{}
				for m := range px {
					for i := lo; i < hi; i++ {
						if !math.IsNaN(px[m][i]) {
							first[m] = px[m][i]
							break
						}
					}
				}
				rows := make([]row, 0, hi-lo)
				for i := lo; i < hi; i++ {
					r := row{at: times[i], prices: make(map[string]decimal.Decimal, len(indexes))}
					for _, ix := range indexes {
						m := rs.follow[ix]
						p := px[m][i]
						if math.IsNaN(p) { // before the market's first row in the window
							p = first[m]
						}
						r.prices[ix] = decimal.NewFromFloat(start[ix] * p / first[m]).Round(5)
					}
					rows = append(rows, r)
				}
				return rows
			},
		})
	}
	return ps, nil
}

// readBars reads a gzipped CSV of prices (time,name,price): the times in
// order and, per market, its price at each (the last known one when the
// market has no row then, NaN before its first).
func readBars(name string) ([]time.Time, map[string][]float64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	cr := csv.NewReader(zr)
	cr.FieldsPerRecord = 3
	var times []time.Time
	px := map[string][]float64{}
	for line := 1; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		if line == 1 && rec[0] == "time" {
			continue
		}
		at, err := time.Parse(time.RFC3339, rec[0])
		if err != nil {
			return nil, nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		p, err := strconv.ParseFloat(rec[2], 64)
		if err != nil || p <= 0 {
			return nil, nil, fmt.Errorf("%s:%d: price %q", name, line, rec[2])
		}
		if n := len(times); n == 0 || at.After(times[n-1]) {
			times = append(times, at)
			for m, s := range px { // carried forward
				px[m] = append(s, s[len(s)-1])
			}
		} else if !at.Equal(times[n-1]) {
			return nil, nil, fmt.Errorf("%s:%d: time goes backwards", name, line)
		}
		s, ok := px[rec[1]]
		if !ok {
			s = make([]float64, len(times))
			for i := range s {
				s[i] = math.NaN()
			}
		}
		s[len(times)-1] = p
		px[rec[1]] = s
	}
	if err := zr.Close(); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(times) == 0 {
		return nil, nil, fmt.Errorf("%s: no rows", name)
	}
	return times, px, nil
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
	// peer is the one-line stop every other set is judged against.
	peer bool
}

// ruleSets are the rule files the battery runs side by side, each on every
// path and account: adding a rule set is one line.
//   - the example rules as shipped (cuts, isolation, and reduce_position
//     close to liquidation and on the account rule);
//   - the same without reduce_position, derived from the file when the
//     battery runs (so the two never drift): the goal "avoid every
//     liquidation a leverage cut or an isolation can avoid" is theirs;
//   - a reduce-exposure set: no leverage cut, no isolation, reduce_position
//     on distance tiers and on the account rules;
//   - the peer (last): the one-line stop a trader would write instead,
//     closing a position 2% from its liquidation price. It runs with every
//     choice of sets, -short and -rules included.
func ruleSets() []ruleSet {
	return []ruleSet{
		{name: "rules.example.yaml", file: "rules.example.yaml"},
		{name: "rules.example.yaml without reduce_position", file: "rules.example.yaml", dropReduce: true},
		{name: "scripts/testdata/rules.reduce.yaml (reduce exposure)", file: "scripts/testdata/rules.reduce.yaml"},
		stop,
	}
}

// stop is the peer: one rule closing a position 2% from its liquidation price.
var stop = ruleSet{name: "the one-line stop (scripts/testdata/rules.stop.yaml)", file: "scripts/testdata/rules.stop.yaml", peer: true}

// step is the time between two rows of a synthetic path's prices: a wick
// of two minutes needs more than one row a minute.
const step = 10 * time.Second

// totals sums a rule set's runs on one group of paths.
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
	// which nothing would be liquidated without the guard and the account
	// never came within nearLiquidation of it: what the guard costs on a
	// day it was not needed (a gain counts as 0).
	costs []float64
	// worstRun names the quiet run that cost the most (the first of them).
	worstRun string
	// costlyRuns names those that cost more than maxQuietCost.
	costlyRuns []string
	// near are the runs in which nothing would be liquidated without the
	// guard but the account came within nearLiquidation of it, listed
	// apart: what the guard did there is judged by the reader.
	near []nearRun
	// closer are the calls that left a position closer to its
	// liquidation price, with their run and what became of it;
	// closerLost counts those whose position was then liquidated.
	closer     []string
	closerLost int
}

// nearRun is a run where nothing would be liquidated without the guard,
// but the account came within nearLiquidation of it.
type nearRun struct {
	Path    string  `json:"path"`
	Account string  `json:"account"`
	Nearest float64 `json:"nearestApproach"` // the account measure at its worst without the guard
	Cost    float64 `json:"cost"`            // the guard's cost, a fraction of the starting equity (a gain is 0)
}

// maxQuietCost is the most a run where nothing would be liquidated may
// cost (a fraction of the starting equity): a guard that costs more on an
// ordinary day is switched off by its owner.
const maxQuietCost = 0.05

// nearLiquidation is how close to its liquidation (the account measure
// at its worst without the guard) a run where nothing would be liquidated
// may come and still count as an ordinary day: closer, it is listed apart.
const nearLiquidation = 0.01

func main() {
	rulesFlag := flag.String("rules", "", "rules or config files to test, comma-separated (default: the battery's rule sets); the one-line stop runs beside them")
	short := flag.Bool("short", false, "the first rule set and the stop, on the synthetic paths and one window of each real set (for CI): its rows are the full run's, byte for byte")
	inputs := flag.String("inputs", "", "also write each run's scenario and prices into `DIR` (PATH-ACCOUNT.scenario.json, .csv), to replay one run with riskguard backtest")
	groupsFlag := flag.String("paths", "", "the groups of paths to run, comma-separated: synthetic, ftx, binance, coinbase (default: all)")
	realDir := flag.String("real", filepath.Join("scripts", "testdata", "real"), "the real sets' `DIR`")
	parallel := flag.Int("parallel", 2, "backtests run at once")
	summary := flag.String("summary", "", "also write the measures and the verdicts against the stop as JSON into `FILE`")
	flag.Parse()
	sets := ruleSets()
	if *rulesFlag != "" {
		sets = nil
		for _, f := range strings.Split(*rulesFlag, ",") {
			sets = append(sets, ruleSet{name: f, file: f})
		}
		sets = append(sets, stop)
	}
	if *short {
		sets = []ruleSet{sets[0], stop}
	}
	want := func(g string) bool { return *groupsFlag == "" || slices.Contains(strings.Split(*groupsFlag, ","), g) }
	var ps []path
	var groups []group
	if want(synthetic) {
		groups = append(groups, group{synthetic, fmt.Sprintf("the synthetic paths (%d of two hours, a row every %g s, a tick every 2 s)", len(paths()), step.Seconds())})
		ps = append(ps, paths()...)
	}
	for _, rs := range realSets() {
		if !want(rs.key) {
			continue
		}
		rp, err := realPaths(*realDir, rs)
		check(err)
		n := len(rp)
		if *short {
			rp = slices.DeleteFunc(rp, func(p path) bool { return !p.short })
		}
		groups = append(groups, group{rs.key, fmt.Sprintf("%s (%d of %d half-overlapping 12-hour windows, a row every 15 s, a tick every 15 s)", rs.name, len(rp), n)})
		ps = append(ps, rp...)
	}
	if len(groups) == 0 {
		fail("-paths %q names no group of paths", *groupsFlag)
	}
	dir, err := os.MkdirTemp("", "riskguard-battery-")
	check(err)
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "riskguard")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/riskguard").CombinedOutput(); err != nil {
		fail("go build: %v\n%s", err, out)
	}
	// files are each set's file as each interval of the paths runs it:
	// the engine's own interval (engine.interval) is the path's, so that a
	// guard looking every 15 s is configured to (how long after its own
	// order a change is its own, how stale a read may be, follow it).
	files := make([]map[time.Duration]string, len(sets))
	for i, set := range sets {
		files[i] = map[time.Duration]string{}
		for _, p := range ps {
			if _, ok := files[i][p.interval]; ok {
				continue
			}
			f := filepath.Join(dir, fmt.Sprintf("rules-%d-%s.yaml", i, p.interval))
			check(derive(set.file, f, set.dropReduce, p.interval))
			files[i][p.interval] = f
		}
	}
	if *inputs != "" {
		for _, p := range ps {
			rows := p.rows()
			for _, a := range accounts() {
				base := filepath.Join(*inputs, strings.NewReplacer(" ", "_", "%", "", ",", "", "±", "pm", "−", "-", "+", "", "–", "-", ":", "").Replace(p.name+"-"+a.name))
				check(writeScenario(base+".scenario.json", a))
				check(writeRows(base+".csv", rows))
			}
		}
	}
	fmt.Fprintf(os.Stderr, "battery: %d backtests (%d rule sets × %d paths × %d accounts), %d at a time\n", len(sets)*len(ps)*len(accounts()), len(sets), len(ps), len(accounts()), max(1, *parallel))
	res := runAll(bin, dir, files, ps, *parallel)
	or := newOracle()
	bad, peerBad := 0, 0 // the stop's problems are printed, not an exit status: it is the measure, not the product
	var verdicts []verdict
	var sums []groupSummary
	for gi, g := range groups {
		if gi > 0 {
			fmt.Println()
		}
		fmt.Printf("== %s\n", g.name)
		ts := make([]totals, len(sets))
		for i, set := range sets {
			fmt.Println()
			ts[i] = report(set, set.file, g.key, ps, res[i], res[len(sets)-1], or)
			if set.peer {
				peerBad += ts[i].problems
			} else {
				bad += ts[i].problems
			}
		}
		vs, sum := compare(g, sets, ts)
		verdicts = append(verdicts, vs...)
		sums = append(sums, sum)
	}
	or.printUnsavable()
	fmt.Println("\nverdicts against the one-line stop (avoided ≥ the stop's, summed equity Δ ≥ the stop's, no self-inflicted liquidation, and where nothing would be liquidated and the account never came within 1% of it: no more runs over 5% of equity and no worse a worst run):")
	for _, v := range verdicts {
		fmt.Println(v)
	}
	if *summary != "" {
		b, err := json.MarshalIndent(struct {
			Groups   []groupSummary `json:"groups"`
			Verdicts []verdict      `json:"verdicts"`
		}{sums, verdicts}, "", "  ")
		check(err)
		check(os.WriteFile(*summary, append(b, '\n'), 0o644))
	}
	if peerBad > 0 {
		fmt.Printf("\nthe one-line stop's runs had %d problems (above, in its goals), not counted in the exit status\n", peerBad)
	}
	if bad > 0 {
		fmt.Printf("\n%d problems: a self-inflicted liquidation or an impossible account\n", bad)
		os.Exit(1)
	}
	fmt.Println("\nno self-inflicted liquidation; every account consistent")
}

// group is a set of paths whose measures are summed together.
type group struct{ key, name string }

// runAll runs every rule file on every path and account, parallel at a
// time, and returns the summaries by file, path and account.
func runAll(bin, dir string, files []map[time.Duration]string, ps []path, parallel int) [][][]backtest.JSONSummary {
	as := accounts()
	res := make([][][]backtest.JSONSummary, len(files))
	for i := range res {
		res[i] = make([][]backtest.JSONSummary, len(ps))
		for j := range res[i] {
			res[i][j] = make([]backtest.JSONSummary, len(as))
		}
	}
	type job struct{ path, file, acct int }
	jobs := make(chan job)
	errs := make(chan error, parallel)
	var wg sync.WaitGroup
	for w := range max(1, parallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			csv := filepath.Join(dir, fmt.Sprintf("prices-%d.csv", w))
			sc := filepath.Join(dir, fmt.Sprintf("scenario-%d.json", w))
			written := -1 // the path whose rows csv holds
			for j := range jobs {
				p, a := ps[j.path], as[j.acct]
				if written != j.path {
					if err := writeRows(csv, p.rows()); err != nil {
						errs <- err
						return
					}
					written = j.path
				}
				if err := writeScenario(sc, a); err != nil {
					errs <- err
					return
				}
				cmd := exec.Command(bin, "backtest", "--config", files[j.file][p.interval], "--scenario", sc, "--csv", csv, "--interval", p.interval.String(), "--json", "--log-level", "error")
				cmd.Env = append(os.Environ(), "RISKGUARD_API_KEY=", "RISKGUARD_API_SECRET=")
				out, err := cmd.Output()
				if err == nil {
					err = json.Unmarshal(out, &res[j.file][j.path][j.acct])
				}
				if err != nil {
					errs <- fmt.Errorf("%s / %s / %s: %w\n%s", files[j.file][p.interval], p.name, a.name, err, out)
					return
				}
			}
		}()
	}
	go func() {
		defer close(jobs)
		for pi := range ps {
			for ai := range as {
				for fi := range files {
					select {
					case jobs <- job{pi, fi, ai}:
					case err := <-errs:
						errs <- err
						return
					}
				}
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		fail("%v", err)
	default:
	}
	return res
}

// report prints a rule set's table on the paths of one group — each run
// beside the stop's (peer) — then its skips, totals, goals and judgement,
// and returns its totals.
func report(set ruleSet, rulesFile, g string, ps []path, res, peer [][]backtest.JSONSummary, or *oracle) totals {
	fmt.Printf("%s:\n", set.name)
	reduces, err := hasReduce(rulesFile)
	check(err)
	reduces = reduces && !set.dropReduce
	t := runTable(set, g, ps, res, peer, or)
	t.printSkips()
	t.printGoals(reduces, g)
	return t
}

// runTable prints a group's table, a row per path and account, and sums
// its runs into the totals.
func runTable(set ruleSet, g string, ps []path, res, peer [][]backtest.JSONSummary, or *oracle) totals {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	head := "path\taccount\tliquidated without\twith guard\tavoided\tself-inflicted\tequity Δ\tΔ % of start\tworst measure without → with\tskipped"
	if !set.peer {
		head += "\tthe stop: with it\tits Δ"
	}
	fmt.Fprintln(tw, head)
	t := totals{delta: decimal.Zero, start: decimal.Zero, skips: map[[2]string]int{}}
	for pi, p := range ps {
		if p.group != g {
			continue
		}
		for ai, a := range accounts() {
			s, v := res[pi][ai], res[pi][ai].Verdict
			mark, skipped := t.add(p, a, s, or)
			line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s → %s\t%d", p.name, a.name, list(s.Without.Liquidations), list(s.With.Liquidations),
				list(v.AvoidedSymbols), list(v.CausedSymbols), v.EquityDelta.StringFixed(0), share(v.EquityDelta, v.EquityStart),
				measure(v.WorstMeasureWithout), measure(v.WorstMeasureWith), skipped)
			if !set.peer {
				line += fmt.Sprintf("\t%s\t%s", list(peer[pi][ai].With.Liquidations), peer[pi][ai].Verdict.EquityDelta.StringFixed(0))
			}
			fmt.Fprintln(tw, line+mark)
		}
	}
	tw.Flush()
	return t
}

// add sums one run of path p on account a into the totals; it returns
// the row's mark (a problem the row shows) and the actions skipped.
func (t *totals) add(p path, a account, s backtest.JSONSummary, or *oracle) (mark string, skipped int) {
	v := s.Verdict
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
	for _, sk := range v.Skips {
		skipped += sk.Count
		t.skips[[2]string{sk.Action, sk.Reason}] += sk.Count
	}
	if len(s.Without.Liquidations) == 0 && v.EquityStart.IsPositive() {
		c := math.Max(0, -v.EquityDelta.Div(v.EquityStart).InexactFloat64())
		if w := v.WorstMeasureWithout; w != nil && *w < nearLiquidation {
			t.near = append(t.near, nearRun{Path: p.name, Account: a.name, Nearest: *w, Cost: c})
		} else {
			if c > 0 && !slices.ContainsFunc(t.costs, func(o float64) bool { return o >= c }) {
				t.worstRun = fmt.Sprintf("%s on %s", p.name, a.name)
			}
			t.costs = append(t.costs, c)
			if c > maxQuietCost {
				t.costlyRuns = append(t.costlyRuns, fmt.Sprintf("%s on %s (%.1f%%, %s from its liquidation without the guard)", p.name, a.name, c*100, measure(v.WorstMeasureWithout)))
			}
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
	return mark, skipped
}

// printSkips prints the actions skipped, by reason, most first.
func (t *totals) printSkips() {
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
}

// printGoals prints the totals, what the set costs where nothing would be
// liquidated, the goals met or not, and the judgement.
func (t *totals) printGoals(reduces bool, g string) {
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
		worst := ""
		if t.worstRun != "" {
			worst = " (" + t.worstRun + ")"
		}
		fmt.Printf("what it costs where nothing would be liquidated and the account never came within %.0f%% of it (%d runs): %d over 1%% of equity, worst %.1f%%%s, median %.1f%%\n",
			nearLiquidation*100, len(cs), over, cs[len(cs)-1]*100, worst, cs[len(cs)/2]*100)
	}
	if len(t.near) > 0 {
		fmt.Printf("where nothing would be liquidated but the account came within %.0f%% of it without the guard (%d runs, apart):\n", nearLiquidation*100, len(t.near))
		for _, n := range t.near {
			fmt.Printf("  %s on %s: nearest approach %.2f%%, cost %.1f%%\n", n.Path, n.Account, n.Nearest*100, n.Cost*100)
		}
	}
	fmt.Println("goals:")
	fmt.Printf("  no self-inflicted liquidation: %s (%d)\n", goal(t.caused == 0), t.caused)
	fmt.Printf("  summed equity Δ not negative: %s (%s)\n", goal(!t.delta.IsNegative()), t.delta.StringFixed(0))
	fmt.Printf("  every liquidation a leverage cut or an isolation can avoid, avoided: %s (%d of %d%s)\n",
		goal(t.savedOfSavable == t.savable), t.savedOfSavable, t.savable, strings.Replace(missing(t.missed), "not avoided", "short", 1))
	if reduces && g == synthetic {
		fmt.Printf("  with reduce_position, every liquidation on a cross account in the wick, grind and chop avoided: %s (%d of %d%s)\n",
			goal(t.crossSoftSaved == t.crossSoft), t.crossSoftSaved, t.crossSoft, missing(t.crossSoftMissed))
	}
	fmt.Printf("  no run where nothing would be liquidated (and the account never came within %.0f%% of it) costs more than %.0f%% of equity: %s (%d%s)\n",
		nearLiquidation*100, maxQuietCost*100, goal(len(t.costlyRuns) == 0), len(t.costlyRuns), strings.Replace(missing(t.costlyRuns), "not avoided", "over", 1))
	fmt.Printf("  every liquidation said as one by the guard (a critical liquidated record), none said that was not: %s (%d of %d%s)\n",
		goal(len(t.unsaid) == 0), t.said, t.liquidations, strings.Replace(missing(t.unsaid), "not avoided", "differ", 1))
	closer := "; no call left a position closer to its liquidation price"
	if len(t.closer) > 0 {
		closer = fmt.Sprintf("; %d calls left a position closer to its liquidation price, %d of them then liquidated:\n  %s", len(t.closer), t.closerLost, strings.Join(t.closer, "\n  "))
	}
	fmt.Printf("judgement: %s%s\n", backtest.Judge(t.avoided, t.caused, t.delta, t.start), closer)
}

// measures are a rule set's figures on one group of paths, as the
// summary file has them.
type measures struct {
	Set               string          `json:"set"`
	Peer              bool            `json:"peer,omitempty"`
	Runs              int             `json:"runs"`
	LiquidatedWithout int             `json:"liquidatedWithout"`
	Avoided           int             `json:"avoided"`
	SelfInflicted     int             `json:"selfInflicted"`
	EquityDelta       decimal.Decimal `json:"equityDelta"`
	EquityStart       decimal.Decimal `json:"equityStart"`
	// QuietRuns are the runs where nothing would be liquidated without
	// the guard and the account never came within nearLiquidation of it;
	// Over5 those that cost more than maxQuietCost, Worst the largest
	// cost (fractions of the starting equity).
	QuietRuns int       `json:"quietRuns"`
	Over5     int       `json:"quietRunsOver5Percent"`
	Worst     float64   `json:"quietWorstCost"`
	WorstRun  string    `json:"quietWorstRun"` // "" when no quiet run cost anything
	Near      []nearRun `json:"near"`
}

// measuresOf are the totals as measures.
func measuresOf(set ruleSet, t totals) measures {
	m := measures{Set: set.name, Peer: set.peer, Runs: t.runs, LiquidatedWithout: t.without, Avoided: t.avoided, SelfInflicted: t.caused,
		EquityDelta: t.delta, EquityStart: t.start, QuietRuns: len(t.costs), Over5: len(t.costlyRuns), WorstRun: t.worstRun, Near: t.near}
	for _, c := range t.costs {
		m.Worst = math.Max(m.Worst, c)
	}
	if m.Near == nil {
		m.Near = []nearRun{}
	}
	return m
}

// groupSummary is one group's measures, every rule set.
type groupSummary struct {
	Group    string     `json:"group"`
	Name     string     `json:"name"`
	Measures []measures `json:"measures"`
}

// verdict is a rule set against the stop on one group of paths: it beats
// the stop when it meets every criterion and is ahead on one, meets it
// when it is level on all, and falls short when it misses one.
type verdict struct {
	Set   string `json:"set"`
	Group string `json:"group"`
	// Result is "beats", "meets" or "falls short".
	Result string `json:"result"`
	// The criteria: avoided ≥ the stop's, summed equity Δ ≥ the stop's,
	// no self-inflicted liquidation, and the cost goal (no more quiet
	// runs over 5% and no worse a worst quiet run than the stop).
	Avoided         int             `json:"avoided"`
	StopAvoided     int             `json:"stopAvoided"`
	AvoidedOK       bool            `json:"avoidedOK"`
	EquityDelta     decimal.Decimal `json:"equityDelta"`
	StopEquityDelta decimal.Decimal `json:"stopEquityDelta"`
	EquityOK        bool            `json:"equityOK"`
	SelfInflicted   int             `json:"selfInflicted"`
	SelfInflictedOK bool            `json:"selfInflictedOK"`
	Over5           int             `json:"quietRunsOver5Percent"`
	StopOver5       int             `json:"stopQuietRunsOver5Percent"`
	Worst           float64         `json:"quietWorstCost"`
	StopWorst       float64         `json:"stopQuietWorstCost"`
	CostOK          bool            `json:"costOK"`
}

// String is the verdict's line: fixed words, one per criterion.
func (v verdict) String() string {
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "NO"
	}
	return fmt.Sprintf("  %s vs the stop on %s: %s (avoided %d ≥ %d %s; equity Δ %s ≥ %s %s; self-inflicted %d = 0 %s; cost: over 5%% %d ≤ %d, worst %.1f%% ≤ %.1f%% %s)",
		v.Set, v.Group, v.Result, v.Avoided, v.StopAvoided, yes(v.AvoidedOK), v.EquityDelta.StringFixed(0), v.StopEquityDelta.StringFixed(0), yes(v.EquityOK),
		v.SelfInflicted, yes(v.SelfInflictedOK), v.Over5, v.StopOver5, v.Worst*100, v.StopWorst*100, yes(v.CostOK))
}

// compare prints the group's rule sets side by side with the stop (the
// last set) and returns each other set's verdict against it.
func compare(g group, sets []ruleSet, ts []totals) ([]verdict, groupSummary) {
	sum := groupSummary{Group: g.key, Name: g.name}
	for i, set := range sets {
		sum.Measures = append(sum.Measures, measuresOf(set, ts[i]))
	}
	fmt.Printf("\n%s, side by side:\n", g.name)
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "rule set\tavoided\tself-inflicted\tsummed equity Δ\tquiet runs\tover 5%%\tworst\twithin %.0f%%, apart: worst cost\tthe worst quiet run\n", nearLiquidation*100)
	for _, m := range sum.Measures {
		nearWorst := 0.0
		for _, n := range m.Near {
			nearWorst = math.Max(nearWorst, n.Cost)
		}
		fmt.Fprintf(tw, "%s\t%d of %d\t%d\t%s (%s)\t%d\t%d\t%.1f%%\t%d: %.1f%%\t%s\n", m.Set, m.Avoided, m.LiquidatedWithout, m.SelfInflicted, m.EquityDelta.StringFixed(0),
			share(m.EquityDelta, m.EquityStart), m.QuietRuns, m.Over5, m.Worst*100, len(m.Near), nearWorst*100, cmp.Or(m.WorstRun, "-"))
	}
	tw.Flush()
	peer := sum.Measures[len(sum.Measures)-1]
	var vs []verdict
	for _, m := range sum.Measures[:len(sum.Measures)-1] {
		v := verdict{Set: m.Set, Group: g.key, Avoided: m.Avoided, StopAvoided: peer.Avoided, EquityDelta: m.EquityDelta, StopEquityDelta: peer.EquityDelta,
			SelfInflicted: m.SelfInflicted, Over5: m.Over5, StopOver5: peer.Over5, Worst: m.Worst, StopWorst: peer.Worst}
		v.AvoidedOK = m.Avoided >= peer.Avoided
		v.EquityOK = !m.EquityDelta.LessThan(peer.EquityDelta)
		v.SelfInflictedOK = m.SelfInflicted == 0
		v.CostOK = m.Over5 <= peer.Over5 && m.Worst <= peer.Worst
		ahead := m.Avoided > peer.Avoided || m.EquityDelta.GreaterThan(peer.EquityDelta) || m.Over5 < peer.Over5 || m.Worst < peer.Worst
		switch {
		case !v.AvoidedOK || !v.EquityOK || !v.SelfInflictedOK || !v.CostOK:
			v.Result = "falls short"
		case ahead:
			v.Result = "beats"
		default:
			v.Result = "meets"
		}
		vs = append(vs, v)
	}
	return vs, sum
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

// duration is the length of every synthetic path.
const duration = 2 * time.Hour

// t0 is the time of every synthetic path's first row.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// writeRows writes a path's rows, one per index and time.
func writeRows(name string, rows []row) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "time,name,price")
	for _, r := range rows {
		for _, ix := range indexes {
			fmt.Fprintf(w, "%s,%s,%s\n", r.at.Format(time.RFC3339), ix, r.prices[ix])
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
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
	rows := p.rows()
	now := rows[0].at
	sc := scenario(a)
	first := rows[0].prices
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
	for _, r := range rows[1:] {
		now = r.at
		prices := r.prices
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

// derive writes the rules or config file in to out with engine.interval
// set to interval, and without its reduce_position actions when
// dropReduce.
func derive(in, out string, dropReduce bool, interval time.Duration) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return fmt.Errorf("%s: not a mapping", in)
	}
	top := doc.Content[0]
	eng := mapValue(top, "engine")
	if eng == nil {
		eng = &yaml.Node{Kind: yaml.MappingNode}
		top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "engine"}, eng)
	}
	if v := mapValue(eng, "interval"); v != nil {
		v.Value = interval.String()
	} else {
		eng.Content = append(eng.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "interval"}, &yaml.Node{Kind: yaml.ScalarNode, Value: interval.String()})
	}
	for _, rule := range ruleNodes(&doc) {
		acts := mapValue(rule, "actions")
		if !dropReduce || acts == nil || acts.Kind != yaml.SequenceNode {
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
