package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/web"
)

// fleet is what `run` guards: one guard per account (one for a file
// without accounts:), over one registry and one set of channels. Each
// engine ticks on its own goroutine, so that an account whose exchange
// hangs never holds another's ticks.
type fleet struct {
	sh     *shared
	guards []*guard // in the file's order
}

// accountsOf lists the accounts of cfg: its accounts: section, or cfg
// itself without one.
func accountsOf(cfg *config.Config) []*config.Config {
	if len(cfg.Accounts) > 0 {
		return cfg.Accounts
	}
	return []*config.Config{cfg}
}

// newFleet wires every account of cfg, each venue built by vs.
func newFleet(cfg *config.Config, vs venues, logger *slog.Logger, dryRun bool, onTick func(*engine.TickReport, error)) (*fleet, error) {
	sh, err := newShared(cfg, vs, logger)
	if err != nil {
		return nil, err
	}
	f := &fleet{sh: sh}
	for _, a := range accountsOf(cfg) {
		g, err := newAccountGuard(cfg, a, sh, logger, dryRun, onTick)
		if err != nil {
			f.close(context.Background(), logger)
			return nil, err
		}
		f.guards = append(f.guards, g)
	}
	return f, nil
}

// close flushes every engine's state, then delivers the notifications
// still queued, giving up after ten seconds.
func (f *fleet) close(ctx context.Context, logger *slog.Logger) {
	for _, g := range f.guards {
		g.close(ctx, logger)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := f.sh.notifier.close(ctx); err != nil {
		logger.Error("notifications not delivered before exit", "err", err)
	}
}

// haNode is the guard whose node the process campaigns with (every
// account's seat is on the one node); nil without ha.
func (f *fleet) haNode() *haGuard {
	for _, g := range f.guards {
		if g.ha != nil {
			return g.ha
		}
	}
	return nil
}

// multi reports whether the fleet guards named accounts (accounts:).
func (f *fleet) multi() bool { return f.guards[0].name != "" }

// run ticks every engine until ctx is done.
func (f *fleet) run(ctx context.Context) error {
	if !f.multi() {
		return f.guards[0].engine.Run(ctx)
	}
	errs := make([]error, len(f.guards))
	var wg sync.WaitGroup
	for i, g := range f.guards {
		wg.Go(func() {
			if err := g.engine.Run(ctx); err != nil {
				errs[i] = fmt.Errorf("account %s: %w", g.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// web is the one HTTP surface of every account.
func (f *fleet) web(logger *slog.Logger) (*web.Server, error) {
	g := f.guards[0]
	if !f.multi() {
		return g.web(logger)
	}
	opts := web.Options{
		Metrics: promhttp.HandlerFor(g.registry, promhttp.HandlerOpts{}),
		Token:   g.controlToken, AllowedHosts: g.allowedHosts, HealthMaxAge: healthMaxAge(g.interval), Logger: logger, Now: time.Now,
	}
	for _, a := range f.guards {
		opts.Accounts = append(opts.Accounts, web.Account{Name: a.name, Guard: a.engine, Controls: a.engine.Control(), Exchange: a.stats, Cluster: a.ha.cluster()})
	}
	return web.New(opts)
}

// controller is what the Telegram control steers: the engine, or every
// account's.
func (f *fleet) controller() notify.Controller {
	if !f.multi() {
		return telegramController{e: f.guards[0].engine, ctl: f.guards[0].engine.Control(), fwd: newForwarder(f.guards[0])}
	}
	c := accountsController{}
	for _, g := range f.guards {
		c.names = append(c.names, g.name)
		c.ctls = append(c.ctls, telegramController{e: g.engine, ctl: g.engine.Control(), fwd: newForwarder(g)})
	}
	return c
}

// accountsController is the Telegram control of several accounts. A
// command may name one first (/pause bot-2 30m, /status main: ForAccount);
// one that names none says every account (/status) or acts on every
// account (/pause, /resume, /ack: the safe reading), and /silence takes a
// target on every account that knows it (or NAME:target).
type accountsController struct {
	names []string
	ctls  []telegramController
}

var (
	_ notify.Controller      = accountsController{}
	_ notify.AccountSelector = accountsController{}
)

// ForAccount is the control of the account name alone.
func (c accountsController) ForAccount(name string) (notify.Controller, bool) {
	for i, n := range c.names {
		if n == name {
			return prefixed{name: n, ctl: c.ctls[i]}, true
		}
	}
	return nil, false
}

// prefixed is one account's control whose answers start with its name.
type prefixed struct {
	name string
	ctl  telegramController
}

func (p prefixed) say(s string, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("%s: %w", p.name, err)
	}
	return "[" + p.name + "] " + s, nil
}

// Status says the account's state.
func (p prefixed) Status(ctx context.Context) string {
	s, _ := p.say(p.ctl.Status(ctx), nil)
	return s
}

// Pause pauses the account.
func (p prefixed) Pause(ctx context.Context, by string, d time.Duration) (string, error) {
	return p.say(p.ctl.Pause(ctx, by, d))
}

// Resume resumes the account.
func (p prefixed) Resume(ctx context.Context, by string) (string, error) {
	return p.say(p.ctl.Resume(ctx, by))
}

// Silence silences target on the account.
func (p prefixed) Silence(ctx context.Context, by, target string, d time.Duration) (string, error) {
	return p.say(p.ctl.Silence(ctx, by, target, d))
}

// Ack acknowledges the account's firing alerts.
func (p prefixed) Ack(ctx context.Context, by string) (string, error) {
	return p.say(p.ctl.Ack(ctx, by))
}

// each runs do on every account and joins the answers, one line each.
func (c accountsController) each(do func(telegramController) (string, error)) (string, error) {
	var lines []string
	var errs []error
	for i, ctl := range c.ctls {
		s, err := do(ctl)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.names[i], err))
			continue
		}
		lines = append(lines, "["+c.names[i]+"] "+s)
	}
	return strings.Join(lines, "\n"), errors.Join(errs...)
}

// Status says every account's state.
func (c accountsController) Status(ctx context.Context) string {
	s, _ := c.each(func(t telegramController) (string, error) { return t.Status(ctx), nil })
	return s
}

// Pause pauses every account.
func (c accountsController) Pause(ctx context.Context, by string, d time.Duration) (string, error) {
	return c.each(func(t telegramController) (string, error) { return t.Pause(ctx, by, d) })
}

// Resume resumes every account.
func (c accountsController) Resume(ctx context.Context, by string) (string, error) {
	return c.each(func(t telegramController) (string, error) { return t.Resume(ctx, by) })
}

// Ack acknowledges the firing alerts of every account.
func (c accountsController) Ack(ctx context.Context, by string) (string, error) {
	return c.each(func(t telegramController) (string, error) { return t.Ack(ctx, by) })
}

// Silence silences target on the account it names (NAME:target), or on
// every account that knows it.
func (c accountsController) Silence(ctx context.Context, by, target string, d time.Duration) (string, error) {
	if name, rest, ok := strings.Cut(target, ":"); ok {
		for i, n := range c.names {
			if n == name {
				s, err := c.ctls[i].Silence(ctx, by, rest, d)
				return "[" + n + "] " + s, err
			}
		}
		return "", fmt.Errorf("no account %q: the accounts are %s", name, strings.Join(c.names, ", "))
	}
	var lines []string
	var last error
	for i, ctl := range c.ctls {
		s, err := ctl.Silence(ctx, by, target, d)
		if err != nil {
			last = err
			continue
		}
		lines = append(lines, "["+c.names[i]+"] "+s)
	}
	if len(lines) == 0 {
		return "", last
	}
	return strings.Join(lines, "\n"), nil
}
