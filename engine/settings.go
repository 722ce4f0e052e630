package engine

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
)

// Setting is one engine setting: one row of Settings, for one field of
// Config. Its default makes DefaultConfig and withDefaults, the
// configuration loader reads and checks its key, and a reload applies it
// unless it is Restart.
type Setting struct {
	// Key is the setting's key in the configuration file, e.g.
	// "engine.interval" (exchange.index_names lives in the exchange
	// section). Its environment override is RISKGUARD_ and the key in
	// upper case, the dot an underscore: RISKGUARD_ENGINE_INTERVAL.
	Key string
	// Field is the name of the setting's field in Config.
	Field string
	// Restart marks a setting only a restart applies: a reload changing
	// it is refused by name, and Reconfigure keeps the running value
	// (KeepRestartOnly). A reload applies every other setting.
	Restart bool

	addr     func(c *Config) any
	setDef   func(c *Config)
	fill     func(c *Config) // withDefaults; nil keeps a zero value
	check    func(c Config) (problem string, keepDefault bool)
	equal    func(a, b *Config) bool
	copyFrom func(dst, src *Config)
}

// Settings is the table of the engine's settings, one row per field of
// Config, in the order of their keys in the configuration file. Adding a
// setting is adding its field to Config and its row here. The table is
// built anew by every call: nobody can change it.
func Settings() []Setting {
	return []Setting{
		positive("engine.interval", "Interval", func(c *Config) *time.Duration { return &c.Interval }, 2*time.Second).restart(),
		value("engine.dry_run", "DryRun", func(c *Config) *bool { return &c.DryRun }, false).restart(),
		// An empty path means no audit log, no state file: withDefaults
		// leaves it (tests and backtests rely on that).
		value("engine.audit_log", "AuditLog", func(c *Config) *string { return &c.AuditLog }, "riskguard-audit.jsonl").restart(),
		value("engine.state_file", "StateFile", func(c *Config) *string { return &c.StateFile }, "riskguard-state.json").restart(),
		atLeastOne("engine.max_actions_per_minute", "MaxActionsPerMinute", func(c *Config) *int { return &c.MaxActionsPerMinute }, 10),
		positive("engine.breaker_reset", "BreakerReset", func(c *Config) *time.Duration { return &c.BreakerReset }, 5*time.Minute),
		positive("engine.symbols_refresh", "SymbolsRefresh", func(c *Config) *time.Duration { return &c.SymbolsRefresh }, 10*time.Minute),
		value("engine.stale_after", "StaleAfter", func(c *Config) *time.Duration { return &c.StaleAfter }, 0), // 0: off
		positive("engine.unreachable_after", "UnreachableAfter", func(c *Config) *time.Duration { return &c.UnreachableAfter }, time.Minute),
		positive("engine.action_timeout", "ActionTimeout", func(c *Config) *time.Duration { return &c.ActionTimeout }, 30*time.Second),
		atLeastOne("engine.action_concurrency", "ActionConcurrency", func(c *Config) *int { return &c.ActionConcurrency }, 4),
		// 0: two intervals, at least minSnapshotAge (after Interval's row,
		// so that withDefaults has filled it).
		value("engine.max_snapshot_age", "MaxSnapshotAge", func(c *Config) *time.Duration { return &c.MaxSnapshotAge }, 0).
			filled(func(c *Config) {
				if c.MaxSnapshotAge <= 0 {
					c.MaxSnapshotAge = max(2*c.Interval, minSnapshotAge)
				}
			}),
		positive("engine.symbol_backoff_max", "SymbolBackoffMax", func(c *Config) *time.Duration { return &c.SymbolBackoffMax }, time.Minute),
		positive("engine.max_window", "MaxWindow", func(c *Config) *time.Duration { return &c.MaxWindow }, 24*time.Hour).
			checked(func(c Config) string {
				if c.MaxWindow > rules.MaxWindowSpan {
					return fmt.Sprintf("must be at most %s, got %s", rules.MaxWindowSpan, c.MaxWindow)
				}
				return ""
			}),
		// 0: the fast lane is off.
		number("engine.fast_interval", "FastInterval", func(c *Config) *time.Duration { return &c.FastInterval }, 0).
			checked(func(c Config) string {
				if c.FastInterval > 0 && c.FastInterval >= c.Interval {
					return fmt.Sprintf("must be shorter than engine.interval (%s), got %s; 0 turns the fast lane off", c.Interval, c.FastInterval)
				}
				return ""
			}),
		number("engine.fast_distance", "FastDistance", func(c *Config) *float64 { return &c.FastDistance }, 0.05).
			checked(func(c Config) string {
				if !(c.FastDistance > 0 && c.FastDistance < 1) {
					return fmt.Sprintf("must be a fraction within (0, 1), e.g. 0.05 for 5%% from liquidation, got %v", c.FastDistance)
				}
				return ""
			}),
		// Host names the listener answers to besides loopback; nil: none.
		stringList("engine.allowed_hosts", "AllowedHosts", func(c *Config) *[]string { return &c.AllowedHosts }).restart().
			checked(func(c Config) string {
				for _, h := range c.AllowedHosts {
					_, _, err := net.SplitHostPort(h)
					if h == "" || err == nil || strings.ContainsAny(h, "/ *@?#[]") {
						return fmt.Sprintf("expected host names or addresses without a scheme, path or port, like [guard.example.org, 192.0.2.7, \"::1\"], got %q", h)
					}
				}
				return ""
			}),
		positive("engine.control_fail_after", "ControlFailAfter", func(c *Config) *time.Duration { return &c.ControlFailAfter }, 5*time.Minute).restart(),
		number("engine.model_tolerance", "ModelTolerance", func(c *Config) *float64 { return &c.ModelTolerance }, margin.DefaultFitTolerance).
			checked(func(c Config) string {
				if !(c.ModelTolerance > 0 && c.ModelTolerance < 1) {
					return fmt.Sprintf("must be a fraction within (0, 1), e.g. 0.005 for 0.5%%, got %v", c.ModelTolerance)
				}
				return ""
			}),
		number("engine.liquidation_margin", "LiquidationMargin", func(c *Config) *float64 { return &c.LiquidationMargin }, 0.01).
			checked(func(c Config) string {
				if !(c.LiquidationMargin > 0 && c.LiquidationMargin < 0.5) {
					return fmt.Sprintf("must be a fraction within (0, 0.5), e.g. 0.01 for within 1%% of the liquidation price, got %v", c.LiquidationMargin)
				}
				return ""
			}),
		positive("engine.listing_lag", "ListingLag", func(c *Config) *time.Duration { return &c.ListingLag }, 2*time.Second),
		atLeastOne("engine.liquidation_confirm_reads", "LiquidationConfirmReads", func(c *Config) *int { return &c.LiquidationConfirmReads }, 2),
		positive("engine.stress_horizon", "StressHorizon", func(c *Config) *time.Duration { return &c.StressHorizon }, time.Hour),
		number("engine.stress_sigma_floor", "StressSigmaFloor", func(c *Config) *float64 { return &c.StressSigmaFloor }, 0.02).
			checked(func(c Config) string {
				if !(c.StressSigmaFloor > 0 && c.StressSigmaFloor < 0.5) {
					return fmt.Sprintf("must be a fraction within (0, 0.5), e.g. 0.02 for σ of at least 2%% over engine.stress_horizon, got %v", c.StressSigmaFloor)
				}
				return ""
			}),
		number("engine.stress_likely", "StressLikely", func(c *Config) *float64 { return &c.StressLikely }, 3).
			checked(func(c Config) string {
				if !(c.StressLikely >= 1 && c.StressLikely <= 5) {
					return fmt.Sprintf("must be within 1..5 (σ), e.g. 3 for moves within ±3σ, got %v", c.StressLikely)
				}
				return ""
			}),
		// 2% within 5 minutes: about a 1σ hour of a quiet market in a
		// twelfth of the time; the battery's wicks (4%…12% in minutes) are
		// fast moves, an ordinary hour's drift is not.
		number("engine.fast_move", "FastMove", func(c *Config) *float64 { return &c.FastMove }, 0.02).
			checked(func(c Config) string {
				if !(c.FastMove > 0 && c.FastMove < 1) {
					return fmt.Sprintf("must be a fraction within (0, 1), e.g. 0.02 for a 2%% span within engine.fast_move_window, got %v", c.FastMove)
				}
				return ""
			}),
		positive("engine.fast_move_window", "FastMoveWindow", func(c *Config) *time.Duration { return &c.FastMoveWindow }, 5*time.Minute).
			checked(func(c Config) string {
				if c.FastMoveWindow > time.Hour {
					return fmt.Sprintf("must be at most 1h, got %s", c.FastMoveWindow)
				}
				return ""
			}),
		// 0.05%: a perpetual's taker fee (0.04–0.06% on the large venues)
		// and half a major's spread.
		number("engine.order_cost", "OrderCost", func(c *Config) *float64 { return &c.OrderCost }, 0.0005).
			checked(func(c Config) string {
				if !(c.OrderCost > 0 && c.OrderCost < 0.05) {
					return fmt.Sprintf("must be a fraction within (0, 0.05), e.g. 0.0005 for 0.05%% of an order's notional, got %v", c.OrderCost)
				}
				return ""
			}),
		number("engine.dust_notional", "DustNotional", func(c *Config) *float64 { return &c.DustNotional }, 20).
			checked(func(c Config) string {
				if !(c.DustNotional > 0) {
					return fmt.Sprintf("must be a notional above 0 in the quote currency, e.g. 20, got %v", c.DustNotional)
				}
				return ""
			}),
		value("engine.orders_as_asked", "OrdersAsAsked", func(c *Config) *bool { return &c.OrdersAsAsked }, false),
		// Symbol name → index name; nil: the symbol's baseName.
		stringMap("exchange.index_names", "IndexNames", func(c *Config) *map[string]string { return &c.IndexNames }),
	}
}

