package main

import (
	"context"
	"fmt"
	"time"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/notify"
)

// runNotify is `riskguard notify test --config FILE [--channel NAME]`: it
// sends a test message through the configured channels, synchronously, so a
// user can check the set-up before trusting it.
func (m *Main) runNotify(ctx context.Context, args []string) error {
	fs := m.newFlags("notify test", "notify test --config FILE [--channel NAME] [--timeout 30s]",
		"Sends a test message through every configured channel (or --channel NAME), all at once,\nand reports each channel's own result.")
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fs.Usage()
		return errHelp
	}
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprintln(m.Stderr, "riskguard notify: the only subcommand is test")
		fs.Usage()
		return exitCode(2)
	}
	configPath := fs.String("config", "riskguard.yaml", "configuration file")
	channel := fs.String("channel", "", "channel to test (default: every channel)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	cfg, err := config.Load(*configPath, m.Getenv, config.Options{Venues: m.venues.specs()})
	if err != nil {
		fmt.Fprintln(m.Stderr, err)
		return exitCode(1)
	}
	if cfg.Notify == nil {
		fmt.Fprintf(m.Stderr, "riskguard notify: %s has no notify section\n", *configPath)
		return exitCode(1)
	}
	// At info, so that the log channel's test message shows.
	logger, err := m.newLogger("text", "info")
	if err != nil {
		return err
	}
	d, err := notify.NewDispatcher(cfg.Notify, notify.WithLogger(logger))
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard notify:", err)
		return exitCode(1)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	defer d.Close(ctx)
	results, err := d.Test(ctx, *channel)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard notify:", err)
		return exitCode(1)
	}
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
			fmt.Fprintf(m.Stdout, "%s: failed: %v\n", r.Channel, r.Err)
			continue
		}
		fmt.Fprintf(m.Stdout, "%s: sent\n", r.Channel)
	}
	if failed > 0 {
		fmt.Fprintf(m.Stderr, "riskguard notify: %d of %d %s failed\n", failed, len(results), plural(len(results), "channel", "channels"))
		return exitCode(1)
	}
	return nil
}
