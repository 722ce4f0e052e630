package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/riskguard/riskguard/web"
)

// guard is the daemon's wiring: client, engine, metrics.
type guard struct {
	engine   *engine.Engine
	client   *exchange.Client
	registry *prometheus.Registry
	notifier *notifiers
	interval time.Duration
	// stats follows the client's requests for the status page;
	// controlToken guards the control API ("" disables it).
	stats        *exchangeStats
	controlToken string
	// allowedHosts are engine.allowed_hosts: the listener's host names
	// besides loopback.
	allowedHosts []string
	// ha is the guard's part in the cluster (ha.go); nil without ha.
	ha *haGuard
}

// newClient builds the exchange client the configuration describes.
func newClient(cfg *config, logger *slog.Logger, extra ...exchange.Option) (*exchange.Client, error) {
	x := cfg.Exchange
	if x.APIKey == "" || x.APISecret == "" {
		return nil, errors.New("credentials missing: set RISKGUARD_API_KEY and RISKGUARD_API_SECRET (or exchange.api_key_file / api_secret_file)")
	}
	opts := []exchange.Option{exchange.WithLogger(logger)}
	if x.Timeout > 0 {
		opts = append(opts, exchange.WithTimeout(x.Timeout))
	}
	// max_retries: 0 is one attempt; the loader fills the default.
	opts = append(opts, exchange.WithRetry(exchange.RetryPolicy{MaxAttempts: x.MaxRetries + 1}))
	if x.RateLimit > 0 {
		opts = append(opts, exchange.WithRateLimit(x.RateLimit, max(x.RateBurst, 1)))
	}
	if x.PositionsPath != "" {
		opts = append(opts, exchange.WithPositionsPath(x.PositionsPath))
	}
	if x.OrderPath != "" {
		opts = append(opts, exchange.WithOrderPath(x.OrderPath))
	}
	if x.ClockSync > 0 {
		opts = append(opts, exchange.WithClockSync(x.ClockSync))
	}
	c, err := exchange.New(x.BaseURL, x.APIKey, x.APISecret, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("exchange client: %w", err)
	}
	return c, nil
}

// newNotifier builds what the engine notifies through: the dispatcher of
// the notify section's channels, or the log when there is none.
func newNotifier(cfg *config, logger *slog.Logger, reg prometheus.Registerer) (engine.Notifier, *notify.Dispatcher, error) {
	if cfg.Notify == nil {
		return newLogNotifier(logger), nil, nil
	}
	d, err := notify.NewDispatcher(cfg.Notify, notify.WithLogger(logger))
	if err != nil {
		return nil, nil, fmt.Errorf("notify: %w", err)
	}
	if reg != nil {
		reg.MustRegister(d.Collector())
	}
	d.Start()
	return d, d, nil
}

// newGuard wires a client, the notifications and an engine from the
// configuration. onTick, when set, is called after every tick of Run (the
// demo draws its table from it).
func newGuard(cfg *config, logger *slog.Logger, dryRun bool, onTick func(*engine.TickReport, error), extra ...exchange.Option) (*guard, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := engine.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	stats := &exchangeStats{}
	hook := exchange.WithRequestHook(func(ri exchange.RequestInfo) {
		metrics.ObserveRequest(ri.Route, ri.Status)
		stats.observe(ri, time.Now())
	})
	client, err := newClient(cfg, logger, append([]exchange.Option{hook}, extra...)...)
	if err != nil {
		return nil, err
	}
	notifier, err := newNotifiers(cfg, logger, reg)
	if err != nil {
		return nil, err
	}
	user := onTick
	onTick = func(rep *engine.TickReport, err error) {
		notifier.heartbeat(err == nil)
		if user != nil {
			user(rep, err)
		}
	}
	ec := cfg.Engine
	ec.DryRun = ec.DryRun || dryRun
	deps := engine.Deps{
		Reader: client, Actuator: client, Notifier: notifier, Logger: logger, Metrics: metrics, Now: time.Now, OnTick: onTick,
	}
	var hg *haGuard
	if !ec.DryRun {
		account := ""
		if cfg.HA != nil {
			account = cfg.HA.Account
		}
		if hg, err = newHA(cfg, account, logger, reg, notifier, &deps); err != nil {
			notifier.close(context.Background())
			return nil, err
		}
	}
	eng, err := engine.New(ec, cfg.Rules, deps)
	if err != nil {
		notifier.close(context.Background())
		return nil, err
	}
	return &guard{engine: eng, client: client, registry: reg, notifier: notifier, interval: ec.Interval, stats: stats, controlToken: cfg.ControlToken, allowedHosts: cfg.Engine.AllowedHosts, ha: hg}, nil
}

