// Package config is the one loader of riskguard's configuration file.
// Load reads the file once, decodes the YAML once with positions kept, and
// checks every section against that one tree: the exchange and engine keys
// (a row of the key table each, keys.go; defaults from DefaultExchange and
// engine.DefaultConfig, overridden by RISKGUARD_SECTION_KEY variables),
// the rules (parsed by package rules), the notify section (checked by
// package notify), the ha section (validated by package ha), the accounts
// (accounts.go), and what the sections take from each other: the channels
// rules name, the windows engine.max_window allows, the calls the rules'
// actions need of the venue exchange.venue names. Those packages keep
// their own types and checks and never import config.
//
// Every problem of a file is reported at once, each as FILE:LINE:COL:
// message naming the key (or the environment variable that set it), in a
// *rules.ErrorList.
package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/internal/yamlnode"

	"github.com/knadh/koanf/v2"
	"gopkg.in/yaml.v3"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
)

// Config is the whole configuration file, validated, with defaults
// applied and environment overrides merged. Every command that reads the
// file gets it from Load, with the same checks.
type Config struct {
	// Path is the file the configuration was read from.
	Path string
	// Name is the account's name in an account's configuration, "" in a
	// file without accounts (accounts.go).
	Name string
	// Accounts are the configurations of the accounts: section, each the
	// whole file as that account sees it; nil without the section. The
	// top-level config then holds the first account's values.
	Accounts []*Config
	// Exchange is the exchange section over DefaultExchange(); zero in
	// a rules-only file.
	Exchange Exchange
	// Engine is the engine section over engine.DefaultConfig(): every row
	// of engine.Settings, exchange.index_names included.
	Engine engine.Config
	// Listen is engine.listen, the daemon's /metrics and /healthz
	// address; "" is off.
	Listen string
	// ControlToken is the bearer token of the control API's mutating
	// endpoints, from RISKGUARD_CONTROL_TOKEN or engine.control_token_file;
	// "" refuses them. Never logged.
	ControlToken string
	// Notify is the validated notify section; nil when there is none.
	Notify *notify.Config
	// Rules are the rules, parsed and compiled by package rules, with
	// what they take from the other sections checked here.
	Rules *rules.Set
	// RulesOnly is set for a file without exchange and engine sections,
	// accepted with Options.RulesOnly: only its rules (and notify
	// section) count, the engine settings are the defaults.
	RulesOnly bool
	// HA is the ha section (ha.go); nil without one: one process, the
	// state file.
	HA *HA
	// Warnings are problems that do not stop the program, e.g. a secret
	// kept in the YAML. They never contain a secret.
	Warnings []string
}

// Options are what the commands' needs differ in; every command runs
// every check.
type Options struct {
	// SecretsOptional reports a notification secret whose environment
	// variable is unset as a warning, not an error: check, backtest and
	// rule tests send no notification.
	SecretsOptional bool
	// RulesOnly accepts a file with neither an exchange nor an engine
	// section (a rule-test or baseline rules file).
	RulesOnly bool
	// Venues are the venues exchange.venue may name, with the calls each
	// offers (venue.go); nil is DefaultVenues().
	Venues []Venue
}

// Exchange is the exchange section.
type Exchange struct {
	// Venue is exchange.venue: the name of one of Options.Venues, which
	// the program maps to the venue's constructor.
	Venue string
	// BaseURL is the venue's API root, e.g. https://api.example.com;
	// required, checked as the client checks it.
	BaseURL string
	// APIKey and APISecret come from RISKGUARD_API_KEY / RISKGUARD_API_SECRET,
	// else from api_key_file / api_secret_file (trimmed), else from the
	// YAML's api_key / api_secret (with a warning). Either may be empty:
	// `check` needs no credentials; `run` refuses to start without them.
	APIKey, APISecret string
	// PositionsPath is the positions listing, which the spec does not show.
	PositionsPath string
	// OrderPath is the order placement (the reduce-only orders), which the spec
	// does not show either; {symbol} is the contract symbol.
	OrderPath string
	// ClientOrderIDField names the order body's client order id field,
	// which the spec does not show: "" (the default) sends none.
	ClientOrderIDField string
	// Timeout bounds one request.
	Timeout time.Duration
	// MaxRetries is how often a failed read is tried again: 0 is one
	// attempt.
	MaxRetries int
	// RateLimit is in requests per second; RateBurst is the bucket size.
	RateLimit float64
	RateBurst int
	// ClockSync is how often the clock offset is measured again.
	ClockSync time.Duration
	// exchange.index_names is an engine setting: Config.Engine.IndexNames.
}

