package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

// demoFlags are demo's flags.
type demoFlags struct {
	configPath, scenario, dir, listen, logFormat, logLevel string
	duration, interval                                     time.Duration
	seed                                                   int64
	dryRun                                                 bool
}

// runDemo runs the rules against two simulated exchanges on the same
// prices, one guarded and one left alone, and prints both at the end.
func (m *Main) runDemo(ctx context.Context, args []string) error {
	f, err := m.parseDemoFlags(args)
	if err != nil {
		return err
	}
	logger, err := m.newLogger(f.logFormat, f.logLevel)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard demo:", err)
		return exitCode(2)
	}
	cfg, err := config.Load(f.configPath, m.Getenv, config.Options{Venues: m.venues.specs()})
	if err != nil {
		fmt.Fprintln(m.Stderr, err)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(m.Stderr, "riskguard demo: run it from the repository root, or pass --config")
		}
		return exitCode(1)
	}

	// Two exchanges on the same prices: the guard acts on the first; the
	// second is the same account with nobody acting, what would have
	// happened without the guard. They start at the same instant (their
	// price paths are laid on a grid from it) and are stepped together.
	start := time.Now()
	ex, err := newDemoExchange(start, f.scenario, f.seed)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard demo:", err)
		return exitCode(1)
	}
	without, err := newDemoExchange(start, f.scenario, f.seed)
	if err != nil {
		return fmt.Errorf("simulated exchange: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: ex, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(ctx, f.duration)
	defer cancel()
	stepped := stepDemo(ctx, ex, without)

	ownDir := f.dir == ""
	if ownDir {
		if f.dir, err = os.MkdirTemp("", "riskguard-demo-"); err != nil {
			return err
		}
		// The demo's own directory goes with it; --dir keeps the files.
		defer os.RemoveAll(f.dir)
	}
	fromShell := m.demoConfig(cfg, f, "http://"+ln.Addr().String())
	fmt.Fprintf(m.Stdout, "riskguard demo: %d rules from %s, for %s (dry run %t)\n",
		len(cfg.Rules.Rules), f.configPath, f.duration, f.dryRun || cfg.Engine.DryRun)
	fmt.Fprintf(m.Stdout, "simulated exchange: %s (key %s, secret %s)\n", cfg.Exchange.BaseURL, sim.DefaultKey, sim.DefaultSecret)
	fmt.Fprintf(m.Stdout, "audit log: %s\n", cfg.Engine.AuditLog)

	var sum demoSummary
	onTick := func(rep *engine.TickReport, _ error) {
		sum.add(rep)
		if rep != nil && (sum.ticks == 1 || len(rep.Transitions)+len(rep.Actions) > 0 || sum.ticks%10 == 0) {
			printTick(m.Stdout, sum.ticks, rep.Time.Sub(start), rep, cfg.Engine.IndexNames, ex, sum.active)
		}
	}
	g, err := newGuard(cfg, m.venues, logger, f.dryRun, onTick)
	if err != nil {
		return err
	}
	defer g.close(ctx, logger)
	sum.active = g.engine.Active
	if f.listen != "off" && f.listen != "" {
		closePage, err := m.serveDemoPage(g, logger, f.listen, cfg.ControlToken, fromShell)
		if err != nil {
			return err
		}
		defer closePage()
	}
	if err := g.engine.Run(ctx); err != nil {
		return err
	}
	<-stepped
	fmt.Fprintf(m.Stdout, "\n── at the end, t+%s %s\n", time.Since(start).Round(time.Second), strings.Repeat("─", 40))
	printPositions(m.Stdout, ex.Positions(), ex.IndexPrices(), symbolNames(ex), cfg.Engine.IndexNames, ex.OpenOrders)
	printRules(m.Stdout, g.engine.Active())
	sum.print(m.Stdout)
	printVerdict(m.Stdout, start, ex, without, f.dryRun || cfg.Engine.DryRun)
	if ownDir {
		fmt.Fprintln(m.Stdout, "(the demo's audit log and state file were removed; --dir DIR keeps them)")
	}
	return nil
}

// parseDemoFlags parses demo's flags; a usage error is said and is exit
// code 2.
func (m *Main) parseDemoFlags(args []string) (*demoFlags, error) {
	fs := m.newFlags("demo", "demo [--duration 90s] [--interval 1s] [--config FILE] [--scenario FILE] [--seed N] [--dry-run] [--dir DIR] [--listen 127.0.0.1:0]", commands()["demo"].summary+
		"\n\nIt runs the rules twice on the same prices: with the guard acting, and without anybody acting;\nat the end it shows both side by side. The status page is served on --listen while it runs.")
	f := &demoFlags{}
	fs.StringVar(&f.configPath, "config", "rules.example.yaml", "rules file to run against the simulated exchange")
	fs.DurationVar(&f.duration, "duration", 90*time.Second, "how long the demo runs (with the built-in scenario, XSOL is liquidated at about 65 s without the guard)")
	fs.DurationVar(&f.interval, "interval", time.Second, "time between two ticks")
	fs.Int64Var(&f.seed, "seed", sim.DefaultSeed, "seed of the simulated price paths")
	fs.StringVar(&f.scenario, "scenario", "", "scenario file for the simulated exchange (default: the built-in one)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "log the actions instead of sending them")
	fs.StringVar(&f.dir, "dir", "", "where the audit log and state file go (default: a new temporary directory)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:0", "`address` of the status page and control API (port 0 picks a free one; \"off\" serves none)")
	fs.StringVar(&f.logFormat, "log-format", "auto", "log format: text, json, or auto")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if f.duration <= 0 || f.interval <= 0 {
		fmt.Fprintln(m.Stderr, "riskguard demo: --duration and --interval must be positive")
		return nil, exitCode(2)
	}
	return f, nil
}

// newDemoExchange is a simulated exchange whose price paths start at
// start: two made with the same start and seed move on the same prices.
func newDemoExchange(start time.Time, scenario string, seed int64) (*sim.Exchange, error) {
	var sc *sim.Scenario
	if scenario != "" {
		loaded, err := sim.LoadScenario(scenario)
		if err != nil {
			return nil, err
		}
		sc = loaded
	}
	building := true // sim.New reads its start from the clock
	clock := func() time.Time {
		if building {
			return start
		}
		return time.Now()
	}
	ex, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: seed, Scenario: sc, Now: clock})
	building = false
	return ex, err
}

