package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

func (m *Main) runDemo(ctx context.Context, args []string) error {
	fs := m.newFlags("demo", "demo [--duration 2m] [--interval 1s] [--config FILE] [--scenario FILE] [--seed N] [--dry-run] [--dir DIR]", commands()["demo"].summary)
	configPath := fs.String("config", "rules.example.yaml", "rules file to run against the simulated exchange")
	duration := fs.Duration("duration", 2*time.Minute, "how long the demo runs")
	interval := fs.Duration("interval", time.Second, "time between two ticks")
	seed := fs.Int64("seed", sim.DefaultSeed, "seed of the simulated price paths")
	scenario := fs.String("scenario", "", "scenario file for the simulated exchange (default: the built-in one)")
	dryRun := fs.Bool("dry-run", false, "log the actions instead of sending them")
	dir := fs.String("dir", "", "where the audit log and state file go (default: a new temporary directory)")
	logFormat := fs.String("log-format", "auto", "log format: text, json, or auto")
	logLevel := fs.String("log-level", "info", "log level")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *duration <= 0 || *interval <= 0 {
		fmt.Fprintln(m.Stderr, "riskguard demo: --duration and --interval must be positive")
		return exitCode(2)
	}
	logger, err := m.newLogger(*logFormat, *logLevel)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard demo:", err)
		return exitCode(2)
	}
	cfg, err := loadConfig(*configPath, m.Getenv)
	if err != nil {
		fmt.Fprintln(m.Stderr, err)
		if errors.Is(err, os.ErrNotExist) {
			fmt.Fprintln(m.Stderr, "riskguard demo: run it from the repository root, or pass --config")
		}
		return exitCode(1)
	}

	var sc *sim.Scenario
	if *scenario != "" {
		if sc, err = sim.LoadScenario(*scenario); err != nil {
			fmt.Fprintln(m.Stderr, "riskguard demo:", err)
			return exitCode(1)
		}
	}
	ex, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: *seed, Scenario: sc})
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

	ctx, cancel := context.WithTimeout(ctx, *duration)
	defer cancel()
	go ex.Run(ctx, 250*time.Millisecond)

	ownDir := *dir == ""
	if ownDir {
		if *dir, err = os.MkdirTemp("", "riskguard-demo-"); err != nil {
			return err
		}
		// The demo's own directory goes with it; --dir keeps the files.
		defer os.RemoveAll(*dir)
	}
	cfg.Exchange.BaseURL = "http://" + ln.Addr().String()
	cfg.Exchange.APIKey, cfg.Exchange.APISecret = sim.DefaultKey, sim.DefaultSecret
	cfg.Engine.Interval = *interval
	cfg.Listen = ""
	cfg.Engine.AuditLog = filepath.Join(*dir, "audit.jsonl")
	cfg.Engine.StateFile = filepath.Join(*dir, "state.json")

	fmt.Fprintf(m.Stdout, "riskguard demo: %d rules from %s, for %s (dry run %t)\n",
		len(cfg.Rules.Rules), *configPath, *duration, *dryRun || cfg.Engine.DryRun)
	fmt.Fprintf(m.Stdout, "simulated exchange: %s (key %s, secret %s)\n", cfg.Exchange.BaseURL, sim.DefaultKey, sim.DefaultSecret)
	fmt.Fprintf(m.Stdout, "audit log: %s\n", cfg.Engine.AuditLog)

	var sum demoSummary
	start := time.Now()
	onTick := func(rep *engine.TickReport, _ error) {
		sum.add(rep)
		if rep != nil && (sum.ticks == 1 || len(rep.Transitions)+len(rep.Actions) > 0 || sum.ticks%10 == 0) {
			printTick(m.Stdout, sum.ticks, rep.Time.Sub(start), rep, cfg.Engine.IndexNames, ex, sum.active)
		}
	}
	g, err := newGuard(cfg, logger, *dryRun, onTick)
	if err != nil {
		return err
	}
	defer g.close(ctx, logger)
	sum.active = g.engine.Active
	if err := g.engine.Run(ctx); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "\n── at the end, t+%s %s\n", time.Since(start).Round(time.Second), strings.Repeat("─", 40))
	printPositions(m.Stdout, ex.Positions(), ex.IndexPrices(), symbolNames(ex), cfg.Engine.IndexNames, ex.OpenOrders)
	printRules(m.Stdout, g.engine.Active())
	sum.print(m.Stdout, ex.Liquidations())
	if ownDir {
		fmt.Fprintln(m.Stdout, "(the demo's audit log and state file were removed; --dir DIR keeps them)")
	}
	return nil
}

// demoSummary counts what the demo's ticks did.
type demoSummary struct {
	ticks, transitions int
	actions            map[string]int
	active             func() []engine.ActiveRule
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

func (s *demoSummary) print(w io.Writer, liq []sim.Liquidation) {
	fmt.Fprintf(w, "\n%d ticks, %d rule transitions\n", s.ticks, s.transitions)
	if len(s.actions) == 0 {
		fmt.Fprintln(w, "no actions")
	}
	for _, k := range slices.Sorted(maps.Keys(s.actions)) {
		fmt.Fprintf(w, "  %-40s %d\n", k, s.actions[k])
	}
	if len(liq) == 0 {
		fmt.Fprintln(w, "no position was liquidated")
	}
	for _, l := range liq {
		fmt.Fprintf(w, "LIQUIDATED %s at %s\n", l.Symbol, l.Price)
	}
}

// demoWidth is what the demo's output fits in.
const demoWidth = 100

// printTick draws one tick without mixing before and after: the positions
// as the tick read them with the rule states it left, the actions it took,
// and the acted-on positions as the exchange shows them afterwards.
func printTick(w io.Writer, n int, elapsed time.Duration, rep *engine.TickReport, indexNames map[string]string, ex *sim.Exchange, active func() []engine.ActiveRule) {
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
func printRules(w io.Writer, active []engine.ActiveRule) {
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