// Addr returns the address of the setting's field in c: a *time.Duration,
// *bool, *int, *float64, *string, *[]string or *map[string]string, which says how
// its key is read.
func (s Setting) Addr(c *Config) any { return s.addr(c) }

// Check returns what is wrong with the setting's value in c, worded to
// follow its key ("must be at least 1, got 0"), or "" when nothing is. A
// check may read other settings of c (engine.fast_interval is checked
// against engine.interval). keepDefault reports a value refused outright:
// the loader keeps the default instead, so that the checks after it see a
// usable value.
func (s Setting) Check(c Config) (problem string, keepDefault bool) {
	if s.check == nil {
		return "", false
	}
	return s.check(c)
}

// Equal reports whether the setting has the same value in a and b. Maps
// are equal when both are nil or both hold the same pairs.
func (s Setting) Equal(a, b Config) bool { return s.equal(&a, &b) }

// DefaultConfig is the one owner of the engine's defaults, made of the
// Settings' rows: the configuration loader starts from it, and New fills
// every unset field from it.
func DefaultConfig() Config {
	var c Config
	for _, s := range Settings() {
		s.setDef(&c)
	}
	return c
}

// withDefaults returns c with every unset duration and budget taken from
// DefaultConfig, as the Settings' rows say. Paths are not filled: an empty
// AuditLog or StateFile means none, which tests and backtests rely on.
func (c Config) withDefaults() Config {
	for _, s := range Settings() {
		if s.fill != nil {
			s.fill(&c)
		}
	}
	return c
}