// stepDemo moves both exchanges' prices on together until ctx is done;
// the channel closes when it stopped.
func stepDemo(ctx context.Context, ex, without *sim.Exchange) <-chan struct{} {
	stepped := make(chan struct{})
	go func() {
		defer close(stepped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				now := time.Now()
				ex.Step(now)
				without.Step(now)
			}
		}
	}()
	return stepped
}

// demoConfig points cfg at the simulated exchange at baseURL, with the
// demo's interval, files in f.dir and control token, and reports whether
// the token is the operator's own.
func (m *Main) demoConfig(cfg *config.Config, f *demoFlags, baseURL string) (fromShell bool) {
	cfg.Exchange.BaseURL = baseURL
	cfg.Exchange.APIKey, cfg.Exchange.APISecret = sim.DefaultKey, sim.DefaultSecret
	cfg.Engine.Interval = f.interval
	cfg.Listen = ""
	cfg.Engine.AuditLog = filepath.Join(f.dir, "audit.jsonl")
	cfg.Engine.StateFile = filepath.Join(f.dir, "state.json")
	// The demo's control token is made for the run and printed: the
	// commands it shows work as they are, and nothing outlives the demo.
	// The operator's own (RISKGUARD_CONTROL_TOKEN) is never printed: into
	// scroll-back, CI logs and history; the command names the variable.
	if cfg.ControlToken = strings.TrimSpace(m.Getenv("RISKGUARD_CONTROL_TOKEN")); cfg.ControlToken == "" {
		cfg.ControlToken = rand.Text()
		return false
	}
	return true
}

