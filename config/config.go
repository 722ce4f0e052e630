package main

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/internal/yamlnode"

	"github.com/knadh/koanf/v2"
	"gopkg.in/yaml.v3"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
)

// config is the whole configuration file, validated, with defaults applied
// and environment overrides merged. Every command that reads the file gets
// it from loadConfig, with the same checks.
type config struct {
	// Path is the file the configuration was read from.
	Path string
	// Name is the account's name in an account's configuration, "" in a
	// file without accounts (accounts.go).
	Name string
	// Accounts are the configurations of the accounts: section, each the
	// whole file as that account sees it; nil without the section. The
	// top-level config then holds the first account's values.
	Accounts []*config
	Exchange exchangeConfig
	// venue is the row of the registry of venues that Exchange.Venue
	// names: what the daemon builds.
	venue venue
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
	Rules  *rules.Set
	// RulesOnly is set for a file without exchange and engine sections,
	// accepted with loadOptions.rulesOnly: only its rules (and notify
	// section) count, the engine settings are the defaults.
	RulesOnly bool
	// HA is the ha section (cmd/riskguard/ha.go); nil without one: one
	// process, the state file.
	HA *haConfig
	// Warnings are problems that do not stop the program, e.g. a secret
	// kept in the YAML. They never contain a secret.
	Warnings []string
}

// loadOptions are what the commands' needs differ in; every command runs
// every check.
type loadOptions struct {
	// secretsOptional reports a notification secret whose environment
	// variable is unset as a warning, not an error: check, backtest and
	// rule tests send no notification.
	secretsOptional bool
	// rulesOnly accepts a file with neither an exchange nor an engine
	// section (a rule-test or baseline rules file).
	rulesOnly bool
	// venues is the registry exchange.venue names a row of; nil is the
	// shipped one.
	venues venues
}

// exchangeConfig is the exchange section.
type exchangeConfig struct {
	// Venue is exchange.venue: the name of a row of the registry of
	// venues (venues.go).
	Venue   string
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
	Timeout            time.Duration
	MaxRetries         int
	// RateLimit is in requests per second; RateBurst is the bucket size.
	RateLimit float64
	RateBurst int
	// ClockSync is how often the clock offset is measured again.
	ClockSync time.Duration
	// exchange.index_names is an engine setting: config.Engine.IndexNames.
}

// Defaults of the exchange section's optional keys; the engine's are
// engine.DefaultConfig().
const (
	defaultPositionsPath = "/v1/contracts/positions"
	defaultTimeout       = 10 * time.Second
	defaultMaxRetries    = 3
	defaultRateLimit     = 10.0
	defaultRateBurst     = 5
	defaultClockSync     = 10 * time.Minute
)

// keyKind is the type of a configuration value.
type keyKind int

const (
	kindString keyKind = iota
	kindDuration
	kindBool
	kindInt
	kindFloat
	kindStringMap
	kindStringList
)

// configKey is one known key of a section.
type configKey struct {
	section, name string
	kind          keyKind
	// noEnv keys have no RISKGUARD_SECTION_KEY override (the credentials
	// have their own variables).
	noEnv bool
}

func (k configKey) path() string { return k.section + "." + k.name }

// envName is the variable that overrides the key: engine.dry_run is
// RISKGUARD_ENGINE_DRY_RUN.
func (k configKey) envName() string {
	return "RISKGUARD_" + strings.ToUpper(k.section) + "_" + strings.ToUpper(k.name)
}

// configKeys lists every key of the exchange and engine sections, in the
// order the loader reads them and an unknown key's error lists them: the
// exchange client's, then each row of engine.Settings in its section, the
// daemon's own engine.listen and engine.control_token_file after
// engine.state_file.
func configKeys() []configKey {
	keys := []configKey{
		{"exchange", "venue", kindString, false},
		{"exchange", "base_url", kindString, false},
		{"exchange", "api_key", kindString, true},
		{"exchange", "api_secret", kindString, true},
		{"exchange", "api_key_file", kindString, false},
		{"exchange", "api_secret_file", kindString, false},
		{"exchange", "positions_path", kindString, false},
		{"exchange", "order_path", kindString, false},
		{"exchange", "client_order_id_field", kindString, false},
		{"exchange", "timeout", kindDuration, false},
		{"exchange", "max_retries", kindInt, false},
		{"exchange", "rate_limit", kindFloat, false},
		{"exchange", "rate_burst", kindInt, false},
		{"exchange", "clock_sync", kindDuration, false},
	}
	own := []configKey{
		{"engine", "listen", kindString, false},
		{"engine", "control_token_file", kindString, false},
	}
	for _, section := range []string{"exchange", "engine"} {
		for _, s := range engine.Settings() {
			k := settingKey(s)
			if k.section != section {
				continue
			}
			keys = append(keys, k)
			if k.path() == "engine.state_file" {
				keys, own = append(keys, own...), nil
			}
		}
	}
	return append(keys, own...)
}