// close flushes the engine's state and delivers the notifications still
// queued, giving up after ten seconds.
func (g *guard) close(ctx context.Context, logger *slog.Logger) {
	if err := g.engine.Close(); err != nil {
		logger.Error("closing the engine", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := g.notifier.close(ctx); err != nil {
		logger.Error("notifications not delivered before exit", "err", err)
	}
}

// healthMaxAge is how old the last complete snapshot may be for the
// daemon to be healthy: three intervals, and never less than ten seconds.
func healthMaxAge(interval time.Duration) time.Duration {
	return max(3*interval, 10*time.Second)
}

// serve starts the listener of /metrics, /healthz, the status page and the
// control API; it stops with ctx.
func (g *guard) serve(ctx context.Context, addr string, logger *slog.Logger) error {
	srv, err := g.web(logger)
	if err != nil {
		return err
	}
	return srv.Start(ctx, addr)
}

// web is the guard's HTTP surface, not yet listening: serve starts it, the
// demo serves it on a listener of its own whose address it prints.
func (g *guard) web(logger *slog.Logger) (*web.Server, error) {
	return web.New(web.Options{
		Guard: g.engine, Controls: g.engine, Exchange: g.stats,
		Metrics: promhttp.HandlerFor(g.registry, promhttp.HandlerOpts{}),
		Token:   g.controlToken, AllowedHosts: g.allowedHosts, HealthMaxAge: healthMaxAge(g.interval), Logger: logger, Now: time.Now,
		Cluster: g.ha.cluster(),
	})
}

func (m *Main) runRun(ctx context.Context, args []string) error {
	fs := m.newFlags("run", "run --config FILE [--once] [--dry-run] [--allow-unknown-symbols] [--log-format text|json] [--log-level LEVEL]", commands()["run"].summary)
	configPath := fs.String("config", "riskguard.yaml", "configuration file")
	once := fs.Bool("once", false, "run one tick and exit; non-zero when the snapshot was incomplete")
	dryRun := fs.Bool("dry-run", false, "log and audit the actions instead of sending them")
	logFormat := fs.String("log-format", "auto", "log format: text, json, or auto (text on a terminal)")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn, error")
	allowUnknown := fs.Bool("allow-unknown-symbols", false, "start (and reload) even when a rule names a symbol the exchange does not list")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, logger, err := m.setup("run", *configPath, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	sd := newSystemd(m.Getenv, cfg.Engine.Interval, logger)
	g, err := newGuard(cfg, logger, *dryRun, sd.onTick)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard run:", err)
		return exitCode(1)
	}
	defer g.close(ctx, logger)
	if err := checkSymbols(ctx, g, cfg, *allowUnknown, false, logger); err != nil {
		fmt.Fprintln(m.Stderr, err)
		fmt.Fprintln(m.Stderr, "riskguard run: refusing to start: a rule would guard nothing (--allow-unknown-symbols starts anyway)")
		return exitCode(1)
	}
	dry := cfg.Engine.DryRun || *dryRun
	if *once {
		rep, err := g.engine.Tick(ctx, time.Now())
		if err != nil {
			logger.Error("tick failed: no action taken on missing data", "err", err)
			return exitCode(1)
		}
		logger.Info("tick done", "positions", rep.Positions, "evaluations", rep.Evaluations, "transitions", len(rep.Transitions), "actions", len(rep.Actions))
		return nil
	}
	if cfg.Listen != "" {
		if err := g.serve(ctx, cfg.Listen, logger); err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				err = fmt.Errorf("%w: another riskguard (or another program) listens there: stop it, or change engine.listen (RISKGUARD_ENGINE_LISTEN=127.0.0.1:0 picks a free port)", err)
			}
			fmt.Fprintln(m.Stderr, "riskguard run:", err)
			return exitCode(1)
		}
	}
	logger.Info("riskguard started", "rules", len(cfg.Rules.Rules), "interval", cfg.Engine.Interval, "fast_interval", cfg.Engine.FastInterval, "dry_run", dry, "exchange", cfg.Exchange.BaseURL)
	g.notifier.Send(ctx, notify.Message{Time: time.Now(), Kind: notify.KindLifecycle, Severity: "info",
		Text: fmt.Sprintf("riskguard started: %d rules, dry run %t", len(cfg.Rules.Rules), dry)})
	ctls := newControls(cfg.Engine.ControlFailAfter, g.notifier, g.registry) // Telegram control, when a channel has control_chat_ids
	ctls.start(ctx, cfg.Notify, g.engine, logger)
	defer ctls.stop()
	go m.reloads(ctx, *configPath, cfg, g, ctls, *allowUnknown, logger)
	stopHA := startHA(g.ha)
	err = g.engine.Run(ctx)
	stopHA() // after the last call: a standby may act at once
	sd.stopping(ctx)
	logger.Info("riskguard stopping")
	g.notifier.Send(context.WithoutCancel(ctx), notify.Message{Time: time.Now(), Kind: notify.KindLifecycle, Severity: "warning", Text: "riskguard stopped"})
	return err
}