// serveDemoPage serves g's status page and control API on listen while the
// demo runs, and says how to reach them; the function returned stops it.
func (m *Main) serveDemoPage(g *guard, logger *slog.Logger, listen, token string, fromShell bool) (func() error, error) {
	page, err := g.web(logger)
	if err != nil {
		return nil, err
	}
	pln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintf(m.Stderr, "riskguard demo: --listen %s: %v\n", listen, err)
		return nil, exitCode(1)
	}
	psrv := &http.Server{Handler: page, ReadHeaderTimeout: 5 * time.Second}
	go psrv.Serve(pln)
	addr := pln.Addr().String()
	fmt.Fprintf(m.Stdout, "status page: http://%s/ (while the demo runs)\n", addr)
	self := m.invocation()
	if fromShell {
		fmt.Fprintf(m.Stdout, "control, from another shell with the same RISKGUARD_CONTROL_TOKEN exported (pause, resume, silence, ack):\n  %s pause --addr %s\n", self, addr)
	} else {
		// Two lines, each within the demo's width whatever the
		// program is called.
		fmt.Fprintf(m.Stdout, "control, from another shell (pause, resume, silence, ack):\n  export RISKGUARD_CONTROL_TOKEN=%s\n  %s pause --addr %s\n", token, self, addr)
	}
	return psrv.Close, nil
}

