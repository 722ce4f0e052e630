package notify

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/internal/nextstep"
	"github.com/riskguard/riskguard/internal/yamlnode"
)

// Defaults of the notify section.
const (
	DefaultGroupWait      = 30 * time.Second
	DefaultRepeatInterval = 4 * time.Hour
	DefaultQueueSize      = 100
	DefaultTimeout        = 10 * time.Second
	DefaultMaxAttempts    = 4
)

// Config is the validated notify section of the configuration file.
type Config struct {
	// Channels by name.
	Channels map[string]ChannelConfig
	// Default names the channels of a message that names none; empty means
	// every channel.
	Default []string
	// GroupWait is how long after the last message a group sent the ones that
	// follow are merged into one follow-up, "(×N)", sent when it ends. The
	// first message of a quiet group goes at once, and so does a critical
	// one unless one of its kind went out in the group within GroupWait.
	// 0 merges nothing.
	GroupWait time.Duration
	// RepeatInterval is how long an unchanged message is not sent again.
	RepeatInterval time.Duration
	// QueueSize bounds each channel's queue; a full queue drops its oldest.
	QueueSize int
	// Timeout bounds one delivery attempt.
	Timeout time.Duration
	// MaxAttempts bounds the delivery attempts of one message.
	MaxAttempts int
	// HeartbeatURL is pinged after every tick; empty disables the heartbeat.
	HeartbeatURL string
	// Warnings are things that work but should be changed, such as a secret
	// written in the file instead of in the environment. Each names its key.
	Warnings []string
}

// ChannelConfig is one channel. Only the fields of its Type are set, by
// its row's decode in channelTypes; the secrets are already read from the
// environment. A channel whose settings fit no field below adds its own.
type ChannelConfig struct {
	Name string
	Type string // one of the table's (TypeTelegram, …)
	// URL is the Slack or Discord webhook, the generic webhook's URL, or the
	// Telegram Bot API's base URL.
	URL string
	// Token and ChatID are Telegram's.
	Token  string
	ChatID string
	// ControlChats are the Telegram chats whose commands the guard obeys
	// (control_chat_ids); empty: the channel only sends.
	ControlChats []string
	// Headers are sent with every generic webhook request.
	Headers map[string]string
	// SMTP is the e-mail server's host:port; From, To, Username and Password
	// are the e-mail channel's.
	SMTP     string
	From     string
	To       []string
	Username string
	Password string
}

// secrets lists the values of c that must never be printed.
func (c *ChannelConfig) secrets() []string {
	s := []string{c.Token, c.Password, c.Username}
	for _, v := range c.Headers {
		s = append(s, v)
	}
	return s
}

// redactor keeps c's secrets out of errors; a URL that holds one is shown
// by its scheme, host and port.
func (c *ChannelConfig) redactor() redactor {
	r := newRedactor(c.secrets()...)
	if t, ok := channelTypeOf(c.Type); ok && t.secretURL {
		r = r.withURL(c.URL)
	}
	return r
}

// target is c for nextstep: the channel, where its address is written.
func (c *ChannelConfig) target() nextstep.Target {
	setting := "notify.channels." + c.Name + ".url"
	if c.Type == TypeEmail {
		setting = "notify.channels." + c.Name + ".smtp"
	}
	return nextstep.Target{
		Name:    "channel " + c.Name,
		Setting: setting,
		URL:     c.URL,
		Timeout: "raise notify.timeout",
	}
}

// channelName is what a channel may be called: it appears in metrics labels
// and on the command line.
var channelName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ParseConfig validates the raw notify section (as decoded from YAML) and
// reads the secrets named by *_env keys through getenv. A nil or empty raw
// gives a configuration without channels. Every problem is reported, each
// naming its key path, e.g. "notify.channels.ops.chat_id: required"; no
// error contains a secret. The configuration is nil when there are errors.
func ParseConfig(raw map[string]any, getenv func(string) string) (*Config, []error) {
	cfg, errs := parse(raw, getenv)
	if len(errs) > 0 {
		return nil, errs
	}
	return cfg, nil
}

// CheckConfig validates raw as ParseConfig does, but needs no secret to be
// set, so that a configuration can be checked on a machine that does not
// hold them: each *_env variable that is unset or empty is reported in
// missing (with its ConfigError.MissingEnv), not as an error. The
// configuration is returned when errs is empty; its missing secrets are
// empty strings.
func CheckConfig(raw map[string]any, getenv func(string) string) (cfg *Config, missing []*ConfigError, errs []error) {
	cfg, all := parse(raw, getenv)
	for _, err := range all {
		var ce *ConfigError
		if errors.As(err, &ce) && ce.MissingEnv != "" {
			missing = append(missing, ce)
			continue
		}
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, missing, errs
	}
	return cfg, missing, nil
}

