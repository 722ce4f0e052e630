package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"

	"github.com/riskguard/riskguard/rules"
)

// envMap is a getenv over a map.
func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// writeConfig writes a config file with mode 0600 and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "riskguard.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const minimalRules = `
rules:
  - name: over-max-leverage
    when: position.leverage > riskLimit.maxLeverage
`

func TestLoadConfigExample(t *testing.T) {
	t.Parallel()
	cfg, err := load("../rules.example.yaml", envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	x, e := cfg.Exchange, cfg.Engine
	if x.BaseURL != "https://api.example.com" || x.Timeout != 10*time.Second || x.APIKey != "" || x.APISecret != "" {
		t.Errorf("exchange = %+v", x)
	}
	if e.Interval != 2*time.Second || e.DryRun || cfg.Listen != "127.0.0.1:9464" ||
		e.AuditLog != "riskguard-audit.jsonl" || e.StateFile != "riskguard-state.json" || e.MaxActionsPerMinute != 10 {
		t.Errorf("engine = %+v", e)
	}
	if len(cfg.Rules.Rules) < 6 {
		t.Errorf("%d rules", len(cfg.Rules.Rules))
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q", cfg.Warnings)
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n"+minimalRules)
	cfg, err := load(path, envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := engine.Config{
		Interval: 2 * time.Second, AuditLog: "riskguard-audit.jsonl", StateFile: "riskguard-state.json",
		MaxActionsPerMinute: 10, BreakerReset: 5 * time.Minute, SymbolsRefresh: 10 * time.Minute, UnreachableAfter: time.Minute,
		ActionTimeout: 30 * time.Second, ActionConcurrency: 4, SymbolBackoffMax: time.Minute, MaxWindow: 24 * time.Hour, FastDistance: 0.05,
		ControlFailAfter: 5 * time.Minute,
		ModelTolerance:   0.005, LiquidationMargin: 0.01,
		StressHorizon: time.Hour, StressSigmaFloor: 0.02, StressLikely: 3,
		ListingLag: 2 * time.Second, LiquidationConfirmReads: 2,
		FastMove: 0.02, FastMoveWindow: 5 * time.Minute, OrderCost: 0.0005, DustNotional: 20,
	}
	if !reflect.DeepEqual(cfg.Engine, want) || !reflect.DeepEqual(cfg.Engine, engine.DefaultConfig()) {
		t.Errorf("engine = %+v, want %+v", cfg.Engine, want)
	}
	x := cfg.Exchange
	if x.PositionsPath != "/v1/contracts/positions" || x.MaxRetries != 3 || x.RateLimit != 10 || x.RateBurst != 5 ||
		x.ClockSync != 10*time.Minute || x.Timeout != 10*time.Second || cfg.Engine.IndexNames != nil {
		t.Errorf("exchange = %+v", x)
	}
	if cfg.Path != path || cfg.Notify != nil {
		t.Errorf("path %q notify %v", cfg.Path, cfg.Notify)
	}
}

func TestLoadConfigValuesAndEnvOverrides(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `
exchange:
  base_url: http://127.0.0.1:8080
  index_names: {XBTC: BTC_USD}
  rate_limit: 2.5
engine:
  interval: 3s
  dry_run: false
  stale_after: 30s
  fast_interval: 1500ms
notify:
  channels:
    team: {type: slack, webhook_url_env: SLACK_WEBHOOK}
