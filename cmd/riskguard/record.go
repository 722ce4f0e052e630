package main

import (
	"context"
	"fmt"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/backtest"
)

// recordProgressEvery is how many ticks pass between two progress lines.
const recordProgressEvery = 60

func (m *Main) runRecord(ctx context.Context, args []string) error {
	fs := m.newFlags("record", "record --config FILE [--account NAME] --out DATA[.gz] [--duration D] [--interval I]", commands()["record"].summary)
	configPath := fs.String("config", "riskguard.yaml", "configuration file (exchange section and credentials)")
	account := fs.String("account", "", "the account to record, when the config lists several (accounts:)")
	out := fs.String("out", "", "recording to write: JSON lines, gzip-compressed when the name ends in .gz")
	duration := fs.Duration("duration", 0, "stop after this long (default: until interrupted)")
	interval := fs.Duration("interval", 0, "time between two snapshots (default: engine.interval)")
	logFormat := fs.String("log-format", "auto", "log format: text, json, or auto (text on a terminal)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := parseFlags(fs, args); err != nil {
		return err
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
	if cfg, err = pickAccount(cfg, *account); err != nil {
		fmt.Fprintln(m.Stderr, "riskguard record:", err)
		return exitCode(2)
	}
	if *interval == 0 {
		*interval = cfg.Engine.Interval
	}
	// The venue exchange.venue names, as run builds it.
	venue, err := m.venues.build(cfg, logger)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard record:", err)
		return exitCode(1)
	}
	rec, err := backtest.CreateRecorder(*out)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard record:", err)
		return exitCode(1)
	}
	// --duration ends the loop between two ticks rather than through the
	// reads' context, so that the last tick is not cut short by its
	// deadline (the rate limiter refuses a wait that would pass it).
	loop, stop := context.WithCancel(ctx)
	defer stop()
	if *duration > 0 {
		tm := time.AfterFunc(*duration, stop)
		defer tm.Stop()
	}
	// The guard's own reader: a tick the guard could not act on (positions
	// or index prices missing) is skipped, a failed symbols refresh keeps
	// the cached list.
	reader := engine.NewSnapshotReader(venue, cfg.Engine.SymbolsRefresh, logger)
	var written, skipped int
	var werr error
	engine.Every(loop, *interval, time.Now, func(now time.Time) {
		snap, err := reader.Read(ctx, now)
		switch {
		case err != nil && ctx.Err() != nil:
			// Interrupted mid-read: the tick in flight is lost, as promised.
		case err != nil:
			skipped++
			logger.Error("snapshot failed: tick skipped", "err", err)
		default:
			if err := rec.Write(backtest.Snapshot{Time: snap.Time, Positions: snap.Positions, IndexPrices: snap.IndexPrices, Symbols: snap.Symbols}); err != nil {
				// The file can no longer be trusted: stop.
				werr = err
				stop()
				return
			}
			written++
			if written == 1 || written%recordProgressEvery == 0 {
				fmt.Fprintf(m.Stderr, "riskguard record: %d ticks written (last at %s)\n", written, now.UTC().Format(time.RFC3339))
			}
		}
	})
	if cerr := rec.Close(); cerr != nil && werr == nil {
		werr = cerr
	}
	fmt.Fprintf(m.Stderr, "riskguard record: %d ticks written to %s, %d skipped\n", written, *out, skipped)
	if werr != nil {
		fmt.Fprintln(m.Stderr, "riskguard record:", werr)
		return exitCode(1)
	}
	return nil
}
