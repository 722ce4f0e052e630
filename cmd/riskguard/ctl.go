package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/internal/nextstep"
	"github.com/riskguard/riskguard/web"
)

// ctlClient talks to a running daemon's control API.
type ctlClient struct {
	base  string // http://host:port
	token string
	by    string
	// account is --account: the account the calls are about, "" for the
	// only one.
	account string
	http    *http.Client
	// target says what to do when the daemon cannot be reached or
	// refuses the token.
	target nextstep.Target
}

// ctlFlags are the flags every control command has.
type ctlFlags struct {
	addr, config, by, account *string
}

func (m *Main) addCtlFlags(fs *flag.FlagSet) ctlFlags {
	return ctlFlags{
		addr:    fs.String("addr", "", "the daemon's listen address (host:port); default engine.listen of --config"),
		config:  fs.String("config", "riskguard.yaml", "configuration file, for engine.listen and the control token"),
		by:      fs.String("by", "", "who makes the change, audited with it (default $USER@hostname)"),
		account: fs.String("account", "", "the account, when the config lists several (accounts:); optional with one"),
	}
}

// ctlCommand is one control command: its flags (its own, added to fs
// before parse, and those every control command has) and its name for
// what it prints.
type ctlCommand struct {
	m    *Main
	name string
	fs   *flag.FlagSet
	f    ctlFlags
}

// newCtlCommand makes a control command's flag set with the common flags.
func (m *Main) newCtlCommand(name, usage, summary string) *ctlCommand {
	fs := m.newFlags(name, usage, summary)
	return &ctlCommand{m: m, name: name, fs: fs, f: m.addCtlFlags(fs)}
}

// parse parses args and refuses a positional argument but allowed (see
// noArgs); the error is the exit code, the message printed.
func (c *ctlCommand) parse(args []string, allowed string) error {
	if err := parseFlags(c.fs, args); err != nil {
		return err
	}
	return noArgs(c.fs, allowed)
}

// connect is parse, then the client (m.client); a client that cannot be
// made is reported as the command's failure.
func (c *ctlCommand) connect(args []string, allowed string) (*ctlClient, error) {
	if err := c.parse(args, allowed); err != nil {
		return nil, err
	}
	cl, err := c.m.client(c.f)
	if err != nil {
		return nil, c.fail(err)
	}
	return cl, nil
}

// fail reports a failed call of the command (ctlFail).
func (c *ctlCommand) fail(err error) error { return c.m.ctlFail(c.name, err) }

// client resolves the address, the token (RISKGUARD_CONTROL_TOKEN, else
// the config's engine.control_token_file) and the author.
func (m *Main) client(f ctlFlags) (*ctlClient, error) {
	return m.newCtlClient(f, true)
}

// clientNoAccountCheck is client for a command that needs no account.
func (m *Main) clientNoAccountCheck(f ctlFlags) (*ctlClient, error) {
	return m.newCtlClient(f, false)
}

