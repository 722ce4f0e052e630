package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	koanfyaml "github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	"gopkg.in/yaml.v3"

	"github.com/riskguard/riskguard/rules"
)

// config is the whole configuration file, validated, with defaults applied
// and environment overrides merged.
type config struct {
	// Path is the file the configuration was read from.
	Path     string
	Exchange exchangeConfig
	Engine   engineConfig
	// Notify is the raw notify section, for the notifications code to
	// validate; only its being a mapping is checked here.
	Notify map[string]any
	Rules  *rules.Set
	// Warnings are problems that do not stop the program, e.g. a secret
	// kept in the YAML. They never contain a secret.
	Warnings []string
}

// exchangeConfig is the exchange section.
type exchangeConfig struct {
	BaseURL string
	// APIKey and APISecret come from RISKGUARD_API_KEY / RISKGUARD_API_SECRET,
	// else from api_key_file / api_secret_file (trimmed), else from the
	// YAML's api_key / api_secret (with a warning). Either may be empty:
	// `check` needs no credentials; `run` refuses to start without them.
	APIKey, APISecret string
	// PositionsPath is the positions listing, which the spec does not show.
	PositionsPath string
	Timeout       time.Duration
	MaxRetries    int
	// RateLimit is in requests per second; RateBurst is the bucket size.
	RateLimit float64
	RateBurst int
	// ClockSync is how often the clock offset is measured again.
	ClockSync time.Duration
	// IndexNames maps a symbol name to the name of its index price, for
	// symbols whose index is not keyed by their baseName.
	IndexNames map[string]string
}

// engineConfig is the engine section. It holds no map or slice, so two of
// them compare with ==.
type engineConfig struct {
	Interval            time.Duration
	DryRun              bool
	AuditLog            string
	StateFile           string
	Listen              string
	MaxActionsPerMinute int
	BreakerReset        time.Duration
	SymbolsRefresh      time.Duration
	// StaleAfter: index prices unchanged for this long are stale; 0 is off.
	StaleAfter time.Duration
	// UnreachableAfter is how long reads may fail before a notification
	// says the exchange is unreachable.
	UnreachableAfter time.Duration
}

// Defaults of the optional keys.
const (
	defaultPositionsPath       = "/v1/contracts/positions"
	defaultTimeout             = 10 * time.Second
	defaultMaxRetries          = 3
	defaultRateLimit           = 10.0
	defaultRateBurst           = 5
	defaultClockSync           = 10 * time.Minute
	defaultInterval            = 2 * time.Second
	defaultAuditLog            = "riskguard-audit.jsonl"
	defaultStateFile           = "riskguard-state.json"
	defaultMaxActionsPerMinute = 10
	defaultBreakerReset        = 5 * time.Minute
	defaultSymbolsRefresh      = 10 * time.Minute
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

// configKeys lists every key of the exchange and engine sections.
func configKeys() []configKey {
	return []configKey{
		{"exchange", "base_url", kindString, false},
		{"exchange", "api_key", kindString, true},
		{"exchange", "api_secret", kindString, true},
		{"exchange", "api_key_file", kindString, false},
		{"exchange", "api_secret_file", kindString, false},
		{"exchange", "positions_path", kindString, false},
		{"exchange", "timeout", kindDuration, false},
		{"exchange", "max_retries", kindInt, false},
		{"exchange", "rate_limit", kindFloat, false},
		{"exchange", "rate_burst", kindInt, false},
		{"exchange", "clock_sync", kindDuration, false},
		{"exchange", "index_names", kindStringMap, false},
		{"engine", "interval", kindDuration, false},
		{"engine", "dry_run", kindBool, false},
		{"engine", "audit_log", kindString, false},
		{"engine", "state_file", kindString, false},
		{"engine", "listen", kindString, false},
		{"engine", "max_actions_per_minute", kindInt, false},
		{"engine", "breaker_reset", kindDuration, false},
		{"engine", "symbols_refresh", kindDuration, false},
		{"engine", "stale_after", kindDuration, false},
		{"engine", "unreachable_after", kindDuration, false},
	}
}

// topKeys lists the top-level sections.
func topKeys() []string { return []string{"exchange", "engine", "notify", "rules"} }

// loadConfig reads, merges and validates the configuration at path, with
// environment overrides read through getenv. Every problem of the file is
// reported at once in a *rules.ErrorList, each as FILE:LINE:COL: message.
func loadConfig(path string, getenv func(string) string) (*config, error) {
	data, err := file.Provider(path).ReadBytes()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	l := &loader{path: path, getenv: getenv, nodes: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}}

	set, rerr := rules.Parse(path, data)
	var rlist *rules.ErrorList
	switch {
	case rerr == nil:
	case errors.As(rerr, &rlist):
		l.errs = append(l.errs, rlist.Errors...)
	default:
		return nil, fmt.Errorf("rules: %w", rerr)
	}

	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		// Not a mapping, empty or invalid YAML: rules.Parse said so.
		return nil, l.result()
	}
	if !l.structure(doc.Content[0]) {
		return nil, l.result()
	}

	k := koanf.New(".")
	if err := k.Load(bytesProvider(data), koanfyaml.Parser()); err != nil {
		l.errorf(nil, "parse config: %v", err)
		return nil, l.result()
	}
	if err := k.Load(envProvider{getenv: getenv}, nil); err != nil {
		return nil, fmt.Errorf("environment overrides: %w", err)
	}
	l.k = k

	cfg := &config{Path: path, Rules: set}
	l.exchange(&cfg.Exchange)
	l.engine(&cfg.Engine)
	if raw, ok := k.Get("notify").(map[string]any); ok {
		cfg.Notify = raw
	}
	if err := l.result(); err != nil {
		return nil, err
	}
	cfg.Warnings = l.warnings
	return cfg, nil
}

