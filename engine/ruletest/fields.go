package ruletest

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"

	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"gopkg.in/yaml.v3"
)

// typeOfScenario is the type an inline scenario decodes into.
var typeOfScenario = reflect.TypeFor[sim.Scenario]()

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// knownFields reports the keys of n that t (a struct, through pointers,
// slices and maps) has no yaml field for, at their lines: yaml.v3 checks
// known fields only when decoding a whole document, not a node.
func (p *parser) knownFields(n *yaml.Node, what string, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			if !ok {
				if hint := rules.DidYouMean(k.Value, names); hint != "" {
					p.errorf(k, "%s: unknown key %q (did you mean %q?)", what, k.Value, hint)
				} else {
					p.errorf(k, "%s: unknown key %q", what, k.Value)
				}
				continue
			}
			p.knownFields(v, what+"."+k.Value, ft)
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for i, e := range n.Content {
			p.knownFields(e, fmt.Sprintf("%s[%d]", what, i), t.Elem())
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p.knownFields(n.Content[i+1], what+"."+n.Content[i].Value, t.Elem())
		}
	}
}

// yamlFields maps the yaml names of a struct's fields, inline ones
// included, to their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}
