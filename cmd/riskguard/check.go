package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// runCheck is `riskguard check --config FILE`: it loads the configuration
// as every command does and compiles every rule, without credentials,
// notification secrets or network. On success it
// prints a summary of the rules; otherwise every error, one per line (with
// the expression and a caret where there is one), and exit status 1.
//
// With --exchange URL it also reads the exchange's public market data (no
// credentials) and reports every rule's symbols: entry it does not list;
// with credentials (as run takes them) it reads the live account and
// prints how well the margin model fits the exchange's own figures,
// naming every open position it could not judge, acting on nothing; then
// the calls the rules make on the exchange and, with --probe-key, whether
// the key may make them, tried with calls that change nothing.
func (m *Main) runCheck(ctx context.Context, args []string) error {
	fs := m.newFlags("check", "check --config FILE [--exchange URL [--probe-key]]", commands()["check"].summary)
	configPath := fs.String("config", "riskguard.yaml", "configuration file")
	exchangeURL := fs.String("exchange", "", "also check the rules' symbols against this exchange's public symbol list (base URL)")
	probeKey := fs.Bool("probe-key", false, "with --exchange and credentials: try whether the API key may make the calls the rules make, with calls that change nothing (README: Credentials)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return exitCode(2)
	}
	if *probeKey && *exchangeURL == "" {
		fmt.Fprintln(m.Stderr, "riskguard check: --probe-key needs --exchange URL: the exchange whose key it probes")
		return exitCode(2)
	}
	cfg, err := config.Load(*configPath, m.Getenv, config.Options{SecretsOptional: true, Venues: m.venues.specs()})
	if errors.Is(err, iofs.ErrNotExist) {
		fmt.Fprintln(m.Stderr, noConfig("check", *configPath)) // the next step, as run says it
		return exitCode(1)
	}
	if err != nil {
		var list *rules.ErrorList
		if !errors.As(err, &list) {
			fmt.Fprintf(m.Stderr, "riskguard check: %v\n", err)
			return exitCode(1)
		}
		m.printErrors(*configPath, list.Errors)
		return exitCode(1)
	}
	if *exchangeURL != "" {
		client, err := publicClient(*exchangeURL)
		if err != nil {
			fmt.Fprintf(m.Stderr, "riskguard check: %v\n", err)
			return exitCode(2)
		}
		unknown, err := unknownSymbols(ctx, publicSymbols(client), cfg.Rules)
		if err != nil {
			fmt.Fprintf(m.Stderr, "riskguard check: --exchange %s: %v\n", *exchangeURL, exchangeTarget("the --exchange URL", *exchangeURL).Wrap(err))
			return exitCode(1)
		}
		if len(unknown) > 0 {
			m.printErrors(*configPath, unknown)
			return exitCode(1)
		}
	}
	if len(cfg.Accounts) > 0 {
		printAccounts(m.Stdout, cfg)
		if *exchangeURL == "" {
			return nil
		}
		return m.checkAccounts(ctx, cfg, *exchangeURL, *probeKey)
	}
	printSummary(m.Stdout, cfg)
	if *exchangeURL != "" {
		return m.checkModel(ctx, cfg, *exchangeURL, *probeKey)
	}
	return nil
}

// checkAccounts is checkModel for each account of cfg whose exchange is
// url, each with its own key pair; an account on another exchange is
// named and left for a check against its own (a key is never probed
// against an exchange it does not belong to).
func (m *Main) checkAccounts(ctx context.Context, cfg *config.Config, url string, probe bool) error {
	same := func(a, b string) bool { return strings.TrimRight(a, "/") == strings.TrimRight(b, "/") }
	var read int
	var failed error
	for _, a := range cfg.Accounts {
		if !same(a.Exchange.BaseURL, url) {
			fmt.Fprintf(m.Stdout, "\n== account %s: not read: its exchange is %s (check --exchange %s reads it) ==\n", a.Name, a.Exchange.BaseURL, a.Exchange.BaseURL)
			continue
		}
		read++
		fmt.Fprintf(m.Stdout, "\n== account %s, at %s ==\n", a.Name, url)
		if err := m.checkModel(ctx, a, url, probe); err != nil {
			failed = err
		}
	}
	if read == 0 {
		fmt.Fprintf(m.Stderr, "riskguard check: --exchange %s: no account of %s is on that exchange: pass one of their exchange.base_url\n", url, cfg.Path)
		return exitCode(1)
	}
	return failed
}