// setup builds the logger and loads the configuration, reporting problems
// on stderr; a non-nil error is the exit status, already reported.
func (m *Main) setup(cmd, configPath, logFormat, logLevel string) (*config, *slog.Logger, error) {
	logger, err := m.newLogger(logFormat, logLevel)
	if err != nil {
		fmt.Fprintf(m.Stderr, "riskguard %s: %v\n", cmd, err)
		return nil, nil, exitCode(2)
	}
	cfg, err := loadConfig(configPath, m.Getenv)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintln(m.Stderr, noConfig(cmd, configPath))
		return nil, nil, exitCode(1)
	}
	if err != nil {
		fmt.Fprintln(m.Stderr, err)
		return nil, nil, exitCode(1)
	}
	for _, w := range cfg.Warnings {
		logger.Warn(w)
	}
	return cfg, logger, nil
}

// noConfig is the one line a command says when its configuration file
// does not exist: where it looked, and the next step.
func noConfig(cmd, path string) string {
	return fmt.Sprintf("riskguard %s: no config at %s: copy rules.example.yaml to it and set exchange.base_url (README: Start here), or pass --config FILE", cmd, path)
}

// checkSymbols reports every rule's symbols: entry the exchange does not
// list: an error unless allowUnknown, then warnings. When the exchange
// cannot be read it warns and lets the guard start: a transient outage
// must not keep the guard down.
//
// At start the engine reads the symbols (its first tick then uses them); a
// reload checks against the list the ticks last read, waiting for no tick.
func checkSymbols(ctx context.Context, g *guard, cfg *config, allowUnknown, reload bool, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	list := func(ctx context.Context) ([]string, error) { return g.engine.Symbols(ctx, time.Now()) }
	if reload {
		list = func(context.Context) ([]string, error) {
			if names := g.engine.ListedSymbols(); names != nil {
				return names, nil
			}
			return nil, errors.New("no symbols read yet")
		}
	}
	unknown, err := unknownSymbols(ctx, list, cfg.Rules)
	if err != nil {
		logger.Warn("the rules' symbols could not be checked against the exchange; starting anyway", "err", err)
		return nil
	}
	if len(unknown) == 0 {
		return nil
	}
	if allowUnknown {
		for _, e := range unknown {
			logger.Warn(e.Error())
		}
		return nil
	}
	return &rules.ErrorList{Errors: unknown}
}