// parse validates raw; the configuration is usable where the errors are
// only missing secrets.
func parse(raw map[string]any, getenv func(string) string) (*Config, []error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	p := &parser{getenv: getenv}
	cfg := &Config{
		Channels:       map[string]ChannelConfig{},
		GroupWait:      DefaultGroupWait,
		RepeatInterval: DefaultRepeatInterval,
		QueueSize:      DefaultQueueSize,
		Timeout:        DefaultTimeout,
		MaxAttempts:    DefaultMaxAttempts,
	}
	p.unknown("notify", raw, "channels", "default", "group_wait", "repeat_interval", "queue_size", "timeout", "max_attempts", "heartbeat_url", "heartbeat_url_env")
	if v, ok := raw["channels"]; ok && v != nil {
		chans, ok := v.(map[string]any)
		if !ok {
			p.errorf("notify.channels", "expected a mapping of channel names to channels")
		}
		names := make([]string, 0, len(chans))
		for name := range chans {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if cc, ok := p.channel(name, chans[name]); ok {
				cfg.Channels[name] = cc
			}
		}
	}
	if v, ok := raw["default"]; ok {
		cfg.Default = p.list("notify.default", v)
		for _, name := range cfg.Default {
			if _, ok := cfg.Channels[name]; !ok {
				p.errorf("notify.default", "unknown channel %q", name)
			}
		}
	}
	p.duration(raw, "notify", "group_wait", &cfg.GroupWait, 0, 24*time.Hour)
	p.duration(raw, "notify", "repeat_interval", &cfg.RepeatInterval, 0, 30*24*time.Hour)
	p.duration(raw, "notify", "timeout", &cfg.Timeout, time.Millisecond, 10*time.Minute)
	p.integer(raw, "notify", "queue_size", &cfg.QueueSize, 1, 100000)
	p.integer(raw, "notify", "max_attempts", &cfg.MaxAttempts, 1, 20)
	if u, ok := p.secret(raw, "notify", "heartbeat_url", false); ok && u != "" {
		if p.httpURL("notify.heartbeat_url", u) {
			cfg.HeartbeatURL = strings.TrimRight(u, "/")
		}
	}
	cfg.Warnings = p.warnings
	return cfg, p.errs
}