// KeepRestartOnly returns c with the settings only a restart applies
// (Interval, DryRun, AuditLog, StateFile: the Restart rows) taken from
// running: what a reload applies of a new configuration.
func (c Config) KeepRestartOnly(running Config) Config {
	for _, s := range Settings() {
		if s.Restart {
			s.copyFrom(&c, &running)
		}
	}
	return c
}

// field builds the row of the field addr returns, whose default is def
// and whose values are compared by eq.
func field[T any](key, name string, addr func(*Config) *T, def T, eq func(a, b T) bool) Setting {
	return Setting{
		Key:      key,
		Field:    name,
		addr:     func(c *Config) any { return addr(c) },
		setDef:   func(c *Config) { *addr(c) = def },
		equal:    func(a, b *Config) bool { return eq(*addr(a), *addr(b)) },
		copyFrom: func(dst, src *Config) { *addr(dst) = *addr(src) },
	}
}

// value is a setting whose every value is valid and kept as it is by
// withDefaults, zero included.
func value[T comparable](key, name string, addr func(*Config) *T, def T) Setting {
	return field(key, name, addr, def, func(a, b T) bool { return a == b })
}

// number is a setting that withDefaults sets to def when it is not above 0.
func number[T int | float64 | time.Duration](key, name string, addr func(*Config) *T, def T) Setting {
	s := value(key, name, addr, def)
	s.fill = func(c *Config) {
		if *addr(c) <= 0 {
			*addr(c) = def
		}
	}
	return s
}

// positive is a duration that must be above 0: the loader refuses 0,
// keeping the default.
func positive(key, name string, addr func(*Config) *time.Duration, def time.Duration) Setting {
	s := number(key, name, addr, def)
	s.check = func(c Config) (string, bool) {
		if *addr(&c) <= 0 {
			return "must be greater than 0", true
		}
		return "", false
	}
	return s
}

// atLeastOne is a count that must be at least 1.
func atLeastOne(key, name string, addr func(*Config) *int, def int) Setting {
	s := number(key, name, addr, def)
	s.check = func(c Config) (string, bool) {
		if n := *addr(&c); n < 1 {
			return fmt.Sprintf("must be at least 1, got %d", n), false
		}
		return "", false
	}
	return s
}

// stringMap is a mapping of names, nil by default. A nil map and an empty
// one differ, as a file without the key and one with {} do.
func stringMap(key, name string, addr func(*Config) *map[string]string) Setting {
	return field(key, name, addr, nil, func(a, b map[string]string) bool {
		return (a == nil) == (b == nil) && maps.Equal(a, b)
	})
}

// stringList is a list of strings, nil by default; nil and empty are
// equal (neither names anything).
func stringList(key, name string, addr func(c *Config) *[]string) Setting {
	return field(key, name, addr, nil, func(a, b []string) bool { return slices.Equal(a, b) })
}

// restart marks s as applied by a restart only.
func (s Setting) restart() Setting {
	s.Restart = true
	return s
}

// filled replaces how withDefaults fills s.
func (s Setting) filled(fill func(c *Config)) Setting {
	s.fill = fill
	return s
}

// checked adds a check, made when the checks before it pass; its problem
// leaves the value as it is.
func (s Setting) checked(check func(c Config) string) Setting {
	prev := s.check
	s.check = func(c Config) (string, bool) {
		if prev != nil {
			if p, keep := prev(c); p != "" {
				return p, keep
			}
		}
		return check(c), false
	}
	return s
}
