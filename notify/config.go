package notify

import (
	"errors"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/internal/yamlnode"
)

// Channel types.
const (
	TypeTelegram = "telegram"
	TypeSlack    = "slack"
	TypeDiscord  = "discord"
	TypeWebhook  = "webhook"
	TypeEmail    = "email"
	TypeLog      = "log"
)

// Defaults of the notify section.
const (
	DefaultGroupWait      = 30 * time.Second
	DefaultRepeatInterval = 4 * time.Hour
	DefaultQueueSize      = 100
	DefaultTimeout        = 10 * time.Second
	DefaultMaxAttempts    = 4
	DefaultTelegramAPI    = "https://api.telegram.org"
)

// Config is the validated notify section of the configuration file.
type Config struct {
	// Channels by name.
	Channels map[string]ChannelConfig
	// Default names the channels of a message that names none; empty means
	// every channel.
	Default []string
	// GroupWait holds a message this long so that identical ones arriving
	// meanwhile go out as one; 0 sends at once.
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

// ChannelConfig is one channel. Only the fields of its Type are set; the
// secrets are already read from the environment.
type ChannelConfig struct {
	Name string
	Type string
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
	if c.Type == TypeSlack || c.Type == TypeDiscord || c.Type == TypeWebhook {
		s = append(s, c.URL)
		if u, err := url.Parse(c.URL); err == nil {
			if len(u.Path) > 1 {
				s = append(s, u.Path, u.EscapedPath())
			}
			if u.RawQuery != "" {
				s = append(s, u.RawQuery)
			}
			if u.User != nil {
				s = append(s, u.User.String())
			}
		}
	}
	return s
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
	typ, _ := m["type"].(string)
	cc.Type = typ
	switch typ {
	case TypeTelegram:
		p.unknown(path, m, "type", "token", "token_env", "chat_id", "api_url", "control_chat_ids")
		cc.Token = p.required(m, path, "token", true)
		if strings.ContainsAny(cc.Token, "/?#% ") {
			p.errorf(path+".token", "not a bot token: it contains /, ?, #, %% or a space")
		}
		cc.ChatID = p.chatID(m, path+".chat_id")
		if v, ok := m["control_chat_ids"]; ok {
			list, isList := v.([]any)
			if !isList || len(list) == 0 {
				p.errorf(path+".control_chat_ids", "expected a list of the chat ids whose commands the guard obeys, like [123456789]")
			}
			for i, id := range list {
				if s := p.chatID(map[string]any{"chat_id": id}, fmt.Sprintf("%s.control_chat_ids[%d]", path, i)); s != "" {
					cc.ControlChats = append(cc.ControlChats, s)
				}
			}
		}
		cc.URL = DefaultTelegramAPI
		if s, ok := p.str(m, path, "api_url"); ok && s != "" {
			if p.httpURL(path+".api_url", s) {
				cc.URL = strings.TrimRight(s, "/")
			}
		}
	case TypeSlack, TypeDiscord:
		p.unknown(path, m, "type", "webhook_url", "webhook_url_env")
		if cc.URL = p.required(m, path, "webhook_url", true); cc.URL != "" {
			p.httpURL(path+".webhook_url", cc.URL)
		}
	case TypeWebhook:
		p.unknown(path, m, "type", "url", "url_env", "headers")
		if cc.URL = p.required(m, path, "url", false); cc.URL != "" {
			p.httpURL(path+".url", cc.URL)
		}
		cc.Headers = p.headers(m, path+".headers")
	case TypeEmail:
		p.unknown(path, m, "type", "smtp", "from", "to", "username", "username_env", "password", "password_env")
		if s := p.required(m, path, "smtp", false); s != "" {
			if _, port, err := splitHostPort(s); err != nil || port == "" {
				p.errorf(path+".smtp", "expected host:port, like smtp.example.org:587")
			}
			cc.SMTP = s
		}
		if s := p.required(m, path, "from", false); s != "" {
			if _, err := mail.ParseAddress(s); err != nil {
				p.errorf(path+".from", "not an e-mail address")
			}
			cc.From = s
		}
		if v, ok := m["to"]; ok {
			cc.To = p.list(path+".to", v)
			for _, a := range cc.To {
				if _, err := mail.ParseAddress(a); err != nil {
					p.errorf(path+".to", "%q is not an e-mail address", a)
				}
			}
		}
		if len(cc.To) == 0 {
			p.errorf(path+".to", "required: one or more addresses")
		}
		cc.Username, _ = p.secret(m, path, "username", false)
		cc.Password, _ = p.secret(m, path, "password", true)
		if (cc.Username == "") != (cc.Password == "") {
			p.errorf(path+".password", "username and password go together")
		}
	case TypeLog:
		p.unknown(path, m, "type")
	case "":
		p.errorf(path+".type", "required: one of telegram, slack, discord, webhook, email, log")
	default:
		p.errorf(path+".type", "unknown type %q (known: telegram, slack, discord, webhook, email, log)", typ)
	}
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

func (p *parser) chatID(m map[string]any, path string) string {
	v, ok := m["chat_id"]
	if !ok || v == nil {
		p.errorf(path, "required: a chat id like \"-1001234567890\" or a channel like \"@name\"")
		return ""
	}
	var s string
	switch x := v.(type) {
	case string:
		s = strings.TrimSpace(x)
	case int:
		s = strconv.Itoa(x)
	case int64:
		s = strconv.FormatInt(x, 10)
	case uint64:
		s = strconv.FormatUint(x, 10)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			p.errorf(path, "expected an integer or a string")
			return ""
		}
		s = strconv.FormatInt(int64(x), 10)
	default:
		p.errorf(path, "expected an integer or a string")
		return ""
	}
	if s == "" {
		p.errorf(path, "required: empty")
	} else if _, err := strconv.ParseInt(s, 10, 64); err != nil && !strings.HasPrefix(s, "@") {
		p.errorf(path, "expected a numeric chat id or @channelname")
	}
	return s
}

func (p *parser) headers(m map[string]any, path string) map[string]string {
	v, ok := m["headers"]
	if !ok || v == nil {
		return nil
	}
	hm, ok := v.(map[string]any)
	if !ok {
		p.errorf(path, "expected a mapping of header names to values")
		return nil
	}
	keys := make([]string, 0, len(hm))
	for k := range hm {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := map[string]string{}
	for _, k := range keys {
		name, fromEnv := strings.CutSuffix(k, "_env")
		if !validHeaderName(name) {
			p.errorf(path+"."+k, "not a valid header name")
			continue
		}
		s, ok := hm[k].(string)
		if !ok {
			p.errorf(path+"."+k, "expected a string")
			continue
		}
		if _, dup := out[name]; dup {
			p.errorf(path+"."+k, "header %s set twice", name)
			continue
		}
		if fromEnv {
			val := strings.TrimSpace(p.getenv(s))
			if val == "" {
				p.errorf(path+"."+k, "environment variable %s is unset or empty", s)
				continue
			}
			s = val
		} else if sensitiveHeader(name) {
			p.warnings = append(p.warnings, fmt.Sprintf("%s.%s: a secret written in the configuration file; prefer %s_env", path, k, k))
		}
		if strings.ContainsAny(s, "\r\n") {
			p.errorf(path+"."+k, "a header value cannot contain a line break")
			continue
		}
		out[name] = s
	}
	return out
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func sensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "token", "key", "secret", "signature", "cookie", "password"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
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

func splitHostPort(s string) (string, string, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return "", "", errors.New("no port")
	}
	port := s[i+1:]
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", "", errors.New("bad port")
	}
	return strings.Trim(s[:i], "[]"), port, nil
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
