package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// setting returns the row of key.
func setting(t *testing.T, key string) Setting {
	t.Helper()
	for _, s := range Settings() {
		if s.Key == key {
			return s
		}
	}
	t.Fatalf("no setting %s", key)
	return Setting{}
}

// Every field of Config has exactly one row, whose Addr is that field's,
// and every key is a section's key named once.
func TestSettingsCoverConfig(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[Config]()
	rows := map[string]int{}
	keys := map[string]bool{}
	var c Config
	for _, s := range Settings() {
		rows[s.Field]++
		if keys[s.Key] {
			t.Errorf("key %s has two rows", s.Key)
		}
		keys[s.Key] = true
		section, name, ok := strings.Cut(s.Key, ".")
		if !ok || (section != "engine" && section != "exchange") || name == "" || strings.ContainsAny(name, ". ") {
			t.Errorf("key %q is not engine.name or exchange.name", s.Key)
		}
		f := reflect.ValueOf(&c).Elem().FieldByName(s.Field)
		if !f.IsValid() {
			t.Errorf("%s: Config has no field %s", s.Key, s.Field)
			continue
		}
		if got, want := reflect.ValueOf(s.Addr(&c)), f.Addr(); got.Type() != want.Type() || got.Pointer() != want.Pointer() {
			t.Errorf("%s: Addr is %s at %#x, want the field %s (%s) at %#x", s.Key, got.Type(), got.Pointer(), s.Field, want.Type(), want.Pointer())
		}
	}
	for i := range typ.NumField() {
		if name := typ.Field(i).Name; rows[name] != 1 {
			t.Errorf("Config.%s has %d rows in Settings, want 1", name, rows[name])
		}
	}
}

