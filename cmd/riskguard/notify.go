package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/riskguard/riskguard/notify"
)

// runNotify is `riskguard notify test --config FILE [--channel NAME]`: it
// sends a test message through the configured channels, synchronously, so a
// user can check the set-up before trusting it.
func (m *Main) runNotify(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "test" {
		fmt.Fprintln(m.Stderr, "usage: riskguard notify test --config FILE [--channel NAME]")
		return exitCode(2)
	}
	fs := flag.NewFlagSet("notify test", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	configPath := fs.String("config", "riskguard.yaml", "configuration file")
	channel := fs.String("channel", "", "channel to test (default: every channel)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return exitCode(2)
	}
	cfg, err := loadConfig(*configPath, m.Getenv)
	if err != nil {
		fmt.Fprintln(m.Stderr, err)
		return exitCode(1)
	}
	if cfg.Notify == nil {
		fmt.Fprintf(m.Stderr, "riskguard notify: %s has no notify section\n", *configPath)
		return exitCode(1)
	}
	logger, err := newLogger(m.Stderr, "auto", "warn")
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
	target := *channel
	if target == "" {
		target = "every channel"
	}
	if err := d.Test(ctx, *channel); err != nil {
		fmt.Fprintf(m.Stderr, "riskguard notify: test message to %s failed: %v\n", target, err)
		return exitCode(1)
	}
	fmt.Fprintf(m.Stdout, "test message sent to %s\n", target)
	return nil
}