func (m *Main) newCtlClient(f ctlFlags, checkAccount bool) (*ctlClient, error) {
	addr, token := *f.addr, strings.TrimSpace(m.Getenv("RISKGUARD_CONTROL_TOKEN"))
	setting, tokenFrom := "--addr", "RISKGUARD_CONTROL_TOKEN"
	if addr == "" {
		setting = "engine.listen of " + *f.config
	}
	if token == "" {
		tokenFrom = ""
	}
	if addr == "" || token == "" {
		cfg, err := config.Load(*f.config, m.Getenv, config.Options{SecretsOptional: true, Venues: m.venues.specs()})
		switch {
		case err == nil:
			if addr == "" {
				addr = cfg.Listen
			}
			if token == "" && cfg.ControlToken != "" {
				token, tokenFrom = cfg.ControlToken, "engine.control_token_file of "+cfg.Path
			}
			if err := checkAccountFlag(cfg, *f.account); err != nil && checkAccount {
				return nil, err
			}
		case addr == "":
			return nil, fmt.Errorf("no --addr, and the config gives none: %w", err)
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("%s sets no engine.listen: give --addr", *f.config)
	}
	by := *f.by
	if by == "" {
		host, _ := os.Hostname()
		by = m.Getenv("USER") + "@" + host
	}
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &ctlClient{base: strings.TrimRight(base, "/"), token: token, by: by, account: *f.account, http: &http.Client{Timeout: 10 * time.Second},
		target: daemonTarget(setting, base, tokenFrom)}, nil
}

// daemonTarget is the running daemon for nextstep: its address written at
// setting (--addr, or the config's engine.listen), reached at base, and
// where the token the command sent came from ("" when it sent none).
func daemonTarget(setting, base, tokenFrom string) nextstep.Target {
	creds := "this command sent no token: export RISKGUARD_CONTROL_TOKEN with the daemon's (the value of its RISKGUARD_CONTROL_TOKEN or engine.control_token_file)"
	if tokenFrom != "" {
		creds = "the token from " + tokenFrom + " is not the daemon's: export RISKGUARD_CONTROL_TOKEN with the daemon's (the value of its RISKGUARD_CONTROL_TOKEN or engine.control_token_file)"
	}
	return nextstep.Target{
		Name:        "the daemon",
		Setting:     setting,
		URL:         base,
		Start:       "no riskguard daemon runs there: start `riskguard run`, or pass --addr HOST:PORT of the one running (its engine.listen)",
		Credentials: creds,
		Timeout:     "pass --addr HOST:PORT of the daemon",
	}
}

// checkAccountFlag refuses an --account that cfg does not list, and a
// missing one when it lists several, naming the accounts.
func checkAccountFlag(cfg *config.Config, account string) error {
	names := cfg.AccountNames()
	switch {
	case len(names) == 0 && account != "":
		return fmt.Errorf("--account %s: %s has no accounts: section (it guards one account): leave --account out", account, cfg.Path)
	case len(names) == 0, account == "" && len(names) == 1, slices.Contains(names, account):
		return nil
	case account == "":
		return fmt.Errorf("%s guards several accounts: pass --account with one of: %s", cfg.Path, strings.Join(names, ", "))
	}
	return fmt.Errorf("no account %q in %s: pass --account with one of: %s", account, cfg.Path, strings.Join(names, ", "))
}

// do sends one API call and decodes the answer into out; an answer other
// than 2xx is an error carrying the daemon's message.
func (c *ctlClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	if c.account != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "account=" + url.QueryEscape(c.account)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.target.Wrap(fmt.Errorf("%s %s: %w", method, path, err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return c.target.Wrap(fmt.Errorf("%s %s: %w", method, path, err))
	}
	if resp.StatusCode/100 != 2 {
		var ae web.ErrorBody
		if json.Unmarshal(data, &ae) == nil && ae.Error != "" {
			err = fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, ae.Error)
		} else {
			// Not the daemon's answer (a TLS server's plain-text 400 to
			// an http:// request, a proxy's page): its start says what.
			err = fmt.Errorf("%s %s: %s: %q", method, path, resp.Status, snippetOf(data))
		}
		if resp.StatusCode == http.StatusUnauthorized {
			return &nextstep.Error{Next: c.target.ForStatus(resp.StatusCode), Err: err}
		}
		return c.target.Wrap(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// snippetOf is the start of an answer's body on one line.
func snippetOf(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b[:min(len(b), 200)]), "?")), " ")
	return s
}

// ctlFail reports a failed control command.
func (m *Main) ctlFail(cmd string, err error) error {
	// The daemon's message may quote what was asked (a name, a comment):
	// printed with its control characters escaped, line by line.
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = control.Printable(l)
	}
	fmt.Fprintf(m.Stderr, "riskguard %s: %s\n", cmd, strings.Join(lines, "\n"))
	return exitCode(1)
}

