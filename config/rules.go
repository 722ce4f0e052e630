package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/riskguard/riskguard/internal/yamlnode"

	"gopkg.in/yaml.v3"

	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
)

// windowLimits refuses the functions over time whose window is longer
// than engine.max_window, at the rule's when.
func (l *loader) windowLimits(set *rules.Set, limit time.Duration) {
	rulesNode := yamlnode.Value(l.rulesRoot, "rules")
	if set == nil || limit <= 0 || rulesNode == nil || rulesNode.Kind != yaml.SequenceNode || len(rulesNode.Content) != len(set.Rules) {
		return
	}
	for i, r := range set.Rules {
		at := yamlnode.Value(rulesNode.Content[i], "when")
		if at == nil {
			at = rulesNode.Content[i]
		}
		for _, w := range r.Windows() {
			if w.Span > limit {
				l.errs = append(l.errs, &rules.Error{File: l.rulesPath, Line: at.Line, Col: at.Column, Rule: r.Name, RuleIndex: i + 1,
					Msg: fmt.Sprintf("when: %s: the window is longer than engine.max_window (%s)", w, rules.FormatSpan(limit))})
			}
		}
	}
}

// ruleReferences checks what rules take from the notify section: the
// channels their notify actions name and their message templates. It walks
// the rule nodes itself, so that a rule with another mistake is checked too.
func (l *loader) ruleReferences(ncfg *notify.Config, rawNotify any) {
	defined := map[string]bool{}
	if ncfg != nil {
		for _, n := range ncfg.ChannelNames() {
			defined[n] = true
		}
	} else if m, ok := rawNotify.(map[string]any); ok {
		// A broken section: take the names it defines, so that its own
		// errors are not repeated at every rule that names a channel.
		if ch, ok := m["channels"].(map[string]any); ok {
			for n := range ch {
				defined[n] = true
			}
		}
	}
	names := slices.Sorted(maps.Keys(defined))
	rulesNode := yamlnode.Value(l.rulesRoot, "rules")
	if rulesNode == nil || rulesNode.Kind != yaml.SequenceNode {
		return
	}
	for i, rn := range rulesNode.Content {
		if rn.Kind != yaml.MappingNode {
			continue
		}
		name := ""
		if n := yamlnode.Value(rn, "name"); n != nil && n.Kind == yaml.ScalarNode {
			name = n.Value
		}
		at := func(n *yaml.Node, format string, args ...any) {
			l.errs = append(l.errs, &rules.Error{File: l.rulesPath, Line: n.Line, Col: n.Column, Rule: name, RuleIndex: i + 1, Msg: fmt.Sprintf(format, args...)})
		}
		if msg := yamlnode.Value(rn, "message"); msg != nil && msg.Kind == yaml.ScalarNode && msg.Tag == "!!str" {
			if err := notify.CheckTemplate(msg.Value); err != nil {
				at(msg, "%v", err) // "message template …"
			}
		}
		actions := yamlnode.Value(rn, "actions")
		if actions == nil || actions.Kind != yaml.SequenceNode {
			continue
		}
		for _, an := range actions.Content {
			kind := yamlnode.Value(an, "action")
			channels := yamlnode.Value(an, "channels")
			if kind == nil || kind.Value != string(rules.Notify) || channels == nil || channels.Kind != yaml.SequenceNode {
				continue
			}
			for _, c := range channels.Content {
				if c.Kind != yaml.ScalarNode || defined[c.Value] {
					continue
				}
				switch hint := rules.DidYouMean(c.Value, names); {
				case len(names) == 0:
					at(c, "notify channel %q is not defined: there is no notify.channels section", c.Value)
				case hint != "":
					at(c, "notify channel %q is not defined under notify.channels (did you mean %q?)", c.Value, hint)
				default:
					at(c, "notify channel %q is not defined under notify.channels (defined: %s)", c.Value, strings.Join(names, ", "))
				}
			}
		}
	}
}
