package config

import (
	"errors"
	"os"
	"strings"

	"github.com/riskguard/riskguard/internal/yamlnode"

	"gopkg.in/yaml.v3"

	"github.com/riskguard/riskguard/notify"
)

// notify validates the notify section with notify.CheckConfig, placing
// each of its errors at the key it names. A secret whose environment
// variable is unset is an error, or a warning with Options.SecretsOptional.
func (l *loader) notify(raw any, opts Options) *notify.Config {
	if raw == nil {
		return nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil // structure reported it
	}
	ncfg, missing, errs := notify.CheckConfig(m, l.getenv)
	for _, err := range errs {
		var ce *notify.ConfigError
		if errors.As(err, &ce) {
			l.errorf(l.nodeAt(ce.Path), "%s: %s", ce.Path, ce.Msg)
			continue
		}
		l.errorf(l.nodeAt("notify"), "notify: %v", err)
	}
	for _, ce := range missing {
		if opts.SecretsOptional {
			l.warnf("%s: %s (needed by run, demo and notify test)", ce.Path, ce.Msg)
			continue
		}
		l.errorf(l.nodeAt(ce.Path), "%s: %s", ce.Path, ce.Msg)
	}
	if ncfg == nil {
		return nil
	}
	l.warnings = append(l.warnings, ncfg.Warnings...)
	if len(ncfg.Warnings) > 0 {
		if fi, err := os.Stat(l.path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			l.warnf("%s holds notification secrets but is readable by other users (mode %04o): chmod 600 it", l.path, fi.Mode().Perm())
		}
	}
	return ncfg
}

// nodeAt returns the node a dotted key path names (notify.channels.ops.
// token_env), or the deepest mapping on the way when a key is missing, so
// that "required" errors point at the mapping that lacks the key.
func (l *loader) nodeAt(path string) *yaml.Node {
	n := l.root
	for part := range strings.SplitSeq(path, ".") {
		next := yamlnode.Value(n, part)
		if next == nil {
			return n
		}
		n = next
	}
	return n
}
