package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/internal/yamlnode"

	"github.com/knadh/koanf/v2"
	"gopkg.in/yaml.v3"

	"github.com/riskguard/riskguard/rules"
)

// loader carries the state of one Load (of one account, with accounts:).
type loader struct {
	path   string
	getenv func(string) string
	root   *yaml.Node
	// rulesRoot holds the rules key and rulesPath is its file: the
	// configuration's, or an account's rules_file.
	rulesRoot *yaml.Node
	rulesPath string
	// acct is the account being loaded; nil for a file without accounts.
	acct *accountDoc
	k    *koanf.Koanf
	// nodes holds the value node of each "section.key" present in the
	// file, keys its key node.
	nodes    map[string]*yaml.Node
	keys     map[string]*yaml.Node
	errs     []*rules.Error
	warnings []string
}

func (l *loader) result() error {
	if len(l.errs) == 0 {
		return nil
	}
	list := &rules.ErrorList{Errors: l.errs}
	list.Sort()
	return list
}

// errorf records an error at n (the file's start when nil).
func (l *loader) errorf(n *yaml.Node, format string, args ...any) {
	e := &rules.Error{File: l.path, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	l.errs = append(l.errs, e)
}

// structure checks the sections and their keys, and records where each
// value is. It returns the sections present as mappings: a section that is
// not one is reported and not read further, while every other section is
// still checked, so one mistake never hides another.
func (l *loader) structure(root *yaml.Node) map[string]bool {
	known := map[string]bool{}
	for _, k := range configKeys() {
		known[k.path()] = true
	}
	sections := map[string]bool{}
	seenTop := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := root.Content[i], root.Content[i+1]
		if seenTop[kn.Value] {
			l.errorf(kn, "duplicate key %q", kn.Value)
			continue
		}
		seenTop[kn.Value] = true
		switch kn.Value {
		case "rules", "accounts", "ha":
			continue // rules.ParseDocument checked it, loadAccounts the accounts, haSection ha
		case "exchange", "engine", "notify":
		default:
			l.unknownKey(kn, "", topKeys())
			continue
		}
		if vn.Kind == yaml.ScalarNode && vn.Tag == "!!null" {
			sections[kn.Value] = true
			continue
		}
		if vn.Kind != yaml.MappingNode {
			l.errorf(vn, "%s: expected a mapping", kn.Value)
			continue
		}
		sections[kn.Value] = true
		if kn.Value == "notify" {
			continue // checked by notify.CheckConfig, positioned by nodeAt
		}
		var names []string
		for _, k := range configKeys() {
			if k.section == kn.Value {
				names = append(names, k.name)
			}
		}
		seen := map[string]bool{}
		for j := 0; j+1 < len(vn.Content); j += 2 {
			skn, svn := vn.Content[j], vn.Content[j+1]
			p := kn.Value + "." + skn.Value
			switch {
			case seen[skn.Value]:
				l.errorf(skn, "duplicate key %q", p)
			case !known[p]:
				l.unknownKey(skn, kn.Value+".", names)
			default:
				l.nodes[p], l.keys[p] = svn, skn
			}
			seen[skn.Value] = true
		}
	}
	return sections
}

func (l *loader) unknownKey(k *yaml.Node, prefix string, known []string) {
	l.errorf(k, "%s", yamlnode.UnknownKey(k.Value, prefix, known))
}

// source returns the raw value of key and where it came from: the
// environment variable's name, or "" for the file. ok is false when the
// key is not set (or set to null).
func (l *loader) source(k configKey) (v any, env string, ok bool) {
	v = l.k.Get(k.path())
	return v, l.envOf(k), v != nil
}

// bad records a value error, at the value's position in the file or
// naming the environment variable that set it.
func (l *loader) bad(k configKey, env, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if env != "" {
		l.errs = append(l.errs, &rules.Error{File: l.path, Msg: fmt.Sprintf("%s (from %s): %s", k.path(), env, msg)})
		return
	}
	l.errorf(l.nodes[k.path()], "%s: %s", k.path(), msg)
}

func (l *loader) str(k configKey, def string) string {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		// The kind only: the value may be a mistyped secret.
		l.bad(k, env, "expected a string, got %s", kindOf(v))
		return def
	}
	return s
}

// kindOf names the YAML kind of a decoded value, for errors that must not
// echo the value itself.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func (l *loader) duration(k configKey, def time.Duration) time.Duration {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		l.bad(k, env, "expected a duration like 2s or 5m, got %v", v)
		return def
	}
	d, err := yamlnode.ParseDuration(s)
	if err != nil {
		l.bad(k, env, "%v", err)
		return def
	}
	return d
}

func (l *loader) boolean(k configKey, def bool) bool {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case bool:
		return x
	case string:
		if env != "" {
			if b, err := strconv.ParseBool(x); err == nil {
				return b
			}
		}
	}
	l.bad(k, env, "expected true or false, got %v", v)
	return def
}