// reloads applies the configuration file again on every reload signal,
// after reopening the audit log (logrotate's convention for SIGHUP). A
// file that does not load is rejected whole: the old rules keep running
// with their state.
func (m *Main) reloads(ctx context.Context, path string, running *config, g *guard, ctls *controls, allowUnknown bool, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Reload:
		}
		if err := g.engine.ReopenAudit(ctx, time.Now()); err != nil {
			logger.Error("reopen audit log", "err", err)
		} else {
			logger.Info("audit log reopened")
		}
		cfg, err := loadConfig(path, m.Getenv)
		if err == nil {
			err = checkSymbols(ctx, g, cfg, allowUnknown, true, logger)
		}
		if err == nil {
			// All or nothing: a reload that changes what only a restart
			// applies is refused by name, rather than half applied.
			if changed := restartOnly(running, cfg); len(changed) > 0 {
				err = fmt.Errorf("%s changed, which takes a restart to apply; the rules were not reloaded either (all or nothing): restart the daemon, or undo the change to reload the rules", strings.Join(changed, ", "))
			}
		}
		if err != nil {
			logger.Error("config reload rejected; the old rules keep running", "err", err)
			g.notifier.Send(ctx, notify.Message{Time: time.Now(), Kind: notify.KindReload, Severity: "critical",
				Text: "config reload rejected; the old rules keep running: " + err.Error()})
			continue
		}
		changed := hotChanges(running, cfg)
		if slices.Contains(changed, "notify") {
			if err := g.notifier.replace(ctx, cfg, logger); err != nil {
				logger.Error("config reload rejected; the old rules and channels keep running", "err", err)
				g.notifier.Send(ctx, notify.Message{Time: time.Now(), Kind: notify.KindReload, Severity: "critical",
					Text: "config reload rejected; the old rules and channels keep running: " + err.Error()})
				continue
			}
			ctls.start(ctx, cfg.Notify, g.engine, logger)
		}
		g.engine.Reconfigure(time.Now(), cfg.Rules, cfg.Engine)
		running = cfg
		logger.Info("config reloaded", "rules", len(cfg.Rules.Rules), "settings", strings.Join(changed, ","))
	}
}

// restartOnly names the settings that differ between the running
// configuration and a new one and that only a restart applies: the
// exchange client's (the exchange section's keys but index_names, an
// engine setting), the engine settings whose row in engine.Settings is
// Restart (interval, dry_run, audit_log, state_file) and engine.listen.
// Every other setting, the notify section and the rules are applied by a
// reload.
func restartOnly(running, next *config) []string {
	var out []string
	va, vb := reflect.ValueOf(running.Exchange), reflect.ValueOf(next.Exchange)
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, "exchange."+snake(va.Type().Field(i).Name))
		}
	}
	for _, s := range engineSettings() {
		if s.Restart && !s.Equal(running.Engine, next.Engine) {
			out = append(out, s.Key)
		}
	}
	if running.Listen != next.Listen {
		out = append(out, "engine.listen")
	}
	return out
}

// hotChanges names the settings a reload changes without a restart: the
// engine settings whose row is not Restart, and the notify section.
func hotChanges(running, next *config) []string {
	var out []string
	for _, s := range engineSettings() {
		if !s.Restart && !s.Equal(running.Engine, next.Engine) {
			out = append(out, s.Key)
		}
	}
	if !reflect.DeepEqual(running.Notify, next.Notify) {
		out = append(out, "notify")
	}
	return out
}

// engineSettings returns the rows of engine.Settings in the order of
// engine.Config's fields, the order a reload's messages name them in.
func engineSettings() []engine.Setting {
	t := reflect.TypeFor[engine.Config]()
	index := func(s engine.Setting) int {
		f, ok := t.FieldByName(s.Field)
		if !ok {
			panic("engine.Settings: no field " + s.Field) // TestSettingsCoverConfig in package engine
		}
		return f.Index[0]
	}
	rows := engine.Settings()
	slices.SortStableFunc(rows, func(a, b engine.Setting) int { return cmp.Compare(index(a), index(b)) })
	return rows
}

// snake writes a Go field name as its configuration key: IndexNames is
// index_names, BaseURL base_url, APIKey api_key.
func snake(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		upper := unicode.IsUpper(c)
		if upper && i > 0 && (unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}