// checkModel reads the live account at url with the configuration's
// credentials and prints the margin model's fit to it, then the calls the
// rules make on the exchange and whether the key may make them (probed
// with probe); without credentials it says it did not. It fails when an
// open position could not be judged or the key may not make a call.
func (m *Main) checkModel(ctx context.Context, cfg *config.Config, url string, probe bool) error {
	if cfg.Exchange.APIKey == "" || cfg.Exchange.APISecret == "" {
		fmt.Fprintln(m.Stdout, "\nmargin model: not checked against the account (no credentials: RISKGUARD_API_KEY and RISKGUARD_API_SECRET)")
		printKeys(m.Stdout, keyCheck{cfg: cfg}.rows(ctx))
		if probe {
			fmt.Fprintln(m.Stderr, "riskguard check: --probe-key needs the API key pair: set RISKGUARD_API_KEY and RISKGUARD_API_SECRET (or exchange.api_key_file and api_secret_file; README: Credentials)")
			return exitCode(1)
		}
		return nil
	}
	where := "--exchange " + url
	if cfg.Name != "" {
		where = "account " + cfg.Name + ": " + where
	}
	live := *cfg
	live.Exchange.BaseURL = url
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := newClient(&live, logger)
	if err != nil {
		fmt.Fprintf(m.Stderr, "riskguard check: %v\n", err)
		return exitCode(1)
	}
	ec := cfg.Engine
	ec.AuditLog, ec.StateFile, ec.DryRun = "", "", true
	eng, err := engine.New(ec, cfg.Rules, engine.Deps{Reader: client, Actuator: client, Logger: logger})
	if err != nil {
		fmt.Fprintf(m.Stderr, "riskguard check: %v\n", err)
		return exitCode(1)
	}
	defer eng.Close()
	c, err := eng.CheckModel(ctx, time.Now())
	if err != nil {
		fmt.Fprintf(m.Stderr, "riskguard check: %s: %v\n", where, exchangeTarget("the --exchange URL", url).Wrap(fmt.Errorf("read the account: %w", err)))
		return exitCode(1)
	}
	printFit(m.Stdout, c)
	if len(c.Fit.Positions) > 0 {
		printStress(m.Stdout, c.Stress, cfg.Engine.StressHorizon, c.SigmaFrom, len(c.Unjudged))
	}
	problems := printKeys(m.Stdout, keyCheck{cfg: &live, probe: client, probing: probe}.rows(ctx))
	if n := len(c.Unjudged); n > 0 {
		fmt.Fprintf(m.Stderr, "riskguard check: %s: %d of %d open %s could not be judged (under \"not checked\" above): "+
			"look at %s on the exchange; figures that read well there mean its listing differs from the interface (docs/exchange.md, 2.6), "+
			"and the guard cannot predict its actions on %s\n", where, n, c.Open, plural(c.Open, "position", "positions"),
			plural(n, "it", "each"), plural(n, "it", "them"))
	}
	for _, p := range problems {
		fmt.Fprintf(m.Stderr, "riskguard check: %s: %s\n", where, p)
	}
	if len(c.Unjudged) > 0 || len(problems) > 0 {
		return exitCode(1)
	}
	return nil
}

