package config

import (
	"errors"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine"
)

// keyKind is the type of a configuration value.
type keyKind int

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

// key returns the known key section.name.
func key(section, name string) configKey {
	for _, k := range configKeys() {
		if k.section == section && k.name == name {
			return k
		}
	}
	panic("config: unknown key " + section + "." + name) // a typo in this file
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

const (
	kindString keyKind = iota
	kindDuration
	kindBool
	kindInt
	kindFloat
	kindStringMap
	kindStringList
)
