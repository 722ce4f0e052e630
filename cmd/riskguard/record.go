package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// recordProgressEvery is how many ticks pass between two progress lines.
const recordProgressEvery = 60

func (m *Main) runRecord(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	configPath := fs.String("config", "riskguard.yaml", "configuration file (exchange section and credentials)")
	out := fs.String("out", "", "recording to write: JSON lines, gzip-compressed when the name ends in .gz")
	duration := fs.Duration("duration", 0, "stop after this long (default: until interrupted)")
	interval := fs.Duration("interval", 0, "time between two snapshots (default: engine.interval)")
	logFormat := fs.String("log-format", "auto", "log format: text, json, or auto (text on a terminal)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	fs.Usage = func() {
		fmt.Fprintln(m.Stderr, "usage: riskguard record --config FILE --out DATA[.gz] [--duration D] [--interval I]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return exitCode(2)
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(m.Stderr, "riskguard record: unexpected argument %q\n", fs.Arg(0))
		return exitCode(2)
	case *out == "":
		fmt.Fprintln(m.Stderr, "riskguard record: --out is required")
		return exitCode(2)
	case *duration < 0 || *interval < 0:
		fmt.Fprintln(m.Stderr, "riskguard record: --duration and --interval must not be negative")
		return exitCode(2)
	}
	cfg, logger, err := m.setup("record", *configPath, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	if *interval == 0 {
		*interval = cfg.Engine.Interval
	}
	client, err := newClient(cfg, logger)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard record:", err)
		return exitCode(1)
	}
	// --duration stops the loop between two ticks rather than through the
	// reads' context, so that the last tick is not cut short by its
	// deadline (the rate limiter refuses a wait that would pass it).
	var stop <-chan time.Time
	if *duration > 0 {
		tm := time.NewTimer(*duration)
		defer tm.Stop()
		stop = tm.C
	}
	rec, err := backtest.CreateRecorder(*out)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard record:", err)
		return exitCode(1)
	}
	r := &recorder{client: client, logger: logger, refresh: cfg.Engine.SymbolsRefresh}
	written, skipped, err := r.loop(ctx, rec, *interval, stop, func(n int, at time.Time) {
		if n == 1 || n%recordProgressEvery == 0 {
			fmt.Fprintf(m.Stderr, "riskguard record: %d ticks written (last at %s)\n", n, at.UTC().Format(time.RFC3339))
		}
	})
	if cerr := rec.Close(); cerr != nil && err == nil {
		err = cerr
	}
	fmt.Fprintf(m.Stderr, "riskguard record: %d ticks written to %s, %d skipped\n", written, *out, skipped)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard record:", err)
		return exitCode(1)
	}
	return nil
}

// recorder reads the account's snapshots through the client.
type recorder struct {
	client  *exchange.Client
	logger  *slog.Logger
	refresh time.Duration

	symbols   *exchange.Trades
	known     map[int64]bool
	symbolsAt time.Time
}

// loop writes one snapshot every interval, the first at once, until ctx is
// done or stop fires. A tick whose reads fail is logged and skipped; a
// write failure ends the loop, since the file can no longer be trusted.
func (r *recorder) loop(ctx context.Context, rec *backtest.Recorder, interval time.Duration, stop <-chan time.Time, progress func(n int, at time.Time)) (written, skipped int, err error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		now := time.Now()
		snap, rerr := r.snapshot(ctx, now)
		switch {
		case rerr != nil && ctx.Err() != nil:
			// Interrupted mid-read: the tick in flight is lost, as promised.
			return written, skipped, nil
		case rerr != nil:
			skipped++
			r.logger.Error("snapshot failed: tick skipped", "err", rerr)
		default:
			if err := rec.Write(snap); err != nil {
				return written, skipped, err
			}
			written++
			progress(written, now)
		}
		select {
		case <-ctx.Done():
			return written, skipped, nil
		case <-stop:
			return written, skipped, nil
		case <-t.C:
		}
	}
}

// snapshot reads positions and index prices, and the symbols when they are
// unknown, stale, or a position names a symbol id they lack. Nothing
// partial is returned: any failed read fails the snapshot.
func (r *recorder) snapshot(ctx context.Context, now time.Time) (backtest.Snapshot, error) {
	if r.symbols == nil || (r.refresh > 0 && now.Sub(r.symbolsAt) >= r.refresh) {
		if err := r.readSymbols(ctx, now); err != nil {
			return backtest.Snapshot{}, err
		}
	}
	positions, err := r.client.Positions(ctx)
	if err != nil {
		return backtest.Snapshot{}, fmt.Errorf("read positions: %w", err)
	}
	for _, p := range positions {
		if !r.known[p.SymbolID] {
			if err := r.readSymbols(ctx, now); err != nil {
				return backtest.Snapshot{}, err
			}
			if !r.known[p.SymbolID] {
				r.logger.Warn("a position names a symbol id the exchange does not list", "symbol_id", p.SymbolID)
			}
			break
		}
	}
	prices, err := r.client.IndexPrices(ctx)
	if err != nil {
		return backtest.Snapshot{}, fmt.Errorf("read index prices: %w", err)
	}
	if prices == nil {
		prices = map[string]decimal.Decimal{}
	}
	return backtest.Snapshot{Time: now, Positions: positions, IndexPrices: prices, Symbols: r.symbols}, nil
}

func (r *recorder) readSymbols(ctx context.Context, now time.Time) error {
	tr, err := r.client.Trades(ctx)
	if err != nil {
		return fmt.Errorf("read symbols: %w", err)
	}
	r.symbols, r.symbolsAt = tr, now
	r.known = make(map[int64]bool, len(tr.ContractsSymbols))
	for _, c := range tr.ContractsSymbols {
		r.known[c.ID] = true
	}
	return nil
}