// settingKey is the configuration key of an engine setting.
func settingKey(s engine.Setting) configKey {
	section, name, _ := strings.Cut(s.Key, ".")
	k := configKey{section: section, name: name}
	switch s.Addr(&engine.Config{}).(type) {
	case *time.Duration:
		k.kind = kindDuration
	case *bool:
		k.kind = kindBool
	case *int:
		k.kind = kindInt
	case *float64:
		k.kind = kindFloat
	case *map[string]string:
		k.kind = kindStringMap
	case *[]string:
		k.kind = kindStringList
	}
	return k
}

// topKeys lists the top-level sections.
func topKeys() []string { return []string{"exchange", "engine", "notify", "rules", "accounts", "ha"} }

// loadConfig reads, merges and validates the configuration at path, with
// environment overrides read through getenv, as the daemon needs it.
func loadConfig(path string, getenv func(string) string) (*config, error) {
	return loadConfigWith(path, getenv, loadOptions{})
}

// loadConfigWith is the one loader of the configuration file. It decodes
// the YAML once and checks every section against that one tree: the rules,
// the exchange and engine settings, the notify section, the channels that
// rules' notify actions name and their message templates. Every problem of
// the file is reported at once in a *rules.ErrorList sorted by position,
// each as FILE:LINE:COL: message.
func loadConfigWith(path string, getenv func(string) string, opts loadOptions) (*config, error) {
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
func loadDocument(path string, doc *rules.Document, getenv func(string) string, opts loadOptions, acct *accountDoc) (*config, error) {
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

	cfg := &config{Path: path, Rules: set, Engine: engine.DefaultConfig()}
	if acct != nil {
		cfg.Name = acct.name
	}
	cfg.RulesOnly = opts.rulesOnly && yamlnode.Value(doc.Root, "exchange") == nil && yamlnode.Value(doc.Root, "engine") == nil
	// A section that is there but not a mapping was reported; its keys
	// would only repeat that.
	usable := func(s string) bool { return sections[s] || yamlnode.Value(doc.Root, s) == nil }
	if !cfg.RulesOnly && usable("exchange") {
		cfg.venue = l.venueOf(opts.venues.orDefault())
		cfg.Exchange.Venue = cfg.venue.Name
		l.exchange(&cfg.Exchange, &cfg.Engine)
		l.venueNeeds(set, cfg.venue)
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

// windowLimits refuses the functions over time whose window is longer
// than engine.max_window, at the rule's when.
func (l *loader) windowLimits(set *rules.Set, limit time.Duration) {
	rulesNode := yamlnode.Value(l.rulesRoot, "rules")
	if set == nil || limit <= 0 || rulesNode == nil || rulesNode.Kind != yaml.SequenceNode || len(rulesNode.Content) != len(set.Rules) {
		return
	}
	for i, r := range set.Rules {
		at := yamlnode.Value(rulesNode.Content[i], "when")
		if at == nil {
			at = rulesNode.Content[i]
		}
		for _, w := range r.Windows() {
			if w.Span > limit {
				l.errs = append(l.errs, &rules.Error{File: l.rulesPath, Line: at.Line, Col: at.Column, Rule: r.Name, RuleIndex: i + 1,
					Msg: fmt.Sprintf("when: %s: the window is longer than engine.max_window (%s)", w, rules.FormatSpan(limit))})
			}
		}
	}
}

// loader carries the state of one loadConfig.
type loader struct {
	path   string
	getenv func(string) string
	root   *yaml.Node
	// rulesRoot holds the rules key and rulesPath is its file: the
	// configuration's, or an account's rules_file.
	rulesRoot *yaml.Node
	rulesPath string
	// acct is the account being loaded; nil for a file without accounts.
	acct *accountDoc
	k    *koanf.Koanf
	// nodes holds the value node of each "section.key" present in the
	// file, keys its key node.
	nodes    map[string]*yaml.Node
	keys     map[string]*yaml.Node
	errs     []*rules.Error
	warnings []string
}

func (l *loader) result() error {
	if len(l.errs) == 0 {
		return nil
	}
	list := &rules.ErrorList{Errors: l.errs}
	list.Sort()
	return list
}

// errorf records an error at n (the file's start when nil).
func (l *loader) errorf(n *yaml.Node, format string, args ...any) {
	e := &rules.Error{File: l.path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	l.errs = append(l.errs, e)
}

// structure checks the sections and their keys, and records where each
// value is. It returns the sections present as mappings: a section that is
// not one is reported and not read further, while every other section is
// still checked, so one mistake never hides another.
func (l *loader) structure(root *yaml.Node) map[string]bool {
	known := map[string]bool{}
	for _, k := range configKeys() {
		known[k.path()] = true
	}
	sections := map[string]bool{}
	seenTop := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := root.Content[i], root.Content[i+1]
		if seenTop[kn.Value] {
			l.errorf(kn, "duplicate key %q", kn.Value)
			continue
		}
		seenTop[kn.Value] = true
		switch kn.Value {
		case "rules", "accounts", "ha":
			continue // rules.ParseDocument checked it, loadAccounts the accounts, haSection ha
		case "exchange", "engine", "notify":
		default:
			l.unknownKey(kn, "", topKeys())
			continue
		}
		if vn.Kind == yaml.ScalarNode && vn.Tag == "!!null" {
			sections[kn.Value] = true
			continue
		}
		if vn.Kind != yaml.MappingNode {
			l.errorf(vn, "%s: expected a mapping", kn.Value)
			continue
		}
		sections[kn.Value] = true
		if kn.Value == "notify" {
			continue // checked by notify.CheckConfig, positioned by nodeAt
		}
		var names []string
		for _, k := range configKeys() {
			if k.section == kn.Value {
				names = append(names, k.name)
			}
		}
		seen := map[string]bool{}
		for j := 0; j+1 < len(vn.Content); j += 2 {
			skn, svn := vn.Content[j], vn.Content[j+1]
			p := kn.Value + "." + skn.Value
			switch {
			case seen[skn.Value]:
				l.errorf(skn, "duplicate key %q", p)
			case !known[p]:
				l.unknownKey(skn, kn.Value+".", names)
			default:
				l.nodes[p], l.keys[p] = svn, skn
			}
			seen[skn.Value] = true
		}
	}
	return sections
}

func (l *loader) unknownKey(k *yaml.Node, prefix string, known []string) {
	l.errorf(k, "%s", yamlnode.UnknownKey(k.Value, prefix, known))
}

// source returns the raw value of key and where it came from: the
// environment variable's name, or "" for the file. ok is false when the
// key is not set (or set to null).
func (l *loader) source(k configKey) (v any, env string, ok bool) {
	v = l.k.Get(k.path())
	return v, l.envOf(k), v != nil
}

// bad records a value error, at the value's position in the file or
// naming the environment variable that set it.
func (l *loader) bad(k configKey, env, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if env != "" {
		l.errs = append(l.errs, &rules.Error{File: l.path, Msg: fmt.Sprintf("%s (from %s): %s", k.path(), env, msg)})
		return
	}
	l.errorf(l.nodes[k.path()], "%s: %s", k.path(), msg)
}

func (l *loader) str(k configKey, def string) string {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		// The kind only: the value may be a mistyped secret.
		l.bad(k, env, "expected a string, got %s", kindOf(v))
		return def
	}
	return s
}

// kindOf names the YAML kind of a decoded value, for errors that must not
// echo the value itself.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func (l *loader) duration(k configKey, def time.Duration) time.Duration {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		l.bad(k, env, "expected a duration like 2s or 5m, got %v", v)
		return def
	}
	d, err := yamlnode.ParseDuration(s)
	if err != nil {
		l.bad(k, env, "%v", err)
		return def
	}
	return d
}