// ChannelNames returns the configured channel names, sorted.
func (c *Config) ChannelNames() []string {
	names := make([]string, 0, len(c.Channels))
	for n := range c.Channels {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

type parser struct {
	getenv   func(string) string
	errs     []error
	warnings []string
}

// ConfigError is a problem in the notify section at Path.
type ConfigError struct {
	// Path is the key's path, e.g. notify.channels.ops.token_env.
	Path string
	Msg  string
	// MissingEnv names the environment variable a secret was to come from
	// when it is unset or empty; "" for every other problem.
	MissingEnv string
}

func (e *ConfigError) Error() string { return e.Path + ": " + e.Msg }

func (p *parser) errorf(path, format string, args ...any) {
	p.errs = append(p.errs, &ConfigError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// unknown reports keys of m not among known.
func (p *parser) unknown(path string, m map[string]any, known ...string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(known, k) {
			p.errorf(path+"."+k, "%s", yamlnode.UnknownKey(k, "", known))
		}
	}
}

// channel reads the channel name: its name here, its type and settings by
// its row of channelTypes.
func (p *parser) channel(name string, v any) (ChannelConfig, bool) {
	path := "notify.channels." + name
	if !channelName.MatchString(name) {
		p.errorf(path, "channel names are 1 to 64 letters, digits, _ or -")
		return ChannelConfig{}, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		p.errorf(path, "expected a mapping like {type: slack, webhook_url_env: SLACK_WEBHOOK}")
		return ChannelConfig{}, false
	}
	before := p.hardErrors()
	cc := ChannelConfig{Name: name}
	p.decodeChannel(path, m, &cc)
	// A channel whose only problem is a missing secret is kept, so that
	// CheckConfig knows its name.
	return cc, p.hardErrors() == before
}

// hardErrors counts the errors other than missing secrets.
func (p *parser) hardErrors() int {
	n := 0
	for _, err := range p.errs {
		if ce, ok := err.(*ConfigError); !ok || ce.MissingEnv == "" {
			n++
		}
	}
	return n
}

// str reads an optional string key.
func (p *parser) str(m map[string]any, path, key string) (string, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		p.errorf(path+"."+key, "expected a string")
		return "", false
	}
	return strings.TrimSpace(s), true
}

// secret reads KEY or KEY_env (the name of an environment variable). A
// sensitive value written in the file is accepted with a warning.
func (p *parser) secret(m map[string]any, path, key string, sensitive bool) (string, bool) {
	lit, hasLit := p.str(m, path, key)
	env, hasEnv := p.str(m, path, key+"_env")
	switch {
	case hasLit && hasEnv:
		p.errorf(path+"."+key, "set either %s or %s_env, not both", key, key)
		return "", false
	case hasEnv:
		if env == "" {
			p.errorf(path+"."+key+"_env", "empty: name an environment variable")
			return "", false
		}
		v := strings.TrimSpace(p.getenv(env))
		if v == "" {
			p.errs = append(p.errs, &ConfigError{Path: path + "." + key + "_env", MissingEnv: env,
				Msg: fmt.Sprintf("environment variable %s is unset or empty", env)})
			return "", false
		}
		return v, true
	case hasLit:
		if sensitive && lit != "" {
			p.warnings = append(p.warnings, fmt.Sprintf("%s.%s: a secret written in the configuration file; prefer %s_env", path, key, key))
		}
		return lit, true
	}
	return "", false
}

// required is secret that must be present.
func (p *parser) required(m map[string]any, path, key string, sensitive bool) string {
	_, hasLit := m[key]
	_, hasEnv := m[key+"_env"]
	if !hasLit && !hasEnv {
		p.errorf(path+"."+key, "required (or %s_env naming an environment variable)", key)
		return ""
	}
	v, ok := p.secret(m, path, key, sensitive)
	// A key present with no value (`smtp,` in a flow mapping, `smtp:`) is
	// as missing as an empty one; secret has reported its own errors.
	if v == "" && (ok || (m[key] == nil && m[key+"_env"] == nil)) {
		p.errorf(path+"."+key, "required: empty")
	}
	return v
}

// requiredURL is required for an absolute http(s) URL.
func (p *parser) requiredURL(m map[string]any, path, key string, sensitive bool) string {
	u := p.required(m, path, key, sensitive)
	if u != "" {
		p.httpURL(path+"."+key, u)
	}
	return u
}

// list reads a string or a list of strings.
func (p *parser) list(path string, v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if strings.TrimSpace(x) == "" {
			return nil
		}
		return []string{strings.TrimSpace(x)}
	case []any:
		out := make([]string, 0, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok || strings.TrimSpace(s) == "" {
				p.errorf(fmt.Sprintf("%s[%d]", path, i), "expected a non-empty string")
				continue
			}
			out = append(out, strings.TrimSpace(s))
		}
		return out
	case []string:
		return x
	}
	p.errorf(path, "expected a string or a list of strings")
	return nil
}

func (p *parser) duration(m map[string]any, path, key string, dst *time.Duration, lo, hi time.Duration) {
	v, ok := m[key]
	if !ok || v == nil {
		return
	}
	var d time.Duration
	switch x := v.(type) {
	case string:
		var err error
		if d, err = yamlnode.ParseDuration(strings.TrimSpace(x)); err != nil {
			p.errorf(path+"."+key, "%v", err)
			return
		}
	case int:
		if x != 0 {
			p.errorf(path+"."+key, "expected a duration with a unit, like 30s")
			return
		}
	case time.Duration:
		d = x
	default:
		p.errorf(path+"."+key, "expected a duration like 30s or 4h")
		return
	}
	if d < lo || d > hi {
		p.errorf(path+"."+key, "%s is out of range %s..%s", d, lo, hi)
		return
	}
	*dst = d
}

func (p *parser) integer(m map[string]any, path, key string, dst *int, lo, hi int) {
	v, ok := m[key]
	if !ok || v == nil {
		return
	}
	var n int
	switch x := v.(type) {
	case int:
		n = x
	case int64:
		n = int(max(min(x, math.MaxInt32), math.MinInt32))
	case uint64:
		n = int(min(x, math.MaxInt32))
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > math.MaxInt32 {
			p.errorf(path+"."+key, "expected an integer")
			return
		}
		n = int(x)
	case string:
		var err error
		if n, err = strconv.Atoi(strings.TrimSpace(x)); err != nil {
			p.errorf(path+"."+key, "expected an integer")
			return
		}
	default:
		p.errorf(path+"."+key, "expected an integer")
		return
	}
	if n < lo || n > hi {
		p.errorf(path+"."+key, "%d is out of range %d..%d", n, lo, hi)
		return
	}
	*dst = n
}

// httpURL checks that s is an absolute http(s) URL, without printing it:
// webhook URLs carry their secret in the path.
func (p *parser) httpURL(path, s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.errorf(path, "expected an absolute http or https URL")
		return false
	}
	return true
}

// String names the channel without its secrets, so that printing a
// configuration (%v, %+v) cannot reveal them.
func (c ChannelConfig) String() string { return c.Type + " channel " + c.Name }

// GoString is String, for %#v.
func (c ChannelConfig) GoString() string { return c.String() }

// String summarizes the configuration without secrets.
func (c Config) String() string {
	hb := "off"
	if c.HeartbeatURL != "" {
		hb = "on"
	}
	return fmt.Sprintf("notify: channels %v, default %v, group_wait %s, repeat_interval %s, queue_size %d, heartbeat %s",
		c.ChannelNames(), c.Default, c.GroupWait, c.RepeatInterval, c.QueueSize, hb)
}
