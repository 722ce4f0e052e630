package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/exchange"

	"github.com/riskguard/riskguard/engine"
)

// exchange reads the exchange section over x, which holds its defaults,
// and the engine settings among its keys (index_names) over e.
func (l *loader) exchange(x *Exchange, e *engine.Config) {
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
	x.PositionsPath = l.str(get("positions_path"), x.PositionsPath)
	if !strings.HasPrefix(x.PositionsPath, "/") {
		l.bad(get("positions_path"), l.envOf(get("positions_path")), "must start with /, got %q", x.PositionsPath)
	}
	x.OrderPath = l.str(get("order_path"), x.OrderPath)
	if err := exchange.CheckOrderPath(x.OrderPath); err != nil {
		l.bad(get("order_path"), l.envOf(get("order_path")), "%v", err)
	}
	if x.ClientOrderIDField = l.str(get("client_order_id_field"), ""); x.ClientOrderIDField != "" {
		if err := exchange.CheckClientOrderIDField(x.ClientOrderIDField); err != nil {
			l.bad(get("client_order_id_field"), l.envOf(get("client_order_id_field")), "%v", err)
		}
	}
	x.Timeout = l.positive(get("timeout"), x.Timeout)
	x.MaxRetries = l.integer(get("max_retries"), x.MaxRetries)
	if x.MaxRetries < 0 || x.MaxRetries > 20 {
		l.bad(get("max_retries"), l.envOf(get("max_retries")), "must be within 0..20, got %d", x.MaxRetries)
	}
	x.RateLimit = l.float(get("rate_limit"), x.RateLimit)
	if !(x.RateLimit > 0) {
		l.bad(get("rate_limit"), l.envOf(get("rate_limit")), "must be > 0 requests per second, got %v", x.RateLimit)
	}
	x.RateBurst = l.integer(get("rate_burst"), x.RateBurst)
	if x.RateBurst < 1 {
		l.bad(get("rate_burst"), l.envOf(get("rate_burst")), "must be at least 1, got %d", x.RateBurst)
	}
	x.ClockSync = l.positive(get("clock_sync"), x.ClockSync)
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
func (l *loader) fastLaneBudget(e engine.Config, x Exchange) {
	if e.FastInterval <= 0 || !(x.RateLimit > 0) {
		return
	}
	k := key("engine", "fast_interval")
	if rate := engine.TickRequests / e.FastInterval.Seconds(); rate > x.RateLimit {
		l.bad(k, l.envOf(k), "%s needs about %.1f requests per second (%d a tick), over exchange.rate_limit (%v/s): lengthen it to at least %s or raise the rate limit",
			e.FastInterval, rate, engine.TickRequests, x.RateLimit, time.Duration(float64(engine.TickRequests)/x.RateLimit*float64(time.Second)).Round(time.Millisecond))
	}
}