func (l *loader) integer(k configKey, def int) int {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case string:
		if env != "" {
			if n, err := strconv.Atoi(x); err == nil {
				return n
			}
		}
	}
	l.bad(k, env, "expected an integer, got %v", v)
	return def
}

func (l *loader) float(k configKey, def float64) float64 {
	v, env, ok := l.source(k)
	if !ok {
		return def
	}
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	case string:
		if env != "" {
			if f, err := strconv.ParseFloat(x, 64); err == nil {
				return f
			}
		}
	}
	l.bad(k, env, "expected a number, got %v", v)
	return def
}

// stringMap reads a mapping of strings; from the environment it is
// "A=B,C=D".
func (l *loader) stringMap(k configKey) map[string]string {
	v, env, ok := l.source(k)
	if !ok {
		return nil
	}
	out := map[string]string{}
	switch x := v.(type) {
	case string:
		if env == "" {
			break
		}
		for pair := range strings.SplitSeq(x, ",") {
			name, val, found := strings.Cut(strings.TrimSpace(pair), "=")
			if !found || name == "" || val == "" {
				l.bad(k, env, "expected SYMBOL=INDEX pairs separated by commas, got %q", x)
				return nil
			}
			out[name] = val
		}
		return out
	case map[string]any:
		for name, val := range x {
			s, isStr := val.(string)
			if !isStr || s == "" {
				l.bad(k, env, "%s: expected an index name, got %v", name, val)
				continue
			}
			out[name] = s
		}
		return out
	}
	l.bad(k, env, "expected a mapping like {XBTC: BTC_USD}, got %v", v)
	return nil
}

// stringList reads a list of strings; from the environment it is "A,B".
func (l *loader) stringList(k configKey) []string {
	v, env, ok := l.source(k)
	if !ok {
		return nil
	}
	switch x := v.(type) {
	case string:
		if env == "" {
			break
		}
		var out []string
		for s := range strings.SplitSeq(x, ",") {
			out = append(out, strings.TrimSpace(s))
		}
		return out
	case []any:
		out := []string{}
		for _, item := range x {
			s, isStr := item.(string)
			if !isStr {
				l.bad(k, env, "expected a list of strings, got %s in it", kindOf(item))
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	l.bad(k, env, "expected a list like [guard.example.org], got %s", kindOf(v))
	return nil
}

// positive reads a duration that must be > 0.
func (l *loader) positive(k configKey, def time.Duration) time.Duration {
	n := len(l.errs)
	d := l.duration(k, def)
	if len(l.errs) == n && d == 0 {
		l.bad(k, l.envOf(k), "must be greater than 0")
		return def
	}
	return d
}

// envOf returns the variable that set k, or "" when the file did.
func (l *loader) envOf(k configKey) string {
	if !k.noEnv && (l.acct == nil || !l.acct.fileOnly[k.path()]) && l.getenv(k.envName()) != "" {
		return k.envName()
	}
	return ""
}

// keyOrValue returns the node of a key's value, its key, or nil.
func (l *loader) keyOrValue(p string) *yaml.Node {
	if n := l.nodes[p]; n != nil {
		return n
	}
	return l.keys[p]
}

// secret resolves a credential: the environment variable, else the file
// named by fileKey, else the YAML value (with a warning). Its value never
// appears in an error or a warning.
func (l *loader) secret(envVar string, fileKey, yamlKey configKey) string {
	inYAML := l.str(yamlKey, "")
	if inYAML != "" {
		l.warnf("%s is set in the config file: prefer %s or %s", yamlKey.path(), envVar, fileKey.path())
		if fi, err := os.Stat(l.path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			l.warnf("%s holds %s but is readable by other users (mode %04o): chmod 600 it", l.path, yamlKey.path(), fi.Mode().Perm())
		}
	}
	if v := strings.TrimSpace(l.getenv(envVar)); v != "" {
		return v
	}
	if name := l.str(fileKey, ""); name != "" {
		data, err := os.ReadFile(name)
		if err != nil {
			// The error names the file only; it cannot hold the secret.
			l.bad(fileKey, l.envOf(fileKey), "cannot read: %v", unwrapPathError(err))
			return ""
		}
		if fi, err := os.Stat(name); err == nil && fi.Mode().Perm()&0o077 != 0 {
			l.warnf("%s %s is readable by other users (mode %04o): chmod 600 it", fileKey.path(), name, fi.Mode().Perm())
		}
		v := strings.TrimSpace(string(data))
		if v == "" {
			l.bad(fileKey, l.envOf(fileKey), "%s is empty", name)
		}
		return v
	}
	return inYAML
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (l *loader) warnf(format string, args ...any) {
	l.warnings = append(l.warnings, fmt.Sprintf(format, args...))
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
