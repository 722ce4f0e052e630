// Package yamlnode holds what every reader of the project's YAML files
// (the configuration loader, the rules, the rule-test files) does the same
// way on yaml.v3 nodes: following aliases, naming a node in a message,
// walking a mapping's keys with unknown and duplicate keys reported, and
// reading durations. One wording, one did-you-mean, one set of bounds.
package yamlnode

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/internal/didyoumean"
	"gopkg.in/yaml.v3"
)

// Deref follows YAML aliases (bounded: an alias of an alias is rare, a loop
// impossible in valid YAML).
func Deref(n *yaml.Node) *yaml.Node {
	for i := 0; i < 8 && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}

// IsNull reports whether n is an explicit or implicit null.
func IsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// Describe names a node's type, and a scalar's value, for messages.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing (null)"
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int":
			return "the integer " + n.Value
		case "!!float":
			return "the number " + n.Value
		case "!!bool":
			return "the boolean " + n.Value
		}
		return fmt.Sprintf("%s %q", n.Tag, n.Value)
	}
	return "a document"
}

// Value returns the value of key in mapping n (the first, when repeated),
// or nil when n is not a mapping or has no such key.
func Value(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// UnknownKey is the message for a key not among known: the likely key, or
// the known ones. prefix is written before the key names (a section such
// as "engine.").
func UnknownKey(key, prefix string, known []string) string {
	if hint := didyoumean.Closest(key, known); hint != "" {
		return fmt.Sprintf("unknown key %q (did you mean %q?)", prefix+key, prefix+hint)
	}
	return fmt.Sprintf("unknown key %q (known: %s)", prefix+key, strings.Join(known, ", "))
}

// Fields walks mapping n's keys in order: a key not among known, or seen
// before, is reported at the key's node (with the UnknownKey wording, or
// "duplicate key"); the value of every other key is returned by key, its
// aliases followed.
func Fields(n *yaml.Node, prefix string, known []string, report func(at *yaml.Node, msg string)) map[string]*yaml.Node {
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case seen[k.Value]:
			report(k, fmt.Sprintf("duplicate key %q", prefix+k.Value))
		case !slices.Contains(known, k.Value):
			report(k, UnknownKey(k.Value, prefix, known))
		default:
			out[k.Value] = Deref(v)
		}
		seen[k.Value] = true
	}
	return out
}

// Duration reads a duration written like 30s, 5m or 1h30m, which must not
// be negative. Its error is the message to report at n.
func Duration(n *yaml.Node) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return 0, fmt.Errorf("expected a duration like 30s or 5m, got %s", Describe(n))
	}
	return ParseDuration(n.Value)
}

// ParseDuration is Duration for a value already read as text (from the
// environment, say).
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: use a number with a unit, like 30s, 5m or 1h", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %s", s)
	}
	return d, nil
}