func (l *loader) boolean(k configKey, def bool) bool {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case bool:
		return x
	case string:
		if env != "" {
			if b, err := strconv.ParseBool(x); err == nil {
				return b
			}
		}
	}
	l.bad(k, env, "expected true or false, got %v", v)
	return def
}

func (l *loader) integer(k configKey, def int) int {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case string:
		if env != "" {
			if n, err := strconv.Atoi(x); err == nil {
				return n
			}
		}
	}
	l.bad(k, env, "expected an integer, got %v", v)
	return def
}

func (l *loader) float(k configKey, def float64) float64 {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	case string:
		if env != "" {
			if f, err := strconv.ParseFloat(x, 64); err == nil {
				return f
			}
		}
	}
	l.bad(k, env, "expected a number, got %v", v)
	return def
}

// stringMap reads a mapping of strings; from the environment it is
// "A=B,C=D".
func (l *loader) stringMap(k configKey) map[string]string {
	v, env, ok := l.source(k)
	if !ok {
		return nil
	}
	out := map[string]string{}
	switch x := v.(type) {
	case string:
		if env == "" {
			break
		}
		for pair := range strings.SplitSeq(x, ",") {
			name, val, found := strings.Cut(strings.TrimSpace(pair), "=")
			if !found || name == "" || val == "" {
				l.bad(k, env, "expected SYMBOL=INDEX pairs separated by commas, got %q", x)
				return nil
			}
			out[name] = val
		}
		return out
	case map[string]any:
		for name, val := range x {
			s, isStr := val.(string)
			if !isStr || s == "" {
				l.bad(k, env, "%s: expected an index name, got %v", name, val)
				continue
			}
			out[name] = s
		}
		return out
	}
	l.bad(k, env, "expected a mapping like {XBTC: BTC_USD}, got %v", v)
	return nil
}

