package notify

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

const exampleYAML = `
channels:
  ops:   {type: telegram, token_env: TELEGRAM_TOKEN, chat_id: "123"}
  team:  {type: slack, webhook_url_env: SLACK_WEBHOOK}
  disc:  {type: discord, webhook_url_env: DISCORD_WEBHOOK}
  pager: {type: webhook, url: https://example.org/hook, headers: {Authorization_env: HOOK_TOKEN, X-Source: riskguard}}
  mail:  {type: email, smtp: smtp.example.org:587, from: guard@example.org, to: [me@example.org], username_env: SMTP_USER, password_env: SMTP_PASS}
  log:   {type: log}
default: [ops]
group_wait: 30s
repeat_interval: 4h
queue_size: 100
heartbeat_url_env: HEARTBEAT_URL
`

var exampleEnv = map[string]string{
	"TELEGRAM_TOKEN":  "123456:SECRET-telegram",
	"SLACK_WEBHOOK":   "https://hooks.slack.example/services/T0/B0/SECRETslack",
	"DISCORD_WEBHOOK": "https://discord.example/api/webhooks/1/SECRETdiscord",
	"HOOK_TOKEN":      "Bearer SECREThook",
	"SMTP_USER":       "guard",
	"SMTP_PASS":       "SECRETpass",
	"HEARTBEAT_URL":   "https://hc.example/ping/SECRET-uuid/",
}

