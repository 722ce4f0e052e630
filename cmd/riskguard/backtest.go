package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// backtestFlags are the parsed flags of the backtest command.
type backtestFlags struct {
	config, data, csv, history, baseline, scenario, cache string
	account                                               string
	report, audit                                         string
	historySource, barType                                string
	barPrices                                             backtest.BarPrices
	from, to                                              time.Time
	interval                                              time.Duration
	seed                                                  int64
	logFormat, logLevel                                   string
	json                                                  bool
}

// backtestGCPercent is the GOGC a backtest runs with when GOGC is unset.
const backtestGCPercent = 400

func (m *Main) runBacktest(ctx context.Context, args []string) error {
	f, err := m.parseBacktestFlags(args)
	if err != nil {
		return err
	}
	logger, err := m.newLogger(f.logFormat, f.logLevel)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard backtest:", err)
		return exitCode(2)
	}
	cfg, err := config.Load(f.config, m.Getenv, config.Options{SecretsOptional: true, Venues: m.venues.specs()})
	if err != nil {
		fmt.Fprintln(m.Stderr, err)
		return exitCode(1)
	}
	if cfg, err = pickAccount(cfg, f.account); err != nil {
		fmt.Fprintln(m.Stderr, "riskguard backtest:", err)
		return exitCode(2)
	}
	for _, w := range cfg.Warnings {
		logger.Warn(w)
	}
	opt := backtest.Options{
		Engine:   cfg.Engine,
		Rules:    cfg.Rules,
		From:     f.from,
		To:       f.to,
		Interval: f.interval,
		Seed:     f.seed,
	}
	if f.baseline != "" {
		if opt.Baseline, err = loadRules(f.baseline, m.Getenv, m.venues.specs()); err != nil {
			fmt.Fprintln(m.Stderr, err)
			return exitCode(1)
		}
	}
	if f.audit != "" {
		af, err := os.Create(f.audit)
		if err != nil {
			fmt.Fprintln(m.Stderr, "riskguard backtest: --audit:", err)
			return exitCode(1)
		}
		bw := bufio.NewWriter(af)
		defer func() {
			if err := errors.Join(bw.Flush(), af.Close()); err != nil {
				fmt.Fprintln(m.Stderr, "riskguard backtest: --audit:", err)
			}
		}()
		opt.Audit = bw
	}
	src, closeSrc, err := m.backtestSource(ctx, f, cfg, logger, &opt)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard backtest:", err)
		return exitCode(1)
	}
	defer closeSrc()
	if m.Getenv("GOGC") == "" {
		// A replay's live heap is a few MB while it allocates a few hundred
		// bytes per step: the default GOGC collects every few thousand
		// steps, a third of a year's replay. Four times the heap (under
		// 40 MB for a year of minute data) collects a quarter as often.
		defer debug.SetGCPercent(debug.SetGCPercent(backtestGCPercent))
	}
	if path := m.Getenv("RISKGUARD_CPUPROFILE"); path != "" {
		// For docs/performance.md: the replay's CPU profile, for
		// go tool pprof.
		stop, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintln(m.Stderr, "riskguard backtest:", err)
			return exitCode(1)
		}
		defer stop()
	}
	res, err := backtest.Run(ctx, src, opt)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard backtest:", err)
		return exitCode(1)
	}
	if f.history != "" {
		// Say how much history the exchange gave: a replay of 47 seconds
		// asked as a day must not read as a day's verdict.
		if span, _ := parseSpan(f.history); span > 0 {
			if got := res.To.Sub(res.From); got < span*9/10 {
				fmt.Fprintf(m.Stderr, "riskguard backtest: warning: --history %s asked for %s of history; the exchange gave %s (%s → %s): the verdict is of that span only\n",
					f.history, span, got.Round(time.Second), res.From.UTC().Format(time.RFC3339), res.To.UTC().Format(time.RFC3339))
			}
		}
	}
	if f.json {
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(backtest.Summarize(res)); err != nil {
			return err
		}
	} else {
		fmt.Fprint(m.Stdout, backtest.Summary(res))
	}
	if f.report != "" {
		if err := writeReport(f.report, res); err != nil {
			fmt.Fprintln(m.Stderr, "riskguard backtest:", err)
			return exitCode(1)
		}
	}
	return nil
}