`+minimalRules)
	cfg, err := load(path, envMap(map[string]string{
		"RISKGUARD_ENGINE_INTERVAL":               "5s",
		"RISKGUARD_ENGINE_DRY_RUN":                "true",
		"RISKGUARD_ENGINE_MAX_ACTIONS_PER_MINUTE": "3",
		"RISKGUARD_EXCHANGE_RATE_BURST":           "7",
		"RISKGUARD_ENGINE_FAST_DISTANCE":          "0.08",
		"RISKGUARD_EXCHANGE_INDEX_NAMES":          "XBTC=BTC_X,XETH=ETH_X",
		"RISKGUARD_API_KEY":                       "k-123",
		"RISKGUARD_API_SECRET":                    "s3cret",
		"RISKGUARD_EXCHANGE_API_KEY":              "ignored: credentials have their own variables",
		"SLACK_WEBHOOK":                           "https://hooks.example.com/x",
	}))
	if err != nil {
		t.Fatal(err)
	}
	e, x := cfg.Engine, cfg.Exchange
	if e.Interval != 5*time.Second || !e.DryRun || e.MaxActionsPerMinute != 3 || e.StaleAfter != 30*time.Second ||
		e.FastInterval != 1500*time.Millisecond || e.FastDistance != 0.08 {
		t.Errorf("engine = %+v", e)
	}
	if x.RateLimit != 2.5 || x.RateBurst != 7 || e.IndexNames["XBTC"] != "BTC_X" || e.IndexNames["XETH"] != "ETH_X" {
		t.Errorf("exchange = %+v", x)
	}
	if x.APIKey != "k-123" || x.APISecret != "s3cret" {
		t.Errorf("credentials not taken from the environment")
	}
	if cfg.Notify == nil || cfg.Notify.Channels["team"].URL != "https://hooks.example.com/x" {
		t.Errorf("notify = %v", cfg.Notify)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q", cfg.Warnings)
	}
}

func TestLoadConfigSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(keyFile, []byte("file-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte("  file-secret-value \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("files", func(t *testing.T) {
		path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n  api_key_file: "+keyFile+
			"\n  api_secret_file: "+secretFile+"\n"+minimalRules)
		cfg, err := load(path, envMap(nil))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Exchange.APIKey != "file-key" || cfg.Exchange.APISecret != "file-secret-value" {
			t.Errorf("credentials from files not read and trimmed")
		}
		if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "readable by other users") {
			t.Errorf("warnings = %q, want one about the secret file's mode", cfg.Warnings)
		}
	})
	t.Run("yaml", func(t *testing.T) {
		path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n  api_key: yaml-key\n  api_secret: yaml-secret-value\n"+minimalRules)
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := load(path, envMap(nil))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Exchange.APIKey != "yaml-key" || cfg.Exchange.APISecret != "yaml-secret-value" {
			t.Error("credentials from the YAML not used")
		}
		all := strings.Join(cfg.Warnings, "\n")
		for _, want := range []string{"exchange.api_secret is set in the config file", "readable by other users"} {
			if !strings.Contains(all, want) {
				t.Errorf("warnings %q lack %q", all, want)
			}
		}
		if strings.Contains(all, "yaml-secret-value") || strings.Contains(all, "yaml-key") {
			t.Error("a warning shows a credential")
		}
	})
	t.Run("env wins", func(t *testing.T) {
		path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n  api_key_file: "+keyFile+"\n"+minimalRules)
		cfg, err := load(path, envMap(map[string]string{"RISKGUARD_API_KEY": "env-key"}))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Exchange.APIKey != "env-key" {
			t.Error("RISKGUARD_API_KEY does not win over api_key_file")
		}
	})
	t.Run("missing file", func(t *testing.T) {
		path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n  api_secret_file: /nonexistent/secret\n"+minimalRules)
		_, err := load(path, envMap(nil))
		if err == nil || !strings.Contains(err.Error(), ":3:20: exchange.api_secret_file: cannot read") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		body string
		env  map[string]string
		want []string
	}{
		{
			name: "unknown keys and wrong types, all at once",
			body: `exchange:
  base_url: https://api.example.com
  timeuot: 5s
engin:
  interval: 2s
rules:
  - name: a
    when: position.levrage > 1
`,
			want: []string{
				":3:3: unknown key \"exchange.timeuot\" (did you mean \"exchange.timeout\"?)",
				":4:1: unknown key \"engin\" (did you mean \"engine\"?)",
				`:8:20: rule "a": when: unknown field position.levrage`,
			},
		},
		{
			name: "bad values",
			body: `exchange:
  base_url: ftp://example.com
  max_retries: lots
engine:
  interval: 0s
  dry_run: yes
  breaker_reset: -1m
  listen: localhost
  max_actions_per_minute: 0
` + minimalRules,
			want: []string{
				`:2:13: exchange.base_url: "ftp://example.com" is not an http(s) URL`,
				":3:16: exchange.max_retries: expected an integer, got lots",
				":5:13: engine.interval: must be greater than 0",
				":6:12: engine.dry_run: expected true or false, got yes",
				":7:18: engine.breaker_reset: must not be negative, got -1m",
				`:8:11: engine.listen: expected host:port like 127.0.0.1:9464, got "localhost"`,
				":9:27: engine.max_actions_per_minute: must be at least 1, got 0",
			},
		},
		{
			name: "fast lane not faster, distance out of range",
			body: `exchange:
  base_url: https://api.example.com
