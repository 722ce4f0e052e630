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
	"sync"
	"syscall"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/riskguard/riskguard/web"
)

// guard is the daemon's wiring of one account: client, engine, metrics.
type guard struct {
	// name is the account's name under accounts:, "" without the section.
	name     string
	engine   *engine.Engine
	client   exchange.Venue
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
	// ownsShared: close also closes the notifications (newGuard's guard;
	// a fleet closes them once for all its accounts).
	ownsShared bool
}

// shared is what the accounts of one process share: the Prometheus
// registry (one /metrics) and the notification channels.
type shared struct {
	registry *prometheus.Registry
	notifier *notifiers
	// node is this process's place in the cluster (ha:), made with the
	// first account that acts; nil without ha or in a dry run.
	node *ha.Node
	// venues maps each account's exchange.venue to its constructor.
	venues venues
}

// newShared builds the registry, with the Go and process collectors, and
// the notifications of cfg; vs builds the accounts' venues.
func newShared(cfg *config.Config, vs venues, logger *slog.Logger) (*shared, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	notifier, err := newNotifiers(cfg, logger, reg)
	if err != nil {
		return nil, err
	}
	return &shared{registry: reg, notifier: notifier, venues: vs}, nil
}

// newClient builds the exchange client the configuration describes.
func newClient(cfg *config.Config, logger *slog.Logger, extra ...exchange.Option) (*exchange.Client, error) {
	x := cfg.Exchange
	if x.APIKey == "" || x.APISecret == "" {
		// Say which is missing: a key set and a secret forgotten reads
		// otherwise as if both were.
		var missing []string
		if x.APIKey == "" {
			missing = append(missing, "the API key (RISKGUARD_API_KEY, or exchange.api_key_file)")
		}
		if x.APISecret == "" {
			missing = append(missing, "the API secret (RISKGUARD_API_SECRET, or exchange.api_secret_file)")
		}
		return nil, fmt.Errorf("credentials missing: %s", strings.Join(missing, " and "))
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
	if x.ClientOrderIDField != "" {
		opts = append(opts, exchange.WithClientOrderIDField(x.ClientOrderIDField))
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
func newNotifier(cfg *config.Config, logger *slog.Logger, reg prometheus.Registerer) (journal.Notifier, *notify.Dispatcher, error) {
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

// newGuard wires a client (the venue of vs that cfg names), the
// notifications and an engine from the configuration of one account.
// onTick, when set, is called after every tick of Run (the demo draws its
// table from it).
func newGuard(cfg *config.Config, vs venues, logger *slog.Logger, dryRun bool, onTick func(*engine.TickReport, error), extra ...exchange.Option) (*guard, error) {
	sh, err := newShared(cfg, vs, logger)
	if err != nil {
		return nil, err
	}
	g, err := newAccountGuard(cfg, cfg, sh, logger, dryRun, onTick, extra...)
	if err != nil {
		sh.notifier.close(context.Background())
		return nil, err
	}
	g.ownsShared = true
	return g, nil
}

// newAccountGuard wires the client and the engine of the account acct of
// cfg (acct is cfg itself in a file without accounts:) over what the
// process shares. Under accounts: every metric the account registers
// carries account="NAME", and its audit records and notifications carry
// the name; without it nothing is added, so nothing changes.
func newAccountGuard(cfg, acct *config.Config, sh *shared, logger *slog.Logger, dryRun bool, onTick func(*engine.TickReport, error), extra ...exchange.Option) (*guard, error) {
	var reg prometheus.Registerer = sh.registry
	if acct.Name != "" {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"account": acct.Name}, reg)
		logger = logger.With("account", acct.Name)
	}
	metrics, err := journal.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	stats := &exchangeStats{}
	hook := exchange.WithRequestHook(func(ri exchange.RequestInfo) {
		metrics.ObserveRequest(ri.Route, ri.Status)
		stats.observe(ri, time.Now())
	})
	client, err := sh.venues.build(acct, logger, append([]exchange.Option{hook}, extra...)...)
	if err != nil {
		if acct.Name != "" {
			err = fmt.Errorf("account %s: %w", acct.Name, err)
		}
		return nil, err
	}
	notifier := sh.notifier
	user := onTick
	onTick = func(rep *engine.TickReport, err error) {
		notifier.heartbeat(err == nil)
		if user != nil {
			user(rep, err)
		}
	}
	ec := acct.Engine
	ec.DryRun = ec.DryRun || dryRun
	deps := engine.Deps{
		Reader: client, Actuator: client, Notifier: notifier, Logger: logger, Metrics: metrics, Now: time.Now, OnTick: onTick, Account: acct.Name,
	}
	var hg *haGuard
	if !ec.DryRun && cfg.HA != nil {
		// One node (one etcd client, one lease) for the process, one seat
		// (one election) per account.
		if sh.node == nil {
			if sh.node, err = newHANode(cfg, logger, sh.registry, notifier); err != nil {
				return nil, err
			}
		}
		account := acct.Name
		if account == "" {
			account = cfg.HA.Account
		}
		hg = attachSeat(sh.node, account, &deps)
	}
	eng, err := engine.New(ec, acct.Rules, deps)
	if err != nil {
		if acct.Name != "" {
			err = fmt.Errorf("account %s: %w", acct.Name, err)
		}
		return nil, err
	}
	return &guard{name: acct.Name, engine: eng, client: client, registry: sh.registry, notifier: notifier, interval: ec.Interval, stats: stats,
		controlToken: cfg.ControlToken, allowedHosts: servedHosts(cfg), ha: hg}, nil
}

// servedHosts are the host names the listener answers to besides
// loopback: engine.allowed_hosts and, under ha:, the address this process
// advertises, which the other processes' Telegram forwarding and the CLI
// sent on by a standby's 421 name in their Host header.
func servedHosts(cfg *config.Config) []string {
	hosts := cfg.Engine.AllowedHosts
	if cfg.HA != nil && cfg.HA.Advertise != "" {
		hosts = append(slices.Clip(hosts), cfg.HA.Advertise)
	}
	return hosts
}

// close flushes the engine's state and delivers the notifications still
// queued, giving up after ten seconds.
func (g *guard) close(ctx context.Context, logger *slog.Logger) {
	if err := g.engine.Close(); err != nil {
		logger.Error("closing the engine", "err", err)
	}
	if !g.ownsShared {
		return
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

// web is the guard's HTTP surface, not yet listening: run starts it (through
// fleet.web), the demo serves it on a listener of its own whose address it
// prints.
func (g *guard) web(logger *slog.Logger) (*web.Server, error) {
	return web.New(web.Options{
		Guard: g.engine, Controls: g.engine.Control(), Exchange: g.stats,
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
	f, err := newFleet(cfg, m.venues, logger, *dryRun, sd.onTick)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard run:", err)
		return exitCode(1)
	}
	defer f.close(ctx, logger)
	accts := accountsOf(cfg)
	if err := checkFleetSymbols(ctx, f, accts, *allowUnknown, false, logger); err != nil {
		fmt.Fprintln(m.Stderr, err)
		fmt.Fprintln(m.Stderr, "riskguard run: refusing to start: a rule would guard nothing (--allow-unknown-symbols starts anyway)")
		return exitCode(1)
	}
	dry := cfg.Engine.DryRun || *dryRun
	if *once {
		failed := false
		for _, g := range f.guards {
			l := logger
			if g.name != "" {
				l = logger.With("account", g.name)
			}
			rep, err := g.engine.Tick(ctx, time.Now())
			if err != nil {
				l.Error("tick failed: no action taken on missing data", "err", err)
				failed = true
				continue
			}
			l.Info("tick done", "positions", rep.Positions, "evaluations", rep.Evaluations, "transitions", len(rep.Transitions), "actions", len(rep.Actions))
		}
		if failed {
			return exitCode(1)
		}
		return nil
	}
	if cfg.Listen != "" {
		srv, err := f.web(logger)
		if err == nil {
			err = srv.Start(ctx, cfg.Listen)
		}
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				err = fmt.Errorf("%w: another riskguard (or another program) listens there: stop it, or change engine.listen (RISKGUARD_ENGINE_LISTEN=127.0.0.1:0 picks a free port)", err)
			}
			fmt.Fprintln(m.Stderr, "riskguard run:", err)
			return exitCode(1)
		}
	}
	text := fmt.Sprintf("riskguard started: %d rules, dry run %t", len(cfg.Rules.Rules), dry)
	if f.multi() {
		rulesN := 0
		for _, a := range accts {
			rulesN += len(a.Rules.Rules)
			logger.Info("account guarded", "account", a.Name, "rules", len(a.Rules.Rules), "dry_run", a.Engine.DryRun || *dryRun, "exchange", a.Exchange.BaseURL)
		}
		logger.Info("riskguard started", "accounts", len(accts), "rules", rulesN, "interval", cfg.Engine.Interval, "fast_interval", cfg.Engine.FastInterval, "dry_run", dry)
		text = fmt.Sprintf("riskguard started: %d accounts (%s), %d rules, dry run %t", len(accts), strings.Join(cfg.AccountNames(), ", "), rulesN, dry)
	} else {
		logger.Info("riskguard started", "rules", len(cfg.Rules.Rules), "interval", cfg.Engine.Interval, "fast_interval", cfg.Engine.FastInterval, "dry_run", dry, "exchange", cfg.Exchange.BaseURL)
	}
	f.sh.notifier.Send(ctx, notify.Message{Time: time.Now(), Kind: notify.KindLifecycle, Severity: "info", Text: text})
	ctls := newControls(cfg.Engine.ControlFailAfter, f.sh.notifier, f.sh.registry) // Telegram control, when a channel has control_chat_ids
	if hg := f.haNode(); hg != nil {
		// One poller per bot over the cluster: the first account's leader.
		ctls.lead = func() bool { ok, _ := hg.seat.MayAct(time.Now()); return ok }
		go ctls.follow(ctx, telegramFollowEvery)
	}
	ctls.start(ctx, cfg.Notify, f.controller(), logger)
	defer ctls.stop()
	go m.reloads(ctx, *configPath, cfg, f, ctls, *allowUnknown, logger)
	if hg := f.haNode(); hg != nil {
		// One exchange account is one election: a config of the cluster
		// that names it otherwise (or names another account alike) is
		// refused before this process campaigns.
		if err := hg.node.CheckAccounts(ctx); err != nil && errors.Is(err, ha.ErrAccountsDiffer) {
			return fmt.Errorf("riskguard run: %w; make every config of the cluster name each exchange account once, alike", err)
		} else if err != nil {
			logger.Warn("the cluster's accounts could not be compared", "err", err)
		}
	}
	stopHA := startHA(f.haNode())
	err = f.run(ctx)
	stopHA() // after the last call: a standby may act at once
	sd.stopping(ctx)
	logger.Info("riskguard stopping")
	f.sh.notifier.Send(context.WithoutCancel(ctx), notify.Message{Time: time.Now(), Kind: notify.KindLifecycle, Severity: "warning", Text: "riskguard stopped"})
	return err
}

// checkFleetSymbols runs checkSymbols for every account, at once (an
// account whose exchange is slow to answer does not hold the others'), and
// joins the refusals, each prefixed with its account under accounts:.
func checkFleetSymbols(ctx context.Context, f *fleet, accts []*config.Config, allowUnknown, reload bool, logger *slog.Logger) error {
	if !f.multi() {
		return checkSymbols(ctx, f.guards[0], accts[0], allowUnknown, reload, logger)
	}
	errs := make([]error, len(f.guards))
	var wg sync.WaitGroup
	for i, g := range f.guards {
		wg.Go(func() {
			if err := checkSymbols(ctx, g, accts[i], allowUnknown, reload, logger.With("account", g.name)); err != nil {
				errs[i] = fmt.Errorf("account %s: %w", g.name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// setup builds the logger and loads the configuration, reporting problems
// on stderr; a non-nil error is the exit status, already reported.
func (m *Main) setup(cmd, configPath, logFormat, logLevel string) (*config.Config, *slog.Logger, error) {
	logger, err := m.newLogger(logFormat, logLevel)
	if err != nil {
		fmt.Fprintf(m.Stderr, "riskguard %s: %v\n", cmd, err)
		return nil, nil, exitCode(2)
	}
	cfg, err := config.Load(configPath, m.Getenv, config.Options{Venues: m.venues.specs()})
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
func checkSymbols(ctx context.Context, g *guard, cfg *config.Config, allowUnknown, reload bool, logger *slog.Logger) error {
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
func (m *Main) reloads(ctx context.Context, path string, running *config.Config, f *fleet, ctls *controls, allowUnknown bool, logger *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.Reload:
		}
		for _, g := range f.guards {
			if err := g.engine.ReopenAudit(ctx, time.Now()); err != nil {
				logger.Error("reopen audit log", "err", err)
			} else if g.name == "" {
				logger.Info("audit log reopened")
			} else {
				logger.Info("audit log reopened", "account", g.name)
			}
		}
		cfg, err := config.Load(path, m.Getenv, config.Options{Venues: m.venues.specs()})
		if err == nil && !slices.Equal(running.AccountNames(), cfg.AccountNames()) {
			err = fmt.Errorf("the accounts changed (%s, was %s), which takes a restart to apply; nothing was reloaded (all or nothing): restart the daemon, or undo the change",
				orNone(cfg.AccountNames()), orNone(running.AccountNames()))
		}
		if err == nil {
			err = checkFleetSymbols(ctx, f, accountsOf(cfg), allowUnknown, true, logger)
		}
		if err == nil {
			// All or nothing: a reload that changes what only a restart
			// applies is refused by name, rather than half applied.
			var changed []string
			olds, news := accountsOf(running), accountsOf(cfg)
			for i := range news {
				for _, c := range restartOnly(olds[i], news[i]) {
					if news[i].Name != "" {
						c = "accounts." + news[i].Name + ": " + c
					}
					if !slices.Contains(changed, c) {
						changed = append(changed, c)
					}
				}
			}
			if len(changed) > 0 {
				err = fmt.Errorf("%s changed, which takes a restart to apply; the rules were not reloaded either (all or nothing): restart the daemon, or undo the change to reload the rules", strings.Join(changed, ", "))
			}
		}
		if err != nil {
			logger.Error("config reload rejected; the old rules keep running", "err", err)
			f.sh.notifier.Send(ctx, notify.Message{Time: time.Now(), Kind: notify.KindReload, Severity: "critical",
				Text: "config reload rejected; the old rules keep running: " + err.Error()})
			continue
		}
		changed := hotChanges(running, cfg)
		if slices.Contains(changed, "notify") {
			if err := f.sh.notifier.replace(ctx, cfg, logger); err != nil {
				logger.Error("config reload rejected; the old rules and channels keep running", "err", err)
				f.sh.notifier.Send(ctx, notify.Message{Time: time.Now(), Kind: notify.KindReload, Severity: "critical",
					Text: "config reload rejected; the old rules and channels keep running: " + err.Error()})
				continue
			}
			ctls.start(ctx, cfg.Notify, f.controller(), logger)
		}
		rulesN := 0
		for i, a := range accountsOf(cfg) {
			f.guards[i].engine.Reconfigure(time.Now(), a.Rules, a.Engine)
			rulesN += len(a.Rules.Rules)
		}
		running = cfg
		if f.multi() {
			logger.Info("config reloaded", "accounts", len(f.guards), "rules", rulesN, "settings", strings.Join(changed, ","))
		} else {
			logger.Info("config reloaded", "rules", len(cfg.Rules.Rules), "settings", strings.Join(changed, ","))
		}
	}
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// restartOnly names the settings that differ between the running
// configuration and a new one and that only a restart applies: the
// exchange client's (the exchange section's keys but index_names, an
// engine setting), the engine settings whose row in engine.Settings is
// Restart (interval, dry_run, audit_log, state_file) and engine.listen.
// Every other setting, the notify section and the rules are applied by a
// reload.
func restartOnly(running, next *config.Config) []string {
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
func hotChanges(running, next *config.Config) []string {
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
