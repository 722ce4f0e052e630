package main

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
)

// Every row of engine.Settings is a key of the file and of the
// environment (that it is one key of the loader's table is config's
// TestEverySettingIsOneKey): a value set either way reaches its field and
// only it, and a reload names it as a restart or a hot change as its row
// says.
func TestEverySettingIsReadAndReloaded(t *testing.T) {
	t.Parallel()
	const base = "exchange:\n  base_url: https://api.example.com\n"
	running, err := loadConfig(writeConfig(t, base+minimalRules), envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range engine.Settings() {
		// Another valid value, as YAML and as an environment variable.
		want := engine.DefaultConfig()
		var yamlValue, envValue string
		switch p := s.Addr(&want).(type) {
		case *time.Duration:
			*p += time.Second
			yamlValue, envValue = p.String(), p.String()
		case *bool:
			*p = !*p
			yamlValue, envValue = fmt.Sprint(*p), fmt.Sprint(*p)
		case *int:
			*p++
			yamlValue, envValue = fmt.Sprint(*p), fmt.Sprint(*p)
		case *float64:
			*p /= 2
			yamlValue, envValue = fmt.Sprint(*p), fmt.Sprint(*p)
		case *string:
			*p += ".x"
			yamlValue, envValue = *p, *p
		case *map[string]string:
			*p = map[string]string{"XBTC": "BTC_X"}
			yamlValue, envValue = "{XBTC: BTC_X}", "XBTC=BTC_X"
		case *[]string:
			*p = []string{"guard.example.org", "192.0.2.7"}
			yamlValue, envValue = "[guard.example.org, 192.0.2.7]", "guard.example.org, 192.0.2.7"
		default:
			t.Fatalf("%s: no test value for %T", s.Key, p)
		}
		section, name, _ := strings.Cut(s.Key, ".")
		body := base + "  " + name + ": " + yamlValue + "\n" + minimalRules
		if section != "exchange" {
			body = base + section + ":\n  " + name + ": " + yamlValue + "\n" + minimalRules
		}
		env := "RISKGUARD_" + strings.ToUpper(section) + "_" + strings.ToUpper(name)
		for how, load := range map[string]func() (*config.Config, error){
			"file": func() (*config.Config, error) { return loadConfig(writeConfig(t, body), envMap(nil)) },
			env: func() (*config.Config, error) {
				return loadConfig(writeConfig(t, base+minimalRules), envMap(map[string]string{env: envValue}))
			},
		} {
			next, err := load()
			if err != nil {
				t.Errorf("%s from the %s: %v", s.Key, how, err)
				continue
			}
			if !reflect.DeepEqual(next.Engine, want) {
				t.Errorf("%s from the %s: engine\n %+v, want\n %+v", s.Key, how, next.Engine, want)
			}
			restart, hot := restartOnly(running, next), hotChanges(running, next)
			if s.Restart && (!slices.Equal(restart, []string{s.Key}) || len(hot) != 0) ||
				!s.Restart && (len(restart) != 0 || !slices.Equal(hot, []string{s.Key})) {
				t.Errorf("%s from the %s: a reload names restart %q, hot %q", s.Key, how, restart, hot)
			}
		}
	}
}

// A reload names its changes in the order of engine.Config's fields, as
// it always has, not in the table's order.
func TestReloadNamesChangesInFieldOrder(t *testing.T) {
	t.Parallel()
	const base = "exchange:\n  base_url: https://api.example.com\n"
	load := func(body string) *config.Config {
		cfg, err := loadConfig(writeConfig(t, body), envMap(nil))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	running := load(base + minimalRules)
	next := load(base + "  index_names: {XBTC: BTC_X}\nengine:\n  interval: 3s\n  state_file: s.json\n  dry_run: true\n  listen: 127.0.0.1:9464\n" +
		"  unreachable_after: 2m\n  max_window: 1h\n  symbol_backoff_max: 2m\n  stale_after: 5s\n  max_actions_per_minute: 3\n" + minimalRules)
	if got, want := restartOnly(running, next), []string{"engine.interval", "engine.dry_run", "engine.state_file", "engine.listen"}; !slices.Equal(got, want) {
		t.Errorf("restartOnly = %q, want %q", got, want)
	}
	want := []string{"engine.max_actions_per_minute", "engine.stale_after", "exchange.index_names", "engine.max_window", "engine.symbol_backoff_max", "engine.unreachable_after"}
	if got := hotChanges(running, next); !slices.Equal(got, want) {
		t.Errorf("hotChanges = %q, want %q", got, want)
	}
}