// writeReport renders the HTML report whole before it creates the file, so
// a failed rendering leaves no half-written page.
func writeReport(path string, res *backtest.Result) error {
	var b bytes.Buffer
	if err := backtest.WriteReport(&b, res); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// parseBacktestFlags reads and checks the flags; a usage error has been
// reported and is an exitCode(2).
func (m *Main) parseBacktestFlags(args []string) (*backtestFlags, error) {
	f := &backtestFlags{}
	fs := m.newFlags("backtest", "backtest --config FILE (--data DATA | --csv FILE | --history 30d [--history-source bars --bar-type 1m]) [--from T] [--to T] [--baseline OLD.yaml] [--interval D] [--seed N] [--scenario FILE] [--report FILE.html] [--audit FILE.jsonl] [--json]", commands()["backtest"].summary)
	fs.StringVar(&f.config, "config", "riskguard.yaml", "configuration file: the rules under test and the engine settings")
	fs.StringVar(&f.account, "account", "", "the account whose rules and exchange are tested, when the config lists several (accounts:)")
	fs.StringVar(&f.data, "data", "", "recorded data (riskguard record), .gz gunzipped")
	fs.StringVar(&f.csv, "csv", "", "CSV of prices: time,symbol-or-index,price")
	fs.StringVar(&f.history, "history", "", "replay today's positions through the exchange's history (see --history-source) of this long, e.g. 30d or 12h")
	fs.StringVar(&f.baseline, "baseline", "", "a second rules (or config) file to compare the decisions with")
	fs.StringVar(&f.scenario, "scenario", "", "starting state for --csv or --history as a simulated exchange scenario file (default: today's positions read from the exchange)")
	fs.StringVar(&f.report, "report", "", "also write a self-contained HTML report with a chart per symbol to this file")
	fs.StringVar(&f.audit, "audit", "", "also write the guarded run's audit log (JSON lines, as the daemon writes it) to this file")
	fs.BoolVar(&f.json, "json", false, "print the summary as JSON (the verdict, both runs and the rules' statistics), for scripts")
	fs.StringVar(&f.cache, "cache", "", "cache directory of --history (default: the user cache directory's riskguard/history)")
	fs.StringVar(&f.historySource, "history-source", "index", "what --history fetches: index (the index history) or bars (the bars of each position's symbol)")
	fs.StringVar(&f.barType, "bar-type", "1m", "bar type of --history-source bars, e.g. 1m, 5m, 1h, 1d")
	barPrices := fs.String("bar-prices", string(backtest.BarOHLC), "what a bar replays with --history-source bars: ohlc (open, low and high inside the bar, close; no liquidation inside a bar is missed) or close (one step per bar)")
	from := fs.String("from", "", "replay from this time (RFC 3339); earlier data only sets the starting state")
	to := fs.String("to", "", "replay up to this time (RFC 3339); with --history, the end of the fetched range (default: now)")
	fs.DurationVar(&f.interval, "interval", 0, "tick the engine this often between two data steps (default: once per step)")
	fs.Int64Var(&f.seed, "seed", sim.DefaultSeed, "seed of the simulated exchanges")
	fs.StringVar(&f.logFormat, "log-format", "auto", "log format: text, json, or auto (text on a terminal)")
	fs.StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	usage := func(format string, a ...any) (*backtestFlags, error) {
		fmt.Fprintf(m.Stderr, "riskguard backtest: "+format+"\n", a...)
		return nil, exitCode(2)
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	var sources []string
	for _, s := range []struct{ name, v string }{{"--data", f.data}, {"--csv", f.csv}, {"--history", f.history}} {
		if s.v != "" {
			sources = append(sources, s.name)
		}
	}
	if len(sources) != 1 {
		if len(sources) == 0 {
			return usage("give the data to replay: one of --data, --csv or --history")
		}
		return usage("give one source of data, not %s", strings.Join(sources, " and "))
	}
	if f.scenario != "" && f.data != "" {
		return usage("--scenario is for --csv and --history: recorded data carries its own positions")
	}
	if f.cache != "" && f.history == "" {
		return usage("--cache is for --history")
	}
	var err error
	for _, t := range []struct {
		name, v string
		dst     *time.Time
	}{{"--from", *from, &f.from}, {"--to", *to, &f.to}} {
		if t.v == "" {
			continue
		}
		if *t.dst, err = time.Parse(time.RFC3339, t.v); err != nil {
			return usage("%s %q: want an RFC 3339 time like 2026-03-02T09:00:00Z", t.name, t.v)
		}
	}
	if !f.from.IsZero() && !f.to.IsZero() && !f.from.Before(f.to) {
		return usage("--from %s is not before --to %s", *from, *to)
	}
	if f.interval < 0 {
		return usage("--interval must not be negative")
	}
	if f.history != "" {
		if _, err := parseSpan(f.history); err != nil {
			return usage("--history: %v", err)
		}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["history-source"] && f.history == "" {
		return usage("--history-source is for --history")
	}
	switch f.historySource {
	case "index":
		for _, n := range []string{"bar-type", "bar-prices"} {
			if set[n] {
				return usage("--%s is for --history-source bars", n)
			}
		}
	case "bars":
		if _, err := backtest.BarPeriod(f.barType); err != nil {
			return usage("--bar-type: %v", err)
		}
		f.barPrices = backtest.BarPrices(*barPrices)
		if f.barPrices != backtest.BarOHLC && f.barPrices != backtest.BarClose {
			return usage("--bar-prices %q: want ohlc or close", *barPrices)
		}
	default:
		return usage("--history-source %q: want index or bars", f.historySource)
	}
	return f, nil
}

// parseSpan reads a length of history: a Go duration, or whole days as 30d.
func parseSpan(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("%q: want a length like 30d, 12h or 90m", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want a length like 30d, 12h or 90m", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: must be positive", s)
	}
	return d, nil
}

// loadRules reads the rules of a rules file or of a whole configuration,
// with the checks of every other command (venues: the program's registry).
func loadRules(path string, getenv func(string) string, venues []config.Venue) (*rules.Set, error) {
	cfg, err := config.Load(path, getenv, config.Options{SecretsOptional: true, RulesOnly: true, Venues: venues})
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("read baseline: %w", pe)
	}
	if err != nil {
		return nil, err
	}
	return cfg.Rules, nil
}

// backtestSource opens the data and sets the starting state in opt.
func (m *Main) backtestSource(ctx context.Context, f *backtestFlags, cfg *config.Config, logger *slog.Logger, opt *backtest.Options) (backtest.Source, func() error, error) {
	if f.data != "" {
		d, err := backtest.OpenData(f.data)
		if err != nil {
			return nil, nil, err
		}
		return d, d.Close, nil
	}
	var client *exchange.Client
	var live *liveAccount
	if f.scenario != "" {
		sc, err := sim.LoadScenario(f.scenario)
		if err != nil {
			return nil, nil, err
		}
		opt.Scenario = sc
	} else {
		var err error
		if client, err = newClient(cfg, logger); err != nil {
			return nil, nil, err
		}
		if live, err = readAccount(ctx, client); err != nil {
			return nil, nil, err
		}
		if opt.Scenario, err = backtest.ScenarioFrom(live.trades, live.positions, decimal.Zero); err != nil {
			return nil, nil, fmt.Errorf("starting state from the exchange: %w", err)
		}
	}
	if f.csv != "" {
		c, err := backtest.OpenCSV(f.csv)
		if err != nil {
			return nil, nil, err
		}
		return c, c.Close, nil
	}

	span, _ := parseSpan(f.history) // checked with the flags
	to := f.to
	if to.IsZero() {
		// Whole minutes, so that a rerun within the minute reads the cache.
		to = time.Now().UTC().Truncate(time.Minute)
	}
	from := to.Add(-span)
	if client == nil {
		var err error
		if client, err = newClient(cfg, logger); err != nil {
			return nil, nil, err
		}
	}
	symbols := historySymbols(opt.Scenario, cfg.Engine.IndexNames)
	names := historyIndexes(symbols)
	if len(names) == 0 {
		return nil, nil, errors.New("--history: no open position to replay")
	}
	cache := f.cache
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return nil, nil, fmt.Errorf("cache directory: %w (pass --cache DIR)", err)
		}
		cache = filepath.Join(dir, "riskguard", "history")
	}
	if f.historySource == "bars" {
		fmt.Fprintf(m.Stderr, "riskguard backtest: %s bars (%s) of %s from %s to %s\n", f.barType, f.barPrices, strings.Join(slices.Sorted(maps.Keys(symbols)), ", "),
			from.Format(time.RFC3339), to.Format(time.RFC3339))
		h, err := backtest.FetchBars(ctx, client, symbols, f.barType, from, to, backtest.HistoryOptions{
			CacheDir:  cache,
			BarPrices: f.barPrices,
			Progress: func(symbol string, bars int, reached time.Time) {
				fmt.Fprintf(m.Stderr, "riskguard backtest: %s: %d bars, up to %s\n", symbol, bars, reached.UTC().Format(time.RFC3339))
			},
		})
		if err != nil {
			return nil, nil, err
		}
		return h, h.Close, nil
	}
	fmt.Fprintf(m.Stderr, "riskguard backtest: index history of %s from %s to %s\n", strings.Join(names, ", "), from.Format(time.RFC3339), to.Format(time.RFC3339))
	h, err := backtest.FetchHistory(ctx, client, names, from, to, backtest.HistoryOptions{
		CacheDir: cache,
		Progress: func(index string, samples int, reached time.Time) {
			fmt.Fprintf(m.Stderr, "riskguard backtest: %s: %d samples, up to %s\n", index, samples, reached.UTC().Format(time.RFC3339))
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return h, h.Close, nil
}

// liveAccount is what the exchange shows today.
type liveAccount struct {
	trades    *exchange.Trades
	positions []exchange.Position
}

func readAccount(ctx context.Context, c *exchange.Client) (*liveAccount, error) {
	tr, err := c.Trades(ctx)
	if err != nil {
		return nil, fmt.Errorf("read symbols: %w", err)
	}
	ps, err := c.Positions(ctx)
	if err != nil {
		return nil, fmt.Errorf("read positions: %w", err)
	}
	return &liveAccount{trades: tr, positions: ps}, nil
}

// historySymbols maps the symbol of each of the scenario's positions to the
// index that prices it: the index_names override, else the contract's base.
func historySymbols(sc *sim.Scenario, indexNames map[string]string) map[string]string {
	base := map[string]string{}
	for _, c := range sc.Contracts {
		base[c.Name] = c.Base
	}
	symbols := map[string]string{}
	for _, p := range sc.Positions {
		if p.Empty {
			continue
		}
		n, ok := indexNames[p.Symbol]
		if !ok {
			n = base[p.Symbol]
		}
		if n != "" {
			symbols[p.Symbol] = n
		}
	}
	return symbols
}

// historyIndexes names the indexes of historySymbols, sorted, once each.
func historyIndexes(symbols map[string]string) []string {
	return slices.Compact(slices.Sorted(maps.Values(symbols)))
}

// startCPUProfile writes a CPU profile to path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("RISKGUARD_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("RISKGUARD_CPUPROFILE: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