// DefaultExchange is the exchange section's defaults, the one place they
// are written; the engine's are engine.DefaultConfig(). base_url and the
// credentials have none.
func DefaultExchange() Exchange {
	return Exchange{
		Venue:         DefaultVenue,
		PositionsPath: "/v1/contracts/positions",
		OrderPath:     exchange.DefaultOrderPath,
		Timeout:       10 * time.Second,
		MaxRetries:    3,
		RateLimit:     10.0,
		RateBurst:     5,
		ClockSync:     10 * time.Minute,
	}
}

// Load is the one loader of the configuration file at path, with
// environment overrides read through getenv (tests pass a map). It decodes
// the YAML once and checks every section against that one tree: the rules
// (package rules parses them), the exchange and engine settings, the
// notify section (package notify checks it), the channels that rules'
// notify actions name and their message templates, the ha section (package
// ha validates it), the calls the rules' actions need of the venue. Every
// problem of the file is reported at once in a *rules.ErrorList sorted by
// position, each as FILE:LINE:COL: message.
func Load(path string, getenv func(string) string, opts Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	doc, err := rules.Decode(path, data)
	if err != nil {
		return nil, err // not one YAML mapping: nothing else can be read
	}
	if yamlnode.Value(doc.Root, "accounts") != nil {
		return loadAccounts(path, doc, getenv, opts)
	}
	return loadDocument(path, doc, getenv, opts, nil)
}

// loadDocument loads the decoded configuration doc: the whole file, or
// one account's view of it (acct, built by loadAccounts).
func loadDocument(path string, doc *rules.Document, getenv func(string) string, opts Options, acct *accountDoc) (*Config, error) {
	l := &loader{path: path, getenv: getenv, nodes: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}, root: doc.Root, rulesPath: path, rulesRoot: doc.Root, acct: acct}
	rulesDoc := doc
	if acct != nil && acct.rules != nil {
		rulesDoc, l.rulesPath, l.rulesRoot = acct.rules, acct.rules.File, acct.rules.Root
	}
	set, rerr := rules.ParseDocument(rulesDoc)
	var rlist *rules.ErrorList
	switch {
	case rerr == nil:
	case errors.As(rerr, &rlist):
		l.errs = append(l.errs, rlist.Errors...)
	default:
		return nil, fmt.Errorf("rules: %w", rerr)
	}
	sections := l.structure(doc.Root)

	var raw map[string]any
	if err := doc.Root.Decode(&raw); err != nil {
		l.errorf(doc.Root, "%v", err) // duplicate keys, already reported by structure
		return nil, l.result()
	}
	k := koanf.New(".")
	if err := k.Load(mapProvider(raw), nil); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	ep := envProvider{getenv: getenv}
	if acct != nil {
		ep.skip = acct.fileOnly
	}
	if err := k.Load(ep, nil); err != nil {
		return nil, fmt.Errorf("environment overrides: %w", err)
	}
	l.k = k

	cfg := &Config{Path: path, Rules: set, Engine: engine.DefaultConfig()}
	if acct != nil {
		cfg.Name = acct.name
	}
	cfg.RulesOnly = opts.RulesOnly && yamlnode.Value(doc.Root, "exchange") == nil && yamlnode.Value(doc.Root, "engine") == nil
	// A section that is there but not a mapping was reported; its keys
	// would only repeat that.
	usable := func(s string) bool { return sections[s] || yamlnode.Value(doc.Root, s) == nil }
	if !cfg.RulesOnly && usable("exchange") {
		cfg.Exchange = DefaultExchange()
		v := l.venueOf(opts.Venues)
		cfg.Exchange.Venue = v.Name
		l.exchange(&cfg.Exchange, &cfg.Engine)
		l.venueNeeds(set, v)
	}
	if !cfg.RulesOnly && usable("engine") {
		l.engine(&cfg.Engine, &cfg.Listen)
		l.fastLaneBudget(cfg.Engine, cfg.Exchange)
		// The token has no YAML key: a file or the environment only.
		cfg.ControlToken = l.secret("RISKGUARD_CONTROL_TOKEN", key("engine", "control_token_file"), configKey{})
	}
	if n := yamlnode.Value(doc.Root, "ha"); n != nil && !cfg.RulesOnly {
		cfg.HA = l.haSection(n, cfg.Listen)
	}
	cfg.Notify = l.notify(raw["notify"], opts)
	l.ruleReferences(cfg.Notify, raw["notify"])
	l.windowLimits(set, cfg.Engine.MaxWindow)
	if err := l.result(); err != nil {
		return nil, err
	}
	cfg.Warnings = l.warnings
	return cfg, nil
}
