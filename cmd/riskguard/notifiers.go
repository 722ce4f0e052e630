package main

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/notify"
)

// notifiers is the notification path the engine and the daemon send
// through: the notify section's dispatcher, or the log without one. A
// reload swaps what is behind it, so a changed notify section applies
// without a restart.
type notifiers struct {
	reg prometheus.Registerer // the dispatcher's collector is registered here; nil for none

	mu sync.RWMutex
	n  journal.Notifier
	d  *notify.Dispatcher // nil without channels
}

// newNotifiers builds the notification path of cfg.
func newNotifiers(cfg *config.Config, logger *slog.Logger, reg prometheus.Registerer) (*notifiers, error) {
	s := &notifiers{reg: reg}
	n, d, err := newNotifier(cfg, logger, reg)
	if err != nil {
		return nil, err
	}
	s.n, s.d = n, d
	return s, nil
}

// Send delivers m through the current channels.
func (s *notifiers) Send(ctx context.Context, m notify.Message) error {
	s.mu.RLock()
	n := s.n
	s.mu.RUnlock()
	return n.Send(ctx, m)
}

// heartbeat passes a tick's health to the dispatcher's heartbeat channel,
// if any.
func (s *notifiers) heartbeat(ok bool) {
	s.mu.RLock()
	d := s.d
	s.mu.RUnlock()
	if d != nil {
		d.Heartbeat(ok)
	}
}

// replace builds the channels of cfg and puts them in place of the current
// ones, which deliver what they have queued before they close. On error
// nothing changes.
func (s *notifiers) replace(ctx context.Context, cfg *config.Config, logger *slog.Logger) error {
	s.mu.Lock()
	old := s.d
	if old != nil && s.reg != nil {
		s.reg.Unregister(old.Collector()) // the new dispatcher's metrics take their names
	}
	n, d, err := newNotifier(cfg, logger, s.reg)
	if err != nil {
		if old != nil && s.reg != nil {
			_ = s.reg.Register(old.Collector())
		}
		s.mu.Unlock()
		return err
	}
	s.n, s.d = n, d
	s.mu.Unlock()
	if old != nil {
		go old.Close(context.WithoutCancel(ctx)) // drains its queue
	}
	return nil
}

// close delivers what is queued, within ctx.
func (s *notifiers) close(ctx context.Context) error {
	s.mu.Lock()
	d := s.d
	s.d = nil
	s.mu.Unlock()
	if d == nil {
		return nil
	}
	return d.Close(ctx)
}