// printVerdict compares the run with the guard to the same run without it:
// the liquidations of each, the account's equity, and what the guard
// changed.
func printVerdict(w io.Writer, start time.Time, with, without *sim.Exchange, dryRun bool) {
	title := "── with and without the guard, on the same prices "
	fmt.Fprintf(w, "\n%s%s\n", title, strings.Repeat("─", max(0, 72-len([]rune(title)))))
	liqs := func(ex *sim.Exchange) (string, map[string]bool) {
		set := map[string]bool{}
		var parts []string
		for _, l := range ex.Liquidations() {
			set[l.Symbol] = true
			parts = append(parts, fmt.Sprintf("%s at %s (t+%s)", l.Symbol, roundPrice(l.Price), l.Time.Sub(start).Round(time.Second)))
		}
		if len(parts) == 0 {
			return "none", set
		}
		return strings.Join(parts, ", "), set
	}
	withText, withSet := liqs(with)
	withoutText, withoutSet := liqs(without)
	eqWith, eqWithout := with.Equity(), without.Equity()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tWITH THE GUARD\tWITHOUT (nobody acting)")
	fmt.Fprintf(tw, "liquidated\t%s\t%s\n", withText, withoutText)
	fmt.Fprintf(tw, "equity\t%s\t%s\n", eqWith.StringFixed(2), eqWithout.StringFixed(2))
	tw.Flush()

	var avoided, caused []string
	for _, s := range slices.Sorted(maps.Keys(withoutSet)) {
		if !withSet[s] {
			avoided = append(avoided, s)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(withSet)) {
		if !withoutSet[s] {
			caused = append(caused, s)
		}
	}
	diff := eqWith.Sub(eqWithout)
	sign := "+"
	if diff.IsNegative() {
		sign = ""
	}
	var verdict string
	switch {
	case dryRun:
		verdict = "dry run: the guard sent nothing, so both runs are the same; run without --dry-run to see it act"
	case len(avoided) > 0 && len(caused) == 0:
		verdict = fmt.Sprintf("the guard avoided the liquidation of %s (equity %s%s)", strings.Join(avoided, ", "), sign, diff.StringFixed(2))
	case len(caused) > 0:
		verdict = fmt.Sprintf("%s liquidated with the guard and not without it: read the actions above (equity %s%s)", strings.Join(caused, ", "), sign, diff.StringFixed(2))
	case len(withSet) > 0:
		verdict = fmt.Sprintf("liquidated with and without the guard (equity %s%s)", sign, diff.StringFixed(2))
	case diff.IsZero():
		verdict = "no liquidation either way, and the guard changed nothing of the equity"
	default:
		verdict = fmt.Sprintf("no liquidation either way (equity %s%s with the guard)", sign, diff.StringFixed(2))
	}
	fmt.Fprintln(w, fit("verdict: "+verdict, demoWidth))
}

// demoSummary counts what the demo's ticks did.
type demoSummary struct {
	ticks, transitions int
	actions            map[string]int
	active             func() []alert.Alert
}

func (s *demoSummary) add(rep *engine.TickReport) {
	if rep == nil {
		return
	}
	if s.actions == nil {
		s.actions = make(map[string]int)
	}
	s.ticks++
	s.transitions += len(rep.Transitions)
	for _, a := range rep.Actions {
		s.actions[a.Action+" ("+a.Outcome+")"]++
	}
}

func (s *demoSummary) print(w io.Writer) {
	fmt.Fprintf(w, "\n%d ticks, %d rule transitions\n", s.ticks, s.transitions)
	if len(s.actions) == 0 {
		fmt.Fprintln(w, "no actions")
	}
	for _, k := range slices.Sorted(maps.Keys(s.actions)) {
		fmt.Fprintf(w, "  %-40s %d\n", k, s.actions[k])
	}
}

// demoWidth is what the demo's output fits in.
const demoWidth = 100

// printTick draws one tick without mixing before and after: the positions
// as the tick read them with the rule states it left, the actions it took,
// and the acted-on positions as the exchange shows them afterwards.
func printTick(w io.Writer, n int, elapsed time.Duration, rep *engine.TickReport, indexNames map[string]string, ex *sim.Exchange, active func() []alert.Alert) {
	title := fmt.Sprintf("── tick %d, t+%s ", n, elapsed.Round(time.Second))
	fmt.Fprintf(w, "\n%s%s\n", title, strings.Repeat("─", max(0, 72-len([]rune(title)))))
	if rep.Snapshot == nil {
		fmt.Fprintln(w, "positions not read: no action this tick")
		return
	}
	names := map[int64]exchange.ContractSymbol{}
	if rep.Snapshot.Symbols != nil {
		for _, s := range rep.Snapshot.Symbols.ContractsSymbols {
			names[s.ID] = s
		}
	}
	fmt.Fprintln(w, "as read by the tick:")
	printPositions(w, rep.Snapshot.Positions, rep.Snapshot.IndexPrices, names, indexNames, nil)
	printRules(w, active())
	if len(rep.Actions) == 0 {
		return
	}
	fmt.Fprintln(w, "actions:")
	acted := map[string]bool{}
	for _, a := range rep.Actions {
		acted[a.Symbol] = true
		line := "  " + a.Action + " " + a.Symbol
		if a.From != 0 && a.To != 0 && a.From != a.To {
			line += fmt.Sprintf(" %dx→%dx", a.From, a.To)
		}
		line += ": " + a.Outcome
		if a.Err != nil {
			line += " (" + a.Err.Error() + ")"
		}
		line += " [" + strings.Join(a.Rules, ", ") + "]"
		fmt.Fprintln(w, fit(line, demoWidth))
		for _, l := range wrap(a.Effect, demoWidth-6) {
			fmt.Fprintln(w, "      "+l)
		}
	}
	var after []exchange.Position
	for _, p := range ex.Positions() {
		if acted[names[p.SymbolID].Name] {
			after = append(after, p)
		}
	}
	fmt.Fprintln(w, "after the actions:")
	printPositions(w, after, ex.IndexPrices(), names, indexNames, ex.OpenOrders)
}

// printPositions draws positions as a table of at most demoWidth columns.
// openOrders, when set, adds each symbol's open orders.
func printPositions(w io.Writer, positions []exchange.Position, indexes map[string]decimal.Decimal, names map[int64]exchange.ContractSymbol,
	indexNames map[string]string, openOrders func(string) int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "SYMBOL\tSIDE\tQTY\tLEV\tMODE\tINDEX\tLIQUIDATION\tDISTANCE"
	if openOrders != nil {
		header += "\tORDERS"
	}
	fmt.Fprintln(tw, header)
	for _, p := range positions {
		sym := names[p.SymbolID].Name
		row := []string{sym, "-", "0", "", "", "", "", ""}
		if !p.Empty {
			mode := "isolated"
			if p.Cross {
				mode = "cross"
			}
			index := names[p.SymbolID].BaseName
			if n, ok := indexNames[sym]; ok {
				index = n
			}
			var idx, dist string
			if price, ok := indexes[index]; ok && price.IsPositive() {
				idx = roundPrice(price)
				d := price.Sub(p.LiquidationPrice).Div(price)
				if p.Direction == exchange.Short {
					d = d.Neg()
				}
				dist = d.Shift(2).StringFixed(2) + "%"
			}
			row = []string{sym, p.Direction, p.Quantity.String(), fmt.Sprintf("%dx", p.Leverage), mode, idx, roundPrice(p.LiquidationPrice), dist}
		}
		if openOrders != nil {
			row = append(row, fmt.Sprint(openOrders(sym)))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

// printRules lists the rules that are not inactive, a symbol a line,
// wrapped to demoWidth.
func printRules(w io.Writer, active []alert.Alert) {
	if len(active) == 0 {
		fmt.Fprintln(w, "rules: all inactive")
		return
	}
	fmt.Fprintln(w, "rules:")
	for i := 0; i < len(active); {
		sym := active[i].Symbol
		var parts []string
		for ; i < len(active) && active[i].Symbol == sym; i++ {
			parts = append(parts, active[i].Rule+" "+active[i].State.String())
		}
		line := "  " + sym + ": "
		for j, p := range parts {
			if j > 0 {
				p = ", " + p
			}
			if len([]rune(line))+len([]rune(p)) > demoWidth {
				fmt.Fprintln(w, line)
				line = "    " + strings.TrimPrefix(p, ", ")
				continue
			}
			line += p
		}
		fmt.Fprintln(w, line)
	}
}

// roundPrice prints a price with the precision a trader reads it at: no
// decimals from 10,000, two from 1, else four significant ones.
func roundPrice(d decimal.Decimal) string {
	a := d.Abs()
	switch {
	case a.GreaterThanOrEqual(decimal.NewFromInt(10000)):
		return d.StringFixed(0)
	case a.GreaterThanOrEqual(decimal.NewFromInt(1)):
		return d.StringFixed(2)
	case a.IsZero():
		return "0"
	}
	return d.StringFixed(4)
}

// fit cuts s to n columns.
func fit(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// symbolNames maps the exchange's contract symbol ids to their symbols.
func symbolNames(ex *sim.Exchange) map[int64]exchange.ContractSymbol {
	out := map[int64]exchange.ContractSymbol{}
	for _, s := range ex.Trades().ContractsSymbols {
		out[s.ID] = s
	}
	return out
}

// wrap breaks s into lines of at most n columns at spaces.
func wrap(s string, n int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len([]rune(line))+1+len([]rune(word)) > n {
			out = append(out, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		out = append(out, fit(line, n))
	}
	return out
}

// invocation is how to run this program from another shell at this
// point, for the commands the demo prints: "riskguard" when PATH finds
// this very executable (installed, on PATH), "go run ./cmd/riskguard"
// under go run (a build in Go's temporary directory), else the
// executable's own path. A newcomer pastes what works.
func (m *Main) invocation() string {
	exe, err := os.Executable()
	if err != nil {
		return "riskguard"
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return "riskguard"
	}
	self, err := os.Stat(exe)
	if err != nil {
		return "riskguard"
	}
	for _, dir := range filepath.SplitList(m.Getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry resolves against the other shell's directory
		}
		if fi, err := os.Stat(filepath.Join(dir, "riskguard")); err == nil && !fi.IsDir() {
			if os.SameFile(fi, self) {
				return "riskguard"
			}
			break // another riskguard comes first on PATH
		}
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ./cmd/riskguard"
	}
	return exe
}