// The defaults the table makes are the ones the engine always had.
func TestDefaultConfig(t *testing.T) {
	t.Parallel()
	want := Config{
		Interval:                2 * time.Second,
		MaxActionsPerMinute:     10,
		BreakerReset:            5 * time.Minute,
		SymbolsRefresh:          10 * time.Minute,
		ActionTimeout:           30 * time.Second,
		ActionConcurrency:       4,
		SymbolBackoffMax:        time.Minute,
		MaxWindow:               24 * time.Hour,
		UnreachableAfter:        time.Minute,
		FastDistance:            0.05,
		ControlFailAfter:        5 * time.Minute,
		ModelTolerance:          0.005,
		LiquidationMargin:       0.01,
		ListingLag:              2 * time.Second,
		LiquidationConfirmReads: 2,
		StressHorizon:           time.Hour,
		StressSigmaFloor:        0.02,
		StressLikely:            3,
		FastMove:                0.02,
		FastMoveWindow:          5 * time.Minute,
		OrderCost:               0.0005,
		DustNotional:            20,
		AuditLog:                "riskguard-audit.jsonl",
		StateFile:               "riskguard-state.json",
	}
	if got := DefaultConfig(); !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultConfig() = %+v\nwant %+v", got, want)
	}
	for _, s := range Settings() {
		if p, _ := s.Check(want); p != "" {
			t.Errorf("%s: the default is refused: %s", s.Key, p)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	filled := DefaultConfig()
	filled.AuditLog, filled.StateFile = "", ""
	filled.MaxSnapshotAge = 2 * filled.Interval
	set := Config{
		Interval: 3 * time.Second, DryRun: true, MaxActionsPerMinute: 1, BreakerReset: 1, SymbolsRefresh: 2, StaleAfter: 3,
		IndexNames: map[string]string{"XBTC": "BTC"}, AuditLog: "a", StateFile: "s", ActionTimeout: 4, ActionConcurrency: 5,
		MaxSnapshotAge: 6, MaxWindow: 7, SymbolBackoffMax: 8, UnreachableAfter: 9, FastInterval: 10, FastDistance: 0.3,
		AllowedHosts: []string{"guard.example.org"}, ControlFailAfter: 11, ModelTolerance: 0.01, LiquidationMargin: 0.02,
		StressHorizon: 12, StressSigmaFloor: 0.03, StressLikely: 2, ListingLag: 13, LiquidationConfirmReads: 14,
		FastMove: 0.04, FastMoveWindow: 15, OrderCost: 0.001, DustNotional: 5,
	}
	with := func(c Config, f func(*Config)) Config { f(&c); return c }
	for _, tc := range []struct {
		name    string
		in, out Config
	}{
		// Paths stay empty: no audit log, no state file.
		{"zero", Config{}, filled},
		{"set", set, set},
		{"negative", Config{
			Interval: -1, MaxActionsPerMinute: -1, BreakerReset: -1, SymbolsRefresh: -1, StaleAfter: -1, ActionTimeout: -1,
			ActionConcurrency: -1, MaxSnapshotAge: -1, MaxWindow: -1, SymbolBackoffMax: -1, UnreachableAfter: -1, FastInterval: -1, FastDistance: -1,
			ControlFailAfter: -1, ModelTolerance: -1, LiquidationMargin: -1, StressHorizon: -1, StressSigmaFloor: -1, StressLikely: -1,
			ListingLag: -1, LiquidationConfirmReads: -1, FastMove: -1, FastMoveWindow: -1, OrderCost: -1, DustNotional: -1,
		}, with(filled, func(c *Config) { c.StaleAfter = -1 })},
		// MaxSnapshotAge: two intervals, at least minSnapshotAge.
		{"short interval", Config{Interval: 100 * time.Millisecond}, with(filled, func(c *Config) { c.Interval, c.MaxSnapshotAge = 100*time.Millisecond, minSnapshotAge })},
		{"long interval", Config{Interval: 10 * time.Second}, with(filled, func(c *Config) { c.Interval, c.MaxSnapshotAge = 10*time.Second, 20*time.Second })},
		{"defaults", DefaultConfig(), with(filled, func(c *Config) { c.AuditLog, c.StateFile = "riskguard-audit.jsonl", "riskguard-state.json" })},
	} {
		if got := tc.in.withDefaults(); !reflect.DeepEqual(got, tc.out) {
			t.Errorf("%s: withDefaults(%+v)\n = %+v\nwant %+v", tc.name, tc.in, got, tc.out)
		}
	}
}

// The checks' words are the loader's: they follow the key in its errors.
func TestSettingChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key  string
		set  func(*Config)
		want string
		keep bool
	}{
		{"engine.interval", func(c *Config) { c.Interval = 0 }, "must be greater than 0", true},
		{"engine.interval", func(c *Config) { c.Interval = time.Millisecond }, "", false},
		{"engine.breaker_reset", func(c *Config) { c.BreakerReset = 0 }, "must be greater than 0", true},
		{"engine.symbols_refresh", func(c *Config) { c.SymbolsRefresh = 0 }, "must be greater than 0", true},
		{"engine.unreachable_after", func(c *Config) { c.UnreachableAfter = 0 }, "must be greater than 0", true},
		{"engine.action_timeout", func(c *Config) { c.ActionTimeout = 0 }, "must be greater than 0", true},
		{"engine.symbol_backoff_max", func(c *Config) { c.SymbolBackoffMax = 0 }, "must be greater than 0", true},
		{"engine.max_actions_per_minute", func(c *Config) { c.MaxActionsPerMinute = 0 }, "must be at least 1, got 0", false},
		{"engine.max_actions_per_minute", func(c *Config) { c.MaxActionsPerMinute = 1 }, "", false},
		{"engine.action_concurrency", func(c *Config) { c.ActionConcurrency = -2 }, "must be at least 1, got -2", false},
		{"engine.max_window", func(c *Config) { c.MaxWindow = 0 }, "must be greater than 0", true},
		{"engine.max_window", func(c *Config) { c.MaxWindow = 7 * 24 * time.Hour }, "", false},
		{"engine.max_window", func(c *Config) { c.MaxWindow = 1000 * time.Hour }, "must be at most 168h0m0s, got 1000h0m0s", false},
		{"engine.fast_interval", func(c *Config) { c.FastInterval = 0 }, "", false},
		{"engine.fast_interval", func(c *Config) { c.FastInterval = time.Second }, "", false},
		{"engine.fast_interval", func(c *Config) { c.FastInterval = 2 * time.Second }, "must be shorter than engine.interval (2s), got 2s; 0 turns the fast lane off", false},
		{"engine.fast_interval", func(c *Config) { c.Interval, c.FastInterval = 5*time.Second, 2*time.Second }, "", false},
		{"engine.fast_distance", func(c *Config) { c.FastDistance = 0.5 }, "", false},
		{"engine.fast_distance", func(c *Config) { c.FastDistance = 0 }, "must be a fraction within (0, 1), e.g. 0.05 for 5% from liquidation, got 0", false},
		{"engine.fast_distance", func(c *Config) { c.FastDistance = 1 }, "must be a fraction within (0, 1), e.g. 0.05 for 5% from liquidation, got 1", false},
		{"engine.stale_after", func(c *Config) { c.StaleAfter = 0 }, "", false},
		{"engine.max_snapshot_age", func(c *Config) { c.MaxSnapshotAge = 0 }, "", false},
		{"engine.dry_run", func(c *Config) { c.DryRun = true }, "", false},
		{"engine.audit_log", func(c *Config) { c.AuditLog = "" }, "", false},
		{"engine.state_file", func(c *Config) { c.StateFile = "" }, "", false},
		{"exchange.index_names", func(c *Config) { c.IndexNames = map[string]string{} }, "", false},
		{"engine.control_fail_after", func(c *Config) { c.ControlFailAfter = 0 }, "must be greater than 0", true},
		{"engine.allowed_hosts", func(c *Config) { c.AllowedHosts = []string{"guard.example.org", "192.0.2.7", "::1", "localhost."} }, "", false},
		{"engine.allowed_hosts", func(c *Config) { c.AllowedHosts = []string{"guard.example.org:9464"} },
			`expected host names or addresses without a scheme, path or port, like [guard.example.org, 192.0.2.7, "::1"], got "guard.example.org:9464"`, false},
		{"engine.allowed_hosts", func(c *Config) { c.AllowedHosts = []string{"https://guard.example.org"} },
			`expected host names or addresses without a scheme, path or port, like [guard.example.org, 192.0.2.7, "::1"], got "https://guard.example.org"`, false},
		{"engine.allowed_hosts", func(c *Config) { c.AllowedHosts = []string{""} },
			`expected host names or addresses without a scheme, path or port, like [guard.example.org, 192.0.2.7, "::1"], got ""`, false},
	} {
		c := DefaultConfig()
		tc.set(&c)
		got, keep := setting(t, tc.key).Check(c)
		if got != tc.want || keep != tc.keep {
			t.Errorf("%s: Check(%+v) = %q, %t; want %q, %t", tc.key, c, got, keep, tc.want, tc.keep)
		}
	}
}