func (m *Main) runSilence(ctx context.Context, args []string) error {
	usage := func() {
		w := m.Stderr
		if m.help || (len(args) > 0 && args[0] == "help") {
			w = m.Stdout // asked for: stdout, as every command's --help
		}
		fmt.Fprintf(w, "usage: riskguard silence add|list|expire [flags]\n\n%s\n\nflags:\n  each subcommand lists its own: riskguard silence add -h\n", commands()["silence"].summary)
	}
	if len(args) == 0 {
		usage()
		return exitCode(2)
	}
	switch args[0] {
	case "add":
		return m.silenceAdd(ctx, args[1:])
	case "list":
		return m.silenceList(ctx, args[1:])
	case "expire":
		return m.silenceExpire(ctx, args[1:])
	case "-h", "--help", "help":
		usage()
		return nil
	}
	fmt.Fprintf(m.Stderr, "riskguard silence: unknown subcommand %q\n", args[0])
	usage()
	return exitCode(2)
}

func (m *Main) silenceAdd(ctx context.Context, args []string) error {
	cmd := m.newCtlCommand("silence add", "silence add (--rule R | --symbol S | --severity V)... [--for 1h] [--comment C] [--by WHO] [--account NAME] [--addr HOST:PORT | --config FILE]",
		"mute the notifications of the matching rules (the actions still run)")
	fs := cmd.fs
	rule := fs.String("rule", "", "match this rule")
	symbol := fs.String("symbol", "", "match this symbol")
	severity := fs.String("severity", "", "match this severity (info, warning, critical)")
	dur := fs.Duration("for", time.Hour, "how long the silence lasts")
	comment := fs.String("comment", "", "why, kept with the silence (at most 1,000 characters)")
	allowUnknown := fs.Bool("allow-unknown", false, "accept a rule or symbol the guard does not know (a symbol not open yet)")
	c, err := cmd.connect(args, "")
	if err != nil {
		return err
	}
	var s control.Silence
	err = c.do(ctx, http.MethodPost, "/api/v1/silences", web.ControlRequest{Rule: *rule, Symbol: *symbol, Severity: *severity,
		Duration: dur.String(), Comment: *comment, CreatedBy: c.by, AllowUnknown: *allowUnknown}, &s)
	if err != nil {
		return cmd.fail(err)
	}
	fmt.Fprintf(m.Stdout, "silence %s of %s until %s\n", control.Printable(s.ID), control.Printable(matchers(s.Rule, s.Symbol, s.Severity)), s.EndsAt.Local().Format(time.RFC3339))
	return nil
}

func (m *Main) silenceList(ctx context.Context, args []string) error {
	cmd := m.newCtlCommand("silence list", "silence list [--account NAME] [--addr HOST:PORT | --config FILE]", "list the silences and acknowledgements that have not ended, and the pauses")
	c, err := cmd.connect(args, "")
	if err != nil {
		return err
	}
	var sil []control.Silence
	if err := c.do(ctx, http.MethodGet, "/api/v1/silences", nil, &sil); err != nil {
		return cmd.fail(err)
	}
	return m.listControls(ctx, c, cmd.name, sil)
}