// stringList reads a list of strings; from the environment it is "A,B".
func (l *loader) stringList(k configKey) []string {
	v, env, ok := l.source(k)
	if !ok {
		return nil
	}
	switch x := v.(type) {
	case string:
		if env == "" {
			break
		}
		var out []string
		for s := range strings.SplitSeq(x, ",") {
			out = append(out, strings.TrimSpace(s))
		}
		return out
	case []any:
		out := []string{}
		for _, item := range x {
			s, isStr := item.(string)
			if !isStr {
				l.bad(k, env, "expected a list of strings, got %s in it", kindOf(item))
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	l.bad(k, env, "expected a list like [guard.example.org], got %s", kindOf(v))
	return nil
}

// key returns the known key section.name.
func key(section, name string) configKey {
	for _, k := range configKeys() {
		if k.section == section && k.name == name {
			return k
		}
	}
	panic("config: unknown key " + section + "." + name) // a typo in this file
}

// exchange reads the exchange section: the client's settings into x, the
// engine settings among its keys (index_names) over e.
func (l *loader) exchange(x *exchangeConfig, e *engine.Config) {
	get := func(name string) configKey { return key("exchange", name) }
	x.BaseURL = l.str(get("base_url"), "")
	urlErr := exchange.CheckBaseURL(x.BaseURL)
	switch u, err := url.Parse(x.BaseURL); {
	case x.BaseURL == "":
		l.errorf(l.keyOrValue("exchange.base_url"), "exchange.base_url is required, e.g. https://api.example.com")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		l.bad(get("base_url"), l.envOf(get("base_url")), "%q is not an http(s) URL like https://api.example.com", x.BaseURL)
	case u.User != nil:
		// Never echo the URL: its userinfo may be a secret.
		l.bad(get("base_url"), l.envOf(get("base_url")), "carries credentials (user@host), which would be logged and sent as Basic auth: give the key pair through RISKGUARD_API_KEY and RISKGUARD_API_SECRET (or the api_*_file keys)")
	case urlErr != nil:
		// One verdict: what the client refuses at run, check refuses.
		l.bad(get("base_url"), l.envOf(get("base_url")), "%v", urlErr)
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		l.warnf("exchange.base_url uses plain http to %s: credentials and orders travel unencrypted", u.Hostname())
	}
	x.PositionsPath = l.str(get("positions_path"), defaultPositionsPath)
	if !strings.HasPrefix(x.PositionsPath, "/") {
		l.bad(get("positions_path"), l.envOf(get("positions_path")), "must start with /, got %q", x.PositionsPath)
	}
	x.OrderPath = l.str(get("order_path"), exchange.DefaultOrderPath)
	if err := exchange.CheckOrderPath(x.OrderPath); err != nil {
		l.bad(get("order_path"), l.envOf(get("order_path")), "%v", err)
	}
	if x.ClientOrderIDField = l.str(get("client_order_id_field"), ""); x.ClientOrderIDField != "" {
		if err := exchange.CheckClientOrderIDField(x.ClientOrderIDField); err != nil {
			l.bad(get("client_order_id_field"), l.envOf(get("client_order_id_field")), "%v", err)
		}
	}
	x.Timeout = l.positive(get("timeout"), defaultTimeout)
	x.MaxRetries = l.integer(get("max_retries"), defaultMaxRetries)
	if x.MaxRetries < 0 || x.MaxRetries > 20 {
		l.bad(get("max_retries"), l.envOf(get("max_retries")), "must be within 0..20, got %d", x.MaxRetries)
	}
	x.RateLimit = l.float(get("rate_limit"), defaultRateLimit)
	if !(x.RateLimit > 0) {
		l.bad(get("rate_limit"), l.envOf(get("rate_limit")), "must be > 0 requests per second, got %v", x.RateLimit)
	}
	x.RateBurst = l.integer(get("rate_burst"), defaultRateBurst)
	if x.RateBurst < 1 {
		l.bad(get("rate_burst"), l.envOf(get("rate_burst")), "must be at least 1, got %d", x.RateBurst)
	}
	x.ClockSync = l.positive(get("clock_sync"), defaultClockSync)
	l.settings("exchange", e, nil)
	x.APIKey = l.secret(l.acct.credentialEnv("API_KEY"), get("api_key_file"), get("api_key"))
	x.APISecret = l.secret(l.acct.credentialEnv("API_SECRET"), get("api_secret_file"), get("api_secret"))
}

// engine reads the engine section: the engine settings over e, which
// holds the defaults, and engine.listen. engine.control_token_file is read
// with the token.
func (l *loader) engine(e *engine.Config, listen *string) {
	l.settings("engine", e, func(k configKey) {
		if k.name != "listen" {
			return
		}
		*listen = l.str(k, "")
		if *listen == "" {
			return
		}
		host, port, err := net.SplitHostPort(*listen)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			l.bad(k, l.envOf(k), "expected host:port like 127.0.0.1:9464, got %q", *listen)
		} else if !isLoopback(host) {
			l.warnf("engine.listen %s serves metrics beyond this machine, and the status page and control API with them (their GET endpoints then need the control token too, and a host name or address other than loopback must be in engine.allowed_hosts): keep it on loopback and tunnel", *listen)
		}
	})
}

// settings reads the rows of engine.Settings whose keys are in section
// into e, in the order of configKeys; own, when not nil, reads the
// section's other keys in their turn.
func (l *loader) settings(section string, e *engine.Config, own func(configKey)) {
	rows := map[string]engine.Setting{}
	for _, s := range engine.Settings() {
		rows[s.Key] = s
	}
	for _, k := range configKeys() {
		if k.section != section {
			continue
		}
		if s, ok := rows[k.path()]; ok {
			l.setting(k, s, e)
		} else if own != nil {
			own(k)
		}
	}
}

// setting reads the engine setting s at key k over e, which holds its
// default, and checks it with the row's check. A value that does not read
// is reported and leaves the default; one the check refuses is reported,
// and leaves the default when the check says so.
func (l *loader) setting(k configKey, s engine.Setting, e *engine.Config) {
	next := *e
	n := len(l.errs)
	switch p := s.Addr(&next).(type) {
	case *time.Duration:
		*p = l.duration(k, *p)
	case *bool:
		*p = l.boolean(k, *p)
	case *int:
		*p = l.integer(k, *p)
	case *float64:
		*p = l.float(k, *p)
	case *string:
		*p = l.str(k, *p)
	case *map[string]string:
		if m := l.stringMap(k); m != nil {
			*p = m
		}
	case *[]string:
		if list := l.stringList(k); list != nil {
			*p = list
		}
	default:
		panic(fmt.Sprintf("config: %s: no reader for %T", s.Key, p)) // a row of a new type
	}
	if len(l.errs) == n {
		if problem, keepDefault := s.Check(next); problem != "" {
			l.bad(k, l.envOf(k), "%s", problem)
			if keepDefault {
				return
			}
		}
	}
	*e = next
}

// fastLaneBudget refuses a fast lane whose ticks would spend more than the
// client's rate limit: engine.TickRequests requests per fast tick, so that
// the reads leave room for the actions they may call for.
func (l *loader) fastLaneBudget(e engine.Config, x exchangeConfig) {
	if e.FastInterval <= 0 || !(x.RateLimit > 0) {
		return
	}
	k := key("engine", "fast_interval")
	if rate := engine.TickRequests / e.FastInterval.Seconds(); rate > x.RateLimit {
		l.bad(k, l.envOf(k), "%s needs about %.1f requests per second (%d a tick), over exchange.rate_limit (%v/s): lengthen it to at least %s or raise the rate limit",
			e.FastInterval, rate, engine.TickRequests, x.RateLimit, time.Duration(float64(engine.TickRequests)/x.RateLimit*float64(time.Second)).Round(time.Millisecond))
	}
}

// notify validates the notify section with notify.CheckConfig, placing
// each of its errors at the key it names. A secret whose environment
// variable is unset is an error, or a warning with secretsOptional.
func (l *loader) notify(raw any, opts loadOptions) *notify.Config {
	if raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil // structure reported it
	}
	ncfg, missing, errs := notify.CheckConfig(m, l.getenv)
	for _, err := range errs {
		var ce *notify.ConfigError
		if errors.As(err, &ce) {
			l.errorf(l.nodeAt(ce.Path), "%s: %s", ce.Path, ce.Msg)
			continue
		}
		l.errorf(l.nodeAt("notify"), "notify: %v", err)
	}
	for _, ce := range missing {
		if opts.secretsOptional {
			l.warnf("%s: %s (needed by run, demo and notify test)", ce.Path, ce.Msg)
			continue
		}
		l.errorf(l.nodeAt(ce.Path), "%s: %s", ce.Path, ce.Msg)
	}
	if ncfg == nil {
		return nil
	}
	l.warnings = append(l.warnings, ncfg.Warnings...)
	if len(ncfg.Warnings) > 0 {
		if fi, err := os.Stat(l.path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			l.warnf("%s holds notification secrets but is readable by other users (mode %04o): chmod 600 it", l.path, fi.Mode().Perm())
		}
	}
	return ncfg
}

// ruleReferences checks what rules take from the notify section: the
// channels their notify actions name and their message templates. It walks
// the rule nodes itself, so that a rule with another mistake is checked too.
func (l *loader) ruleReferences(ncfg *notify.Config, rawNotify any) {
	defined := map[string]bool{}
	if ncfg != nil {
		for _, n := range ncfg.ChannelNames() {
			defined[n] = true
		}
	} else if m, ok := rawNotify.(map[string]any); ok {
		// A broken section: take the names it defines, so that its own
		// errors are not repeated at every rule that names a channel.
		if ch, ok := m["channels"].(map[string]any); ok {
			for n := range ch {
				defined[n] = true
			}
		}
	}
	names := slices.Sorted(maps.Keys(defined))
	rulesNode := yamlnode.Value(l.rulesRoot, "rules")
	if rulesNode == nil || rulesNode.Kind != yaml.SequenceNode {
		return
	}
	for i, rn := range rulesNode.Content {
		if rn.Kind != yaml.MappingNode {
			continue
		}
		name := ""
		if n := yamlnode.Value(rn, "name"); n != nil && n.Kind == yaml.ScalarNode {
			name = n.Value
		}
		at := func(n *yaml.Node, format string, args ...any) {
			l.errs = append(l.errs, &rules.Error{File: l.rulesPath, Line: n.Line, Col: n.Column, Rule: name, RuleIndex: i + 1, Msg: fmt.Sprintf(format, args...)})
		}
		if msg := yamlnode.Value(rn, "message"); msg != nil && msg.Kind == yaml.ScalarNode && msg.Tag == "!!str" {
			if err := notify.CheckTemplate(msg.Value); err != nil {
				at(msg, "%v", err) // "message template …"
			}
		}
		actions := yamlnode.Value(rn, "actions")
		if actions == nil || actions.Kind != yaml.SequenceNode {
			continue
		}
		for _, an := range actions.Content {
			kind := yamlnode.Value(an, "action")
			channels := yamlnode.Value(an, "channels")
			if kind == nil || kind.Value != string(rules.Notify) || channels == nil || channels.Kind != yaml.SequenceNode {
				continue
			}
			for _, c := range channels.Content {
				if c.Kind != yaml.ScalarNode || defined[c.Value] {
					continue
				}
				switch hint := rules.DidYouMean(c.Value, names); {
				case len(names) == 0:
					at(c, "notify channel %q is not defined: there is no notify.channels section", c.Value)
				case hint != "":
					at(c, "notify channel %q is not defined under notify.channels (did you mean %q?)", c.Value, hint)
				default:
					at(c, "notify channel %q is not defined under notify.channels (defined: %s)", c.Value, strings.Join(names, ", "))
				}
			}
		}
	}
}

// nodeAt returns the node a dotted key path names (notify.channels.ops.
// token_env), or the deepest mapping on the way when a key is missing, so
// that "required" errors point at the mapping that lacks the key.
func (l *loader) nodeAt(path string) *yaml.Node {
	n := l.root
	for part := range strings.SplitSeq(path, ".") {
		next := yamlnode.Value(n, part)
		if next == nil {
			return n
		}
		n = next
	}
	return n
}

// positive reads a duration that must be > 0.
func (l *loader) positive(k configKey, def time.Duration) time.Duration {
	n := len(l.errs)
	d := l.duration(k, def)
	if len(l.errs) == n && d == 0 {
		l.bad(k, l.envOf(k), "must be greater than 0")
		return def
	}
	return d
}

// envOf returns the variable that set k, or "" when the file did.
func (l *loader) envOf(k configKey) string {
	if !k.noEnv && (l.acct == nil || !l.acct.fileOnly[k.path()]) && l.getenv(k.envName()) != "" {
		return k.envName()
	}
	return ""
}

// keyOrValue returns the node of a key's value, its key, or nil.
func (l *loader) keyOrValue(p string) *yaml.Node {
	if n := l.nodes[p]; n != nil {
		return n
	}
	return l.keys[p]
}

// secret resolves a credential: the environment variable, else the file
// named by fileKey, else the YAML value (with a warning). Its value never
// appears in an error or a warning.
func (l *loader) secret(envVar string, fileKey, yamlKey configKey) string {
	inYAML := l.str(yamlKey, "")
	if inYAML != "" {
		l.warnf("%s is set in the config file: prefer %s or %s", yamlKey.path(), envVar, fileKey.path())
		if fi, err := os.Stat(l.path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			l.warnf("%s holds %s but is readable by other users (mode %04o): chmod 600 it", l.path, yamlKey.path(), fi.Mode().Perm())
		}
	}
	if v := strings.TrimSpace(l.getenv(envVar)); v != "" {
		return v
	}
	if name := l.str(fileKey, ""); name != "" {
		data, err := os.ReadFile(name)
		if err != nil {
			// The error names the file only; it cannot hold the secret.
			l.bad(fileKey, l.envOf(fileKey), "cannot read: %v", unwrapPathError(err))
			return ""
		}
		if fi, err := os.Stat(name); err == nil && fi.Mode().Perm()&0o077 != 0 {
			l.warnf("%s %s is readable by other users (mode %04o): chmod 600 it", fileKey.path(), name, fi.Mode().Perm())
		}
		v := strings.TrimSpace(string(data))
		if v == "" {
			l.bad(fileKey, l.envOf(fileKey), "%s is empty", name)
		}
		return v
	}
	return inYAML
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (l *loader) warnf(format string, args ...any) {
	l.warnings = append(l.warnings, fmt.Sprintf(format, args...))
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// mapProvider is a koanf provider over the file's tree already decoded,
// so that the positions, the rules and koanf all see the one parse.
type mapProvider map[string]any

func (m mapProvider) ReadBytes() ([]byte, error) {
	return nil, errors.New("map provider: use Read")
}

func (m mapProvider) Read() (map[string]any, error) { return m, nil }

// envProvider is a koanf provider of the RISKGUARD_SECTION_KEY overrides,
// read through a getenv function (tests pass a map). Only known keys are
// looked up, so underscores inside key names (dry_run) are no problem.
type envProvider struct {
	getenv func(string) string
	// skip are the keys ("exchange.base_url") an account sets itself,
	// which the top level's variables do not override.
	skip map[string]bool
}

func (e envProvider) ReadBytes() ([]byte, error) {
	return nil, errors.New("env provider: use Read")
}

func (e envProvider) Read() (map[string]any, error) {
	out := map[string]any{}
	for _, k := range configKeys() {
		if k.noEnv || e.skip[k.path()] {
			continue
		}
		v := e.getenv(k.envName())
		if v == "" {
			continue
		}
		sec, _ := out[k.section].(map[string]any)
		if sec == nil {
			sec = map[string]any{}
			out[k.section] = sec
		}
		sec[k.name] = v
	}
	return out, nil
}