// A reload keeps what only a restart applies: Interval, DryRun, AuditLog,
// StateFile, AllowedHosts (the listener's) and ControlFailAfter (the
// Telegram control's).
func TestKeepRestartOnly(t *testing.T) {
	t.Parallel()
	var restart []string
	for _, s := range Settings() {
		if s.Restart {
			restart = append(restart, s.Key)
		}
	}
	if want := []string{"engine.interval", "engine.dry_run", "engine.audit_log", "engine.state_file", "engine.allowed_hosts", "engine.control_fail_after"}; !reflect.DeepEqual(restart, want) {
		t.Errorf("restart-only settings %q, want %q", restart, want)
	}
	running := DefaultConfig().withDefaults()
	next := Config{
		Interval: 9 * time.Second, DryRun: true, AuditLog: "new.jsonl", StateFile: "new.json", MaxActionsPerMinute: 3,
		BreakerReset: time.Hour, StaleAfter: time.Second, IndexNames: map[string]string{"XBTC": "BTC"}, FastInterval: time.Second, FastDistance: 0.2,
		AllowedHosts: []string{"guard.example.org"}, ControlFailAfter: time.Minute,
	}
	want := next
	want.Interval, want.DryRun, want.AuditLog, want.StateFile = running.Interval, running.DryRun, running.AuditLog, running.StateFile
	want.AllowedHosts, want.ControlFailAfter = running.AllowedHosts, running.ControlFailAfter
	if got := next.KeepRestartOnly(running); !reflect.DeepEqual(got, want) {
		t.Errorf("KeepRestartOnly = %+v\nwant %+v", got, want)
	}
}

func TestSettingEqual(t *testing.T) {
	t.Parallel()
	names := setting(t, "exchange.index_names")
	for _, tc := range []struct {
		a, b map[string]string
		want bool
	}{
		{nil, nil, true},
		{nil, map[string]string{}, false}, // no key, and index_names: {}
		{map[string]string{"A": "B"}, map[string]string{"A": "B"}, true},
		{map[string]string{"A": "B"}, map[string]string{"A": "C"}, false},
	} {
		if got := names.Equal(Config{IndexNames: tc.a}, Config{IndexNames: tc.b}); got != tc.want {
			t.Errorf("Equal(%v, %v) = %t", tc.a, tc.b, got)
		}
	}
	d := DefaultConfig()
	for _, s := range Settings() {
		if !s.Equal(d, d) {
			t.Errorf("%s: a value differs from itself", s.Key)
		}
	}
	iv := setting(t, "engine.interval")
	if iv.Equal(d, Config{Interval: time.Second}) {
		t.Error("engine.interval: 2s equals 1s")
	}
}