// printStress prints the account on the stress grid: the expected loss,
// the likely moves that liquidate, and the loss each move of the grid
// leaves, every index together and each alone.
func printStress(w io.Writer, s margin.Stress, horizon time.Duration, sigmaFrom string, unjudged int) {
	if unjudged > 0 {
		defer fmt.Fprintf(w, "  (over the judged positions only: %d not checked, above)\n", unjudged)
	}
	if !s.Known {
		fmt.Fprintln(w, "\nstress grid: unknown (a position without an index price, or cross positions without a known free balance)")
		return
	}
	fmt.Fprintf(w, "\nstress grid (σ over %s; %s; likely: ±%gσ):\n  %s\n", horizon, sigmaFrom, s.Likely, s.Summary())
	if len(s.Points) == 0 {
		return
	}
	families, rows := s.Table()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "  MOVE\t")
	for _, f := range families {
		name := f + " alone"
		if f == margin.StressTogether {
			name = "TOGETHER"
		}
		fmt.Fprintf(tw, "%s\t", name)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		fmt.Fprintf(tw, "  %+gσ\t", r.K)
		for _, p := range r.Points {
			fmt.Fprintf(tw, "%s\t", p.Cell())
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// printFit prints the margin model's fit, one line per position, then
// the open positions it could not judge, with why. It never says the
// model fits when it judged none.
func printFit(w io.Writer, c engine.ModelCheck) {
	f := c.Fit
	judged := len(f.Positions)
	switch {
	case c.Open == 0:
		fmt.Fprintln(w, "\nmargin model: not checked: the account holds no open position")
	case judged == 0:
		fmt.Fprintf(w, "\nmargin model: not checked: none of the %d open %s could be judged (below)\n", c.Open, plural(c.Open, "position", "positions"))
	case len(c.Unjudged) > 0:
		fmt.Fprintf(w, "\nmargin model: on %d of %d open positions (%d not checked, below): %s\n", judged, c.Open, len(c.Unjudged), f.Summary())
	default:
		fmt.Fprintf(w, "\nmargin model: %s\n", f.Summary())
	}
	if judged > 0 {
		printFitTable(w, f)
	}
	if len(c.Unjudged) == 0 {
		return
	}
	fmt.Fprintln(w, "  not checked:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SYMBOL\tPOSITION\tWHY")
	for _, u := range c.Unjudged {
		id := u.ID
		if id == "" {
			id = "(no id)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", u.Symbol, id, u.Why)
	}
	tw.Flush()
}

// printFitTable prints the fit's free balance and its table.
func printFitTable(w io.Writer, f margin.Fit) {
	if f.FreeKnown {
		fmt.Fprintf(w, "  free balance %s, inferred from the first cross position", f.Free.Round(2))
		if f.FreeSpread > 0 {
			fmt.Fprintf(w, "; the cross positions disagree by %s of the pool", decimal.NewFromFloat(f.FreeSpread).Shift(2).StringFixed(4)+"%")
		}
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SYMBOL\tMODE\tMARGIN\tMODELLED\tLIQUIDATION\tMODELLED\tERROR\tFIT")
	for _, p := range f.Positions {
		mode, fit, liq := "isolated", "yes", p.LiquidationModelled.String()
		if p.Cross {
			mode = "cross"
		}
		if !p.Fits(f.Tolerance) {
			fit = "NO (" + p.What + ")"
		}
		if p.Cross && !f.FreeKnown {
			liq = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Symbol, mode, p.MarginReported.StringFixed(2), p.MarginModelled.StringFixed(2), p.LiquidationReported, liq,
			decimal.NewFromFloat(p.Error).Shift(2).StringFixed(4)+"%", fit)
	}
	tw.Flush()
}

// printErrors prints a file's errors, one per line, and their count.
func (m *Main) printErrors(path string, errs []*rules.Error) {
	for _, e := range errs {
		fmt.Fprintln(m.Stderr, e)
	}
	fmt.Fprintf(m.Stderr, "%s: %d %s\n", path, len(errs), plural(len(errs), "error", "errors"))
}

// printAccounts is check's summary of a file with accounts:: a line per
// account, then each account's rules as printSummary says them.
func printAccounts(w io.Writer, cfg *config.Config) {
	fmt.Fprintf(w, "%s: OK, %d accounts\n", cfg.Path, len(cfg.Accounts))
	for _, a := range cfg.Accounts {
		n := len(a.Rules.Rules)
		fmt.Fprintf(w, "  %s: %d %s; exchange %s; state %s, audit %s\n", a.Name, n, plural(n, "rule", "rules"), a.Exchange.BaseURL, orNoFile(a.Engine.StateFile), orNoFile(a.Engine.AuditLog))
	}
	for _, a := range cfg.Accounts {
		fmt.Fprintf(w, "\n== account %s ==\n", a.Name)
		one := *a
		one.Warnings = nil
		printSummary(w, &one)
	}
	for _, warning := range cfg.Warnings {
		fmt.Fprintf(w, "\nwarning: %s", warning)
	}
	if len(cfg.Warnings) > 0 {
		fmt.Fprintln(w)
	}
}

func orNoFile(p string) string {
	if p == "" {
		return "none"
	}
	return p
}

// printSummary shows what the guard will do with this configuration.
func printSummary(w io.Writer, cfg *config.Config) {
	n := len(cfg.Rules.Rules)
	fmt.Fprintf(w, "%s: OK, %d %s; exchange %s, every %s", cfg.Path, n, plural(n, "rule", "rules"), cfg.Exchange.BaseURL, cfg.Engine.Interval)
	if cfg.Engine.DryRun {
		fmt.Fprint(w, ", dry run")
	}
	fmt.Fprintln(w)
	for _, r := range cfg.Rules.Rules {
		fmt.Fprintf(w, "\n%s  [%s]\n", r.Name, r.Severity)
		if r.Description != "" {
			fmt.Fprintf(w, "  %s\n", r.Description)
		}
		fmt.Fprintf(w, "  when:     %s\n", strings.Join(strings.Fields(r.When), " "))
		fmt.Fprintf(w, "  timing:   for %s, keep firing %s, cooldown %s, on no data: %s\n",
			rules.FormatSpan(r.For), rules.FormatSpan(r.KeepFiringFor), rules.FormatSpan(r.Cooldown), r.OnNoData)
		switch {
		case r.Account():
			targets := r.Targets.String()
			if targets == "" {
				targets = "none (notify only)"
			}
			fmt.Fprintf(w, "  scope:    the account, once per tick; actions on %s\n", targets)
		case len(r.Symbols) > 0:
			fmt.Fprintf(w, "  symbols:  %s\n", strings.Join(r.Symbols, ", "))
		default:
			fmt.Fprintf(w, "  symbols:  all\n")
		}
		if ws := r.Windows(); len(ws) > 0 {
			var names []string
			for _, win := range ws {
				names = append(names, win.String())
			}
			fmt.Fprintf(w, "  history:  %s (from the guard's own ticks; no data while a window is less than half covered)\n", strings.Join(names, ", "))
		}
		fmt.Fprintf(w, "  actions:  %s\n", describeActions(cfg.Rules, r.Actions))
		for _, k := range cfg.Rules.Table() {
			if k.Harm != nil && r.HasAction(k.Name) {
				fmt.Fprintf(w, "  harm:     %s\n", k.Harm(r))
			}
		}
	}
	for _, warning := range cfg.Warnings {
		fmt.Fprintf(w, "\nwarning: %s", warning)
	}
	if len(cfg.Warnings) > 0 {
		fmt.Fprintln(w)
	}
}

// describeActions says a rule's actions as the kinds' table describes
// them.
func describeActions(set *rules.Set, actions []rules.Action) string {
	if len(actions) == 0 {
		return "none (state, log and metrics only)"
	}
	parts := make([]string, len(actions))
	for i := range actions {
		parts[i] = string(actions[i].Kind)
		if spec, ok := set.Spec(actions[i].Kind); ok && spec.Check != nil {
			parts[i] = spec.Check(&actions[i])
		}
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
