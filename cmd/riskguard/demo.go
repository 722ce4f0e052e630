package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
)

func (m *Main) runDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	configPath := fs.String("config", "rules.example.yaml", "rules file to run against the simulated exchange")
	duration := fs.Duration("duration", 2*time.Minute, "how long the demo runs")
	interval := fs.Duration("interval", time.Second, "time between two ticks")
	seed := fs.Int64("seed", sim.DefaultSeed, "seed of the simulated price paths")
	scenario := fs.String("scenario", "", "scenario file for the simulated exchange (default: the built-in one)")
	dryRun := fs.Bool("dry-run", false, "log the actions instead of sending them")
	dir := fs.String("dir", "", "where the audit log and state file go (default: a new temporary directory)")
	logFormat := fs.String("log-format", "auto", "log format: text, json, or auto")
	logLevel := fs.String("log-level", "info", "log level")
	if err := fs.Parse(args); err != nil {
		return exitCode(2)
	}
	if *duration <= 0 || *interval <= 0 {
		fmt.Fprintln(m.Stderr, "riskguard demo: --duration and --interval must be positive")
		return exitCode(2)
	}
	logger, err := newLogger(m.Stderr, *logFormat, *logLevel)
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

	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "riskguard-demo-"); err != nil {
			return err
		}
	}
	cfg.Exchange.BaseURL = "http://" + ln.Addr().String()
	cfg.Exchange.APIKey, cfg.Exchange.APISecret = sim.DefaultKey, sim.DefaultSecret
	cfg.Engine.Interval = *interval
	cfg.Listen = ""
	cfg.Engine.AuditLog = filepath.Join(*dir, "audit.jsonl")
	cfg.Engine.StateFile = filepath.Join(*dir, "state.json")
	g, err := newGuard(cfg, logger, *dryRun)
	if err != nil {
		return err
	}
	defer g.close(ctx, logger)

	symbols, err := g.client.Trades(ctx)
	if err != nil {
		return fmt.Errorf("read symbols from the simulated exchange: %w", err)
	}
	names := make(map[int64]exchange.ContractSymbol)
	for _, s := range symbols.ContractsSymbols {
		names[s.ID] = s
	}
	fmt.Fprintf(m.Stdout, "riskguard demo: %d rules from %s against a simulated exchange at %s for %s (dry run %t)\n",
		len(cfg.Rules.Rules), *configPath, cfg.Exchange.BaseURL, *duration, *dryRun || cfg.Engine.DryRun)
	fmt.Fprintf(m.Stdout, "audit log: %s\n", cfg.Engine.AuditLog)

	var sum demoSummary
	start := time.Now()
	t := time.NewTicker(*interval)
	defer t.Stop()
	for n := 1; ; n++ {
		now := time.Now()
		rep, err := g.engine.Tick(ctx, now)
		if err != nil && ctx.Err() == nil {
			logger.Error("tick failed", "err", err)
		}
		if ctx.Err() != nil {
			break
		}
		sum.add(rep)
		if n == 1 || len(rep.Transitions)+len(rep.Actions) > 0 || n%10 == 0 {
			printPositions(m.Stdout, now.Sub(start), ex, cfg.Exchange.IndexNames, names, g.engine.Active())
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		if ctx.Err() != nil {
			break
		}
	}
	printPositions(m.Stdout, time.Since(start), ex, cfg.Exchange.IndexNames, names, g.engine.Active())
	sum.print(m.Stdout, ex.Liquidations())
	return nil
}

// demoSummary counts what the demo's ticks did.
type demoSummary struct {
	ticks, transitions int
	actions            map[string]int
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
	for k, n := range s.actions {
		fmt.Fprintf(w, "  %-40s %d\n", k, n)
	}
	if len(liq) == 0 {
		fmt.Fprintln(w, "no position was liquidated")
	}
	for _, l := range liq {
		fmt.Fprintf(w, "LIQUIDATED %s at %s\n", l.Symbol, l.Price)
	}
}

// printPositions draws the account as a table: one row per position with
// the rules that are not inactive on it.
func printPositions(w io.Writer, elapsed time.Duration, ex *sim.Exchange, indexNames map[string]string, names map[int64]exchange.ContractSymbol, active []engine.ActiveRule) {
	fmt.Fprintf(w, "\n── t+%s %s\n", elapsed.Round(time.Second), strings.Repeat("─", 60))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SYMBOL\tSIDE\tQTY\tLEV\tMARGIN\tINDEX\tLIQUIDATION\tDISTANCE\tORDERS\tRULES")
	for _, p := range ex.Positions() {
		sym := names[p.SymbolID].Name
		if p.Empty {
			fmt.Fprintf(tw, "%s\t-\t0\t\t\t\t\t\t%d\t(empty)\n", sym, ex.OpenOrders(sym))
			continue
		}
		mode := "isolated"
		if p.Cross {
			mode = "cross"
		}
		var idx, dist string
		index := names[p.SymbolID].BaseName
		if n, ok := indexNames[sym]; ok {
			index = n
		}
		if price, ok := ex.IndexPrice(index); ok && price.IsPositive() {
			idx = price.StringFixed(2)
			d := price.Sub(p.LiquidationPrice).Div(price)
			if p.Direction == exchange.Short {
				d = d.Neg()
			}
			dist = d.Shift(2).StringFixed(2) + "%"
		}
		var rs []string
		for _, a := range active {
			if a.Symbol == sym {
				rs = append(rs, a.Rule+":"+a.State.String())
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%dx\t%s\t%s\t%s\t%s\t%d\t%s\n", sym, p.Direction, p.Quantity, p.Leverage, mode,
			idx, p.LiquidationPrice.StringFixed(2), dist, ex.OpenOrders(sym), strings.Join(rs, " "))
	}
	tw.Flush()
}