func decode(t testing.TB, src string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(src), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func envFunc(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfigExample(t *testing.T) {
	t.Parallel()
	cfg, errs := ParseConfig(decode(t, exampleYAML), envFunc(exampleEnv))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got, want := cfg.ChannelNames(), []string{"disc", "log", "mail", "ops", "pager", "team"}; !slices.Equal(got, want) {
		t.Errorf("channels %v, want %v", got, want)
	}
	want := map[string]ChannelConfig{
		"ops":   {Name: "ops", Type: TypeTelegram, Token: "123456:SECRET-telegram", ChatID: "123", URL: DefaultTelegramAPI},
		"team":  {Name: "team", Type: TypeSlack, URL: exampleEnv["SLACK_WEBHOOK"]},
		"disc":  {Name: "disc", Type: TypeDiscord, URL: exampleEnv["DISCORD_WEBHOOK"]},
		"pager": {Name: "pager", Type: TypeWebhook, URL: "https://example.org/hook", Headers: map[string]string{"Authorization": "Bearer SECREThook", "X-Source": "riskguard"}},
		"mail": {Name: "mail", Type: TypeEmail, SMTP: "smtp.example.org:587", From: "guard@example.org", To: []string{"me@example.org"},
			Username: "guard", Password: "SECRETpass"},
		"log": {Name: "log", Type: TypeLog},
	}
	for name, w := range want {
		if got := cfg.Channels[name]; !reflect.DeepEqual(got, w) {
			t.Errorf("channel %s:\n got %+v\nwant %+v", name, got, w)
		}
	}
	if !slices.Equal(cfg.Default, []string{"ops"}) || cfg.GroupWait != 30*time.Second || cfg.RepeatInterval != 4*time.Hour ||
		cfg.QueueSize != 100 || cfg.HeartbeatURL != "https://hc.example/ping/SECRET-uuid" || cfg.Timeout != DefaultTimeout || cfg.MaxAttempts != DefaultMaxAttempts {
		t.Errorf("top level: %+v", cfg)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
}

func TestParseConfigEmpty(t *testing.T) {
	t.Parallel()
	cfg, errs := ParseConfig(nil, nil)
	if len(errs) > 0 || cfg == nil || len(cfg.Channels) != 0 || cfg.GroupWait != DefaultGroupWait {
		t.Fatalf("cfg %+v errs %v", cfg, errs)
	}
}

func TestParseConfigLiteralSecretsWarn(t *testing.T) {
	t.Parallel()
	src := `
channels:
  ops:  {type: telegram, token: "1:literal", chat_id: -1001234, api_url: "http://127.0.0.1:1/"}
  team: {type: slack, webhook_url: "https://hooks.slack.example/services/x"}
  hook: {type: webhook, url: "https://example.org/h", headers: {Authorization: "Bearer x", X-Name: ok}}
  mail: {type: email, smtp: "127.0.0.1:25", from: a@b.c, to: d@e.f, username: u, password: p}
group_wait: 0
`
	cfg, errs := ParseConfig(decode(t, src), nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []string{
		"notify.channels.hook.headers.Authorization: a secret written in the configuration file; prefer Authorization_env",
		"notify.channels.mail.password: a secret written in the configuration file; prefer password_env",
		"notify.channels.ops.token: a secret written in the configuration file; prefer token_env",
		"notify.channels.team.webhook_url: a secret written in the configuration file; prefer webhook_url_env",
	}
	if !slices.Equal(cfg.Warnings, want) {
		t.Errorf("warnings\n got %q\nwant %q", cfg.Warnings, want)
	}
	if cfg.Channels["ops"].ChatID != "-1001234" || cfg.Channels["ops"].URL != "http://127.0.0.1:1" || cfg.GroupWait != 0 {
		t.Errorf("ops %+v group_wait %s", cfg.Channels["ops"], cfg.GroupWait)
	}
	if got := cfg.Channels["mail"].To; !slices.Equal(got, []string{"d@e.f"}) {
		t.Errorf("to %v", got)
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"unknown top key", `{chanels: {}}`, []string{"notify.chanels: unknown key"}},
		{"channels not a map", `{channels: [a]}`, []string{"notify.channels: expected a mapping"}},
		{"channel not a map", `{channels: {ops: telegram}}`, []string{"notify.channels.ops: expected a mapping"}},
		{"bad channel name", `{channels: {"o ps": {type: log}}}`, []string{"notify.channels.o ps: channel names are"}},
		{"no type", `{channels: {ops: {chat_id: 1}}}`, []string{"notify.channels.ops.type: required"}},
		{"unknown type", `{channels: {ops: {type: pigeon}}}`, []string{`notify.channels.ops.type: unknown type "pigeon"`}},
		{"telegram missing", `{channels: {ops: {type: telegram}}}`, []string{
			"notify.channels.ops.token: required (or token_env", "notify.channels.ops.chat_id: required"}},
		{"telegram env unset", `{channels: {ops: {type: telegram, token_env: NOPE, chat_id: "1"}}}`, []string{
			"notify.channels.ops.token_env: environment variable NOPE is unset or empty"}},
		{"telegram both", `{channels: {ops: {type: telegram, token: a, token_env: TELEGRAM_TOKEN, chat_id: "1"}}}`, []string{
			"notify.channels.ops.token: set either token or token_env, not both"}},
		{"telegram bad chat", `{channels: {ops: {type: telegram, token_env: TELEGRAM_TOKEN, chat_id: "abc"}}}`, []string{
			"notify.channels.ops.chat_id: expected a numeric chat id or @channelname"}},
		{"telegram chat float", `{channels: {ops: {type: telegram, token_env: TELEGRAM_TOKEN, chat_id: 1.5}}}`, []string{
			"notify.channels.ops.chat_id: expected an integer or a string"}},
		{"telegram bad api", `{channels: {ops: {type: telegram, token_env: TELEGRAM_TOKEN, chat_id: 1, api_url: "ftp://x"}}}`, []string{
			"notify.channels.ops.api_url: expected an absolute http or https URL"}},
		{"telegram unknown key", `{channels: {ops: {type: telegram, token_env: TELEGRAM_TOKEN, chat_id: 1, chat: 2}}}`, []string{
			"notify.channels.ops.chat: unknown key"}},
		{"slack missing", `{channels: {team: {type: slack}}}`, []string{"notify.channels.team.webhook_url: required"}},
		{"slack not url", `{channels: {team: {type: slack, webhook_url: "hooks/SECRET"}}}`, []string{
			"notify.channels.team.webhook_url: expected an absolute http or https URL"}},
		{"slack not a string", `{channels: {team: {type: slack, webhook_url: 5}}}`, []string{
			"notify.channels.team.webhook_url: expected a string"}},
		{"discord env empty name", `{channels: {d: {type: discord, webhook_url_env: ""}}}`, []string{
			"notify.channels.d.webhook_url_env: empty"}},
		{"webhook bad header", `{channels: {h: {type: webhook, url: "http://x/", headers: {"Bad Name": v, A_env: NOPE, B: 1}}}}`, []string{
			"notify.channels.h.headers.Bad Name: not a valid header name",
			"notify.channels.h.headers.A_env: environment variable NOPE is unset or empty",
			"notify.channels.h.headers.B: expected a string"}},
		{"webhook header twice", `{channels: {h: {type: webhook, url: "http://x/", headers: {A: x, A_env: HOOK_TOKEN}}}}`, []string{
			"notify.channels.h.headers.A_env: header A set twice"}},
		{"webhook headers not map", `{channels: {h: {type: webhook, url: "http://x/", headers: [a]}}}`, []string{
			"notify.channels.h.headers: expected a mapping"}},
		{"email missing", `{channels: {m: {type: email}}}`, []string{
			"notify.channels.m.smtp: required", "notify.channels.m.from: required", "notify.channels.m.to: required"}},
		{"email bad", `{channels: {m: {type: email, smtp: "host", from: "not an address", to: ["x", 3], username: u}}}`, []string{
			"notify.channels.m.smtp: expected host:port", "notify.channels.m.from: not an e-mail address",
			`notify.channels.m.to: "x" is not an e-mail address`, "notify.channels.m.to[1]: expected a non-empty string",
			"notify.channels.m.password: username and password go together"}},
		{"default unknown", `{channels: {log: {type: log}}, default: [ops]}`, []string{`notify.default: unknown channel "ops"`}},
		{"default not list", `{default: {a: b}}`, []string{"notify.default: expected a string or a list"}},
		{"durations", `{group_wait: soon, repeat_interval: 5, timeout: 0s}`, []string{
			`notify.group_wait: bad duration "soon": use a number with a unit, like 30s, 5m or 1h`,
			"notify.repeat_interval: expected a duration with a unit",
			"notify.timeout: 0s is out of range"}},
		{"duration negative", `{group_wait: -1s}`, []string{"notify.group_wait: must not be negative, got -1s"}},
		{"integers", `{queue_size: 0, max_attempts: many}`, []string{
			"notify.queue_size: 0 is out of range 1..100000", "notify.max_attempts: expected an integer"}},
		{"heartbeat", `{heartbeat_url: "not a url"}`, []string{"notify.heartbeat_url: expected an absolute http or https URL"}},
		{"heartbeat env", `{heartbeat_url_env: NOPE}`, []string{"notify.heartbeat_url_env: environment variable NOPE is unset or empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, errs := ParseConfig(decode(t, tt.src), envFunc(exampleEnv))
			if cfg != nil {
				t.Errorf("config %+v despite errors", cfg)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
				for _, v := range exampleEnv {
					if strings.Contains(e.Error(), v) {
						t.Errorf("error %q reveals a secret", e)
					}
				}
				if strings.Contains(e.Error(), "SECRET") {
					t.Errorf("error %q reveals a secret", e)
				}
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
					t.Errorf("no error starting %q in\n%s", w, strings.Join(got, "\n"))
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("%d errors, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
		})
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add(exampleYAML)
	f.Add(`{channels: {ops: {type: telegram, token: "SECRET", chat_id: "@x"}}, default: ops}`)
	f.Add(`{channels: {h: {type: webhook, url: "http://127.0.0.1/SECRET", headers: {A_env: HOOK_TOKEN}}}, queue_size: 1e3}`)
	f.Add(`{channels: {m: {type: email, smtp: "[::1]:25", from: a@b, to: [c@d], password_env: SMTP_PASS, username: SECRET}}}`)
	f.Fuzz(func(t *testing.T, src string) {
		var m map[string]any
		if yaml.Unmarshal([]byte(src), &m) != nil {
			return
		}
		cfg, errs := ParseConfig(m, envFunc(exampleEnv))
		if (cfg == nil) == (len(errs) == 0) {
			t.Fatalf("config %v with %d errors", cfg, len(errs))
		}
		for _, e := range errs {
			var ce *ConfigError
			if !errors.As(e, &ce) || !strings.HasPrefix(ce.Path, "notify") {
				t.Fatalf("error %q has no key path", e)
			}
			for _, v := range exampleEnv {
				if strings.Contains(e.Error(), v) && !strings.Contains(src, v) {
					t.Fatalf("error %q reveals a secret", e)
				}
			}
		}
		if cfg != nil {
			if _, err := NewDispatcher(cfg); err != nil {
				t.Fatalf("valid config refused by NewDispatcher: %v", err)
			}
		}
	})
}

func TestConfigPrintsNoSecret(t *testing.T) {
	t.Parallel()
	cfg, errs := ParseConfig(decode(t, exampleYAML), envFunc(exampleEnv))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%+v", cfg.Channels), fmt.Sprintf("%#v", cfg.Channels["ops"]), fmt.Sprint(*cfg)} {
		if strings.Contains(s, "SECRET") {
			t.Errorf("printed config reveals a secret: %s", s)
		}
	}
}

// A required key written without a value is reported, not accepted and then
// refused by NewDispatcher (found by FuzzParseConfig).
func TestRequiredKeyWithoutValue(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`{channels: {A: {type: email, smtp, from, to: [a@b]}}}`,
		"channels:\n  A:\n    type: email\n    smtp:\n    from: a@b\n    to: [c@d]\n",
		"channels:\n  t:\n    type: slack\n    webhook_url:\n",
	} {
		cfg, errs := ParseConfig(decode(t, src), envFunc(exampleEnv))
		if cfg != nil || len(errs) == 0 {
			t.Errorf("%q accepted", src)
			continue
		}
		if !strings.Contains(errors.Join(errs...).Error(), "required") {
			t.Errorf("%q: errors %v do not say what is required", src, errs)
		}
	}
}