// loader carries the state of one loadConfig.
type loader struct {
	path   string
	getenv func(string) string
	k      *koanf.Koanf
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
	slices.SortStableFunc(l.errs, func(a, b *rules.Error) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Col - b.Col
	})
	return &rules.ErrorList{Errors: l.errs}
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
// value is. It reports whether values can be read.
func (l *loader) structure(root *yaml.Node) bool {
	ok := true
	known := map[string]bool{}
	for _, k := range configKeys() {
		known[k.path()] = true
	}
	seenTop := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := root.Content[i], root.Content[i+1]
		if seenTop[kn.Value] {
			l.errorf(kn, "duplicate key %q", kn.Value)
			ok = false
			continue
		}
		seenTop[kn.Value] = true
		switch kn.Value {
		case "rules":
			continue // rules.Parse checked it
		case "exchange", "engine", "notify":
		default:
			l.unknownKey(kn, "", topKeys())
			ok = false
			continue
		}
		if vn.Kind == yaml.ScalarNode && vn.Tag == "!!null" {
			continue
		}
		if vn.Kind != yaml.MappingNode {
			l.errorf(vn, "%s: expected a mapping", kn.Value)
			ok = false
			continue
		}
		if kn.Value == "notify" {
			continue // validated by the notifications code
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
				ok = false
			case !known[p]:
				l.unknownKey(skn, kn.Value+".", names)
				ok = false
			default:
				l.nodes[p], l.keys[p] = svn, skn
			}
			seen[skn.Value] = true
		}
	}
	return ok
}