// listControls prints the silences and the pauses of the daemon as a
// table. Every text in it came from a control call, anyone's with the
// token: its control characters are printed as visible escapes
// (control.Printable), so that a comment cannot drive the terminal.
func (m *Main) listControls(ctx context.Context, c *ctlClient, cmd string, sil []control.Silence) error {
	var pau []control.Pause
	if err := c.do(ctx, http.MethodGet, "/api/v1/pauses", nil, &pau); err != nil {
		return m.ctlFail(cmd, err)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	row := func(cols ...string) {
		for i, col := range cols {
			cols[i] = control.Printable(col)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
	}
	fmt.Fprintln(tw, "ID\tKIND\tMATCHERS\tSTARTS\tENDS\tBY\tCOMMENT")
	t := func(x time.Time, zero string) string {
		if x.IsZero() {
			return zero
		}
		return x.Local().Format(time.RFC3339)
	}
	for _, s := range sil {
		kind := "silence"
		if s.Ack {
			kind = "ack"
		}
		row(s.ID, kind, matchers(s.Rule, s.Symbol, s.Severity), t(s.StartsAt, "-"), t(s.EndsAt, "resolved"), s.CreatedBy, s.Comment)
	}
	for _, p := range pau {
		row(p.ID, "pause", matchers(p.Rule, p.Symbol, ""), t(p.StartsAt, "-"), t(p.EndsAt, "resumed"), p.CreatedBy, p.Comment)
	}
	return tw.Flush()
}

func matchers(rule, symbol, severity string) string {
	var parts []string
	for _, kv := range [][2]string{{"rule", rule}, {"symbol", symbol}, {"severity", severity}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if len(parts) == 0 {
		return "*"
	}
	return strings.Join(parts, ",")
}

func (m *Main) silenceExpire(ctx context.Context, args []string) error {
	cmd := m.newCtlCommand("silence expire", "silence expire [--by WHO] [--account NAME] [--addr HOST:PORT | --config FILE] ID...", "end silences or acknowledgements now")
	fs := cmd.fs
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitCode(2)
	}
	c, err := m.client(cmd.f)
	if err != nil {
		return cmd.fail(err)
	}
	var errs []error
	for _, id := range fs.Args() {
		if err := c.do(ctx, http.MethodDelete, "/api/v1/silences/"+url.PathEscape(id)+"?createdBy="+url.QueryEscape(c.by), nil, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(m.Stdout, "silence %s expired\n", id)
	}
	if len(errs) > 0 {
		return cmd.fail(errors.Join(errs...))
	}
	return nil
}

func (m *Main) runPause(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "list" {
		return m.pauseList(ctx, args[1:])
	}
	cmd := m.newCtlCommand("pause", "pause [--for 1h] [--rule R] [--symbol S] [--allow-unknown] [--comment C] [--by WHO] [--account NAME] [--addr HOST:PORT | --config FILE]; pause list",
		commands()["pause"].summary)
	fs := cmd.fs
	rule := fs.String("rule", "", "pause this rule's actions only")
	symbol := fs.String("symbol", "", "pause the actions on this symbol only")
	dur := fs.Duration("for", 0, "end the pause after this long, at most 90 days (default: until resumed)")
	comment := fs.String("comment", "", "why, kept with the pause (at most 1,000 characters)")
	allowUnknown := fs.Bool("allow-unknown", false, "accept a rule or symbol the guard does not know (a symbol not open yet)")
	c, err := cmd.connect(args, "list")
	if err != nil {
		return err
	}
	if fs.NArg() == 1 { // pause --addr HOST:PORT list
		return m.listControls(ctx, c, "pause list", nil)
	}
	req := web.ControlRequest{Rule: *rule, Symbol: *symbol, Comment: *comment, CreatedBy: c.by, AllowUnknown: *allowUnknown}
	if *dur > 0 {
		req.Duration = dur.String()
	}
	var p control.Pause
	if err := c.do(ctx, http.MethodPost, "/api/v1/pause", req, &p); err != nil {
		return cmd.fail(err)
	}
	end := "until resumed"
	if !p.EndsAt.IsZero() {
		end = "until " + p.EndsAt.Local().Format(time.RFC3339)
	}
	fmt.Fprintf(m.Stdout, "paused %s (%s), %s: no action is sent; the rules are still evaluated and notified\n",
		control.Printable(matchers(p.Rule, p.Symbol, "")), control.Printable(p.ID), end)
	if len(p.InFlight) > 0 {
		fmt.Fprintf(m.Stdout, "warning: sent before the pause and still running, they may still change the position: %s\n",
			control.Printable(strings.Join(p.InFlight, "; ")))
	}
	return nil
}

// pauseList prints the pauses in force (and the silences: one table).
func (m *Main) pauseList(ctx context.Context, args []string) error {
	cmd := m.newCtlCommand("pause list", "pause list [--account NAME] [--addr HOST:PORT | --config FILE]", "list the pauses in force")
	c, err := cmd.connect(args, "")
	if err != nil {
		return err
	}
	return m.listControls(ctx, c, cmd.name, nil)
}

// noArgs refuses the positional arguments of a control command (but the
// one word allowed, if any): a stray word must not turn into a pause of
// everything.
func noArgs(fs *flag.FlagSet, allowed string) error {
	if fs.NArg() == 0 || fs.NArg() == 1 && allowed != "" && fs.Arg(0) == allowed {
		return nil
	}
	stray := fs.Arg(0)
	if allowed != "" && stray == allowed {
		stray = fs.Arg(1)
	}
	fmt.Fprintf(fs.Output(), "riskguard %s: unexpected argument %q\n", fs.Name(), control.Printable(stray))
	fs.Usage()
	return exitCode(2)
}

func (m *Main) runResume(ctx context.Context, args []string) error {
	cmd := m.newCtlCommand("resume", "resume [--rule R] [--symbol S] [--by WHO] [--account NAME] [--addr HOST:PORT | --config FILE]", commands()["resume"].summary)
	rule := cmd.fs.String("rule", "", "end the pause of this rule (as paused)")
	symbol := cmd.fs.String("symbol", "", "end the pause of this symbol (as paused)")
	c, err := cmd.connect(args, "")
	if err != nil {
		return err
	}
	var out struct{ Resumed []control.Pause }
	if err := c.do(ctx, http.MethodPost, "/api/v1/resume", web.ControlRequest{Rule: *rule, Symbol: *symbol, CreatedBy: c.by}, &out); err != nil {
		return cmd.fail(err)
	}
	for _, p := range out.Resumed {
		fmt.Fprintf(m.Stdout, "resumed %s (%s)\n", control.Printable(matchers(p.Rule, p.Symbol, "")), control.Printable(p.ID))
	}
	return nil
}

func (m *Main) runAck(ctx context.Context, args []string) error {
	cmd := m.newCtlCommand("ack", "ack (--rule R --symbol S [--for D] [--comment C] | --liquidation SYMBOL) [--by WHO] [--account NAME] [--addr HOST:PORT | --config FILE]", commands()["ack"].summary)
	fs := cmd.fs
	liquidation := fs.String("liquidation", "", "unmark the liquidation of this symbol the status page keeps marked (\"*\": every one)")
	rule := fs.String("rule", "", "the alert's rule")
	symbol := fs.String("symbol", "", "the alert's symbol")
	dur := fs.Duration("for", 0, "end it after this long even if the alert still fires (default: when it resolves)")
	comment := fs.String("comment", "", "why, kept with the acknowledgement (at most 1,000 characters)")
	c, err := cmd.connect(args, "")
	if err != nil {
		return err
	}
	if *liquidation != "" {
		var got map[string]int
		if err := c.do(ctx, http.MethodPost, "/api/v1/liquidations/ack", web.ControlRequest{Symbol: *liquidation, CreatedBy: c.by}, &got); err != nil {
			return cmd.fail(err)
		}
		fmt.Fprintf(m.Stdout, "acknowledged the liquidation of %s (%d unmarked)\n", control.Printable(*liquidation), got["acknowledged"])
		return nil
	}
	req := web.ControlRequest{Rule: *rule, Symbol: *symbol, Comment: *comment, CreatedBy: c.by}
	if *dur > 0 {
		req.Duration = dur.String()
	}
	var s control.Silence
	if err := c.do(ctx, http.MethodPost, "/api/v1/ack", req, &s); err != nil {
		return cmd.fail(err)
	}
	fmt.Fprintf(m.Stdout, "acknowledged %s on %s (%s): muted until it resolves\n", control.Printable(s.Rule), control.Printable(s.Symbol), control.Printable(s.ID))
	return nil
}