engine:
  interval: 2s
  fast_interval: 2s
  fast_distance: 5
` + minimalRules,
			want: []string{
				":5:18: engine.fast_interval: must be shorter than engine.interval (2s), got 2s",
				":6:18: engine.fast_distance: must be a fraction within (0, 1), e.g. 0.05",
			},
		},
		{
			name: "fast lane over the request budget",
			body: `exchange:
  base_url: https://api.example.com
  rate_limit: 10
engine:
  fast_interval: 250ms
` + minimalRules,
			want: []string{
				":5:18: engine.fast_interval: 250ms needs about 12.0 requests per second (3 a tick), over exchange.rate_limit (10/s): lengthen it to at least 300ms or raise the rate limit",
			},
		},
		{
			name: "fast lane over the budget from the environment",
			body: "exchange:\n  base_url: https://api.example.com\n" + minimalRules,
			env:  map[string]string{"RISKGUARD_ENGINE_FAST_INTERVAL": "100ms", "RISKGUARD_EXCHANGE_RATE_LIMIT": "20"},
			want: []string{"engine.fast_interval (from RISKGUARD_ENGINE_FAST_INTERVAL): 100ms needs about 30.0 requests per second"},
		},
		{
			name: "base_url missing",
			body: "engine:\n  interval: 2s\n" + minimalRules,
			want: []string{"exchange.base_url is required"},
		},
		{
			name: "bad environment value",
			body: "exchange:\n  base_url: https://api.example.com\n" + minimalRules,
			env:  map[string]string{"RISKGUARD_ENGINE_INTERVAL": "fast", "RISKGUARD_ENGINE_DRY_RUN": "maybe"},
			want: []string{
				`engine.interval (from RISKGUARD_ENGINE_INTERVAL): bad duration "fast"`,
				"engine.dry_run (from RISKGUARD_ENGINE_DRY_RUN): expected true or false, got maybe",
			},
		},
		{
			name: "section not a mapping",
			body: "exchange: https://api.example.com\n" + minimalRules,
			want: []string{":1:11: exchange: expected a mapping"},
		},
		{
			name: "empty file",
			body: "",
			want: []string{":1:1: empty file"},
		},
		{
			name: "invalid YAML",
			body: "exchange:\n  base_url: [https://api.example.com\n",
			want: []string{"invalid YAML"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.body)
			_, err := load(path, envMap(tc.env))
			var list *rules.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("err = %v (%T), want *rules.ErrorList", err, err)
			}
			if len(list.Errors) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(list.Errors), len(tc.want), err)
			}
			for i, w := range tc.want {
				if i < len(list.Errors) && !strings.Contains(list.Errors[i].Error(), path+w) && !strings.Contains(list.Errors[i].Error(), w) {
					t.Errorf("error %d = %s\nwant %s", i, list.Errors[i], w)
				}
			}
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	t.Parallel()
	_, err := load(filepath.Join(t.TempDir(), "nope.yaml"), envMap(nil))
	if err == nil || !strings.Contains(err.Error(), "read config") {
		t.Errorf("err = %v", err)
	}
}

// A function over time whose window is longer than engine.max_window is
// refused at the rule, by every command (the one loader).
func TestMaxWindowRefused(t *testing.T) {
	t.Parallel()
	rule := "rules:\n  - name: r1\n    when: drawdown(account.equity, \"2d\") > 0.1\n"
	path := writeConfig(t, "exchange:\n  base_url: https://api.example.com\n"+rule)
	_, err := load(path, envMap(nil))
	if err == nil || !strings.Contains(err.Error(), path+`:5:11: rule "r1": when: drawdown(account.equity, "48h"): the window is longer than engine.max_window (24h)`) {
		t.Errorf("err = %v", err)
	}
	path = writeConfig(t, "exchange:\n  base_url: https://api.example.com\nengine:\n  max_window: 72h\n"+rule)
	if _, err := load(path, envMap(nil)); err != nil {
		t.Errorf("with max_window 72h: %v", err)
	}
}

// load loads path with the default options, as run does.
func load(path string, getenv func(string) string) (*Config, error) {
	return Load(path, getenv, Options{})
}