func (l *loader) unknownKey(k *yaml.Node, prefix string, known []string) {
	if hint := rules.DidYouMean(k.Value, known); hint != "" {
		l.errorf(k, "unknown key %q (did you mean %q?)", prefix+k.Value, prefix+hint)
		return
	}
	l.errorf(k, "unknown key %q (known: %s)", prefix+k.Value, strings.Join(known, ", "))
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
	d, err := time.ParseDuration(s)
	if err != nil {
		l.bad(k, env, "bad duration %q: use a number with a unit, like 2s or 5m", s)
		return def
	}
	if d < 0 {
		l.bad(k, env, "must not be negative, got %s", s)
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

// key returns the known key section.name.
func key(section, name string) configKey {
	for _, k := range configKeys() {
		if k.section == section && k.name == name {
			return k
		}
	}
	panic("config: unknown key " + section + "." + name) // a typo in this file
}

func (l *loader) exchange(x *exchangeConfig) {
	get := func(name string) configKey { return key("exchange", name) }
	x.BaseURL = l.str(get("base_url"), "")
	switch u, err := url.Parse(x.BaseURL); {
	case x.BaseURL == "":
		l.errorf(l.keyOrValue("exchange.base_url"), "exchange.base_url is required, e.g. https://api.example.com")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		l.bad(get("base_url"), l.envOf(get("base_url")), "%q is not an http(s) URL like https://api.example.com", x.BaseURL)
	case u.Scheme == "http" && !isLoopback(u.Hostname()):
		l.warnf("exchange.base_url uses plain http to %s: credentials and orders travel unencrypted", u.Hostname())
	}
	x.PositionsPath = l.str(get("positions_path"), defaultPositionsPath)
	if !strings.HasPrefix(x.PositionsPath, "/") {
		l.bad(get("positions_path"), l.envOf(get("positions_path")), "must start with /, got %q", x.PositionsPath)
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
	x.IndexNames = l.stringMap(get("index_names"))
	x.APIKey = l.secret("RISKGUARD_API_KEY", get("api_key_file"), get("api_key"))
	x.APISecret = l.secret("RISKGUARD_API_SECRET", get("api_secret_file"), get("api_secret"))
}

func (l *loader) engine(e *engineConfig) {
	get := func(name string) configKey { return key("engine", name) }
	e.Interval = l.positive(get("interval"), defaultInterval)
	e.DryRun = l.boolean(get("dry_run"), false)
	e.AuditLog = l.str(get("audit_log"), defaultAuditLog)
	e.StateFile = l.str(get("state_file"), defaultStateFile)
	e.Listen = l.str(get("listen"), "")
	if e.Listen != "" {
		host, port, err := net.SplitHostPort(e.Listen)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 0 || n > 65535 {
			l.bad(get("listen"), l.envOf(get("listen")), "expected host:port like 127.0.0.1:9464, got %q", e.Listen)
		} else if !isLoopback(host) {
			l.warnf("engine.listen %s serves metrics beyond this machine", e.Listen)
		}
	}
	e.MaxActionsPerMinute = l.integer(get("max_actions_per_minute"), defaultMaxActionsPerMinute)
	if e.MaxActionsPerMinute < 1 {
		l.bad(get("max_actions_per_minute"), l.envOf(get("max_actions_per_minute")), "must be at least 1, got %d", e.MaxActionsPerMinute)
	}
	e.BreakerReset = l.positive(get("breaker_reset"), defaultBreakerReset)
	e.SymbolsRefresh = l.positive(get("symbols_refresh"), defaultSymbolsRefresh)
	e.StaleAfter = l.duration(get("stale_after"), 0)
	e.UnreachableAfter = l.positive(get("unreachable_after"), time.Minute)
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
	if !k.noEnv && l.getenv(k.envName()) != "" {
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

// bytesProvider is a koanf provider over bytes already read, so that the
// positions (yaml.v3), the rules and koanf all see the same content.
type bytesProvider []byte

func (b bytesProvider) ReadBytes() ([]byte, error) { return b, nil }

func (b bytesProvider) Read() (map[string]any, error) {
	return nil, errors.New("bytes provider: use ReadBytes with a parser")
}

// envProvider is a koanf provider of the RISKGUARD_SECTION_KEY overrides,
// read through a getenv function (tests pass a map). Only known keys are
// looked up, so underscores inside key names (dry_run) are no problem.
type envProvider struct {
	getenv func(string) string
}

func (e envProvider) ReadBytes() ([]byte, error) {
	return nil, errors.New("env provider: use Read")
}

func (e envProvider) Read() (map[string]any, error) {
	out := map[string]any{}
	for _, k := range configKeys() {
		if k.noEnv {
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
