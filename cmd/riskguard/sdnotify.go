package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/internal/sdnotify"
)

// systemd tells systemd (a Type=notify unit with WatchdogSec=) how the
// daemon is doing: READY=1 after the first healthy tick, WATCHDOG=1 after
// every healthy one, STOPPING=1 at shutdown. A guard whose ticks keep
// failing stops pinging, so the watchdog restarts it. Outside systemd it
// does nothing.
type systemd struct {
	n      *sdnotify.Notifier
	logger *slog.Logger
	ready  atomic.Bool
	// failing is set while sends fail, so a broken socket is logged once
	// rather than every tick.
	failing atomic.Bool
}

// newSystemd reads NOTIFY_SOCKET and WATCHDOG_USEC through getenv and warns
// when the watchdog would fire between two healthy ticks of interval.
func newSystemd(getenv func(string) string, interval time.Duration, logger *slog.Logger) *systemd {
	s := &systemd{n: sdnotify.New(getenv), logger: logger}
	if wd := sdnotify.WatchdogInterval(getenv); wd > 0 && s.n.Enabled() && 2*interval > wd {
		logger.Warn("engine.interval is more than half of the systemd watchdog timeout: healthy ticks may not ping it in time",
			"interval", interval, "watchdog", wd)
	}
	return s
}

// onTick is the engine's tick hook; it must not block, and a send to a
// local datagram socket does not (sdnotify bounds it).
func (s *systemd) onTick(_ *engine.TickReport, err error) {
	if err != nil || !s.n.Enabled() {
		return
	}
	ctx := context.Background()
	if !s.ready.Swap(true) {
		s.send(ctx, sdnotify.StateReady)
	}
	s.send(ctx, sdnotify.StateWatchdog)
}

// stopping says the daemon is shutting down on purpose.
func (s *systemd) stopping(ctx context.Context) {
	s.send(context.WithoutCancel(ctx), sdnotify.StateStopping)
}

func (s *systemd) send(ctx context.Context, state string) {
	if err := s.n.Notify(ctx, state); err != nil {
		if !s.failing.Swap(true) {
			s.logger.Warn("systemd notification failed", "state", state, "err", err)
		}
		return
	}
	s.failing.Store(false)
}
