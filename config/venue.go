package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/internal/yamlnode"
	"github.com/riskguard/riskguard/rules"
	"gopkg.in/yaml.v3"
)

// Venue is what the loader knows of a venue exchange.venue may name: its
// name and the calls of the exchange contract it offers, against which
// the rules' action kinds are checked without building it (check needs no
// credentials). The program maps the name to the venue's constructor
// (cmd/riskguard/venues.go); the configuration only names it.
type Venue struct {
	// Name is what exchange.venue says.
	Name string
	// Offers are the calls it offers, in the contract's order.
	Offers exchange.Calls
}

// DefaultVenue is exchange.venue's default: the signed client.
const DefaultVenue = "rest"

// DefaultVenues are the venues the loader knows when its caller passes
// none (Options.Venues nil): the signed client, which offers the whole
// contract. The program always passes its registry
// (cmd/riskguard/venues.go), the one list of the venues it ships, so a
// second venue is a row there and nothing here.
func DefaultVenues() []Venue {
	return []Venue{{Name: DefaultVenue, Offers: exchange.Contract()}}
}

// venueOf reads exchange.venue and finds it among known (nil is
// DefaultVenues()); an unknown name is the key's error, and leaves the
// shipped default.
func (l *loader) venueOf(known []Venue) Venue {
	if known == nil {
		known = DefaultVenues()
	}
	k := key("exchange", "venue")
	name := l.str(k, DefaultVenue)
	i := slices.IndexFunc(known, func(v Venue) bool { return v.Name == name })
	if i >= 0 {
		return known[i]
	}
	names := make([]string, len(known))
	for j, v := range known {
		names[j] = v.Name
	}
	hint := ""
	if s := rules.DidYouMean(name, names); s != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", s)
	}
	l.bad(k, l.envOf(k), "%q is not a venue riskguard knows%s: one of %s", name, hint, strings.Join(names, ", "))
	return DefaultVenues()[0]
}

// venueNeeds refuses every action whose kind needs a call the venue does
// not offer, at the action's kind, naming the rule and the call: such a
// rule would be skipped at the moment it fires.
func (l *loader) venueNeeds(set *rules.Set, v Venue) {
	rulesNode := yamlnode.Value(l.rulesRoot, "rules")
	if set == nil || v.Name == "" || rulesNode == nil || rulesNode.Kind != yaml.SequenceNode || len(rulesNode.Content) != len(set.Rules) {
		return
	}
	for i, r := range set.Rules {
		for j, a := range r.Actions {
			spec, ok := set.Spec(a.Kind)
			if !ok {
				continue
			}
			at := actionKindNode(rulesNode.Content[i], j)
			for _, c := range spec.Needs {
				if v.Offers.Has(exchange.Call(c)) {
					continue
				}
				e := &rules.Error{File: l.rulesPath, Rule: r.Name, RuleIndex: i + 1,
					Msg: fmt.Sprintf("%s needs %s, which venue %q does not offer (it offers %s)", a.Kind, c, v.Name, v.Offers)}
				if at != nil {
					e.Line, e.Col = at.Line, at.Column
				}
				l.errs = append(l.errs, e)
			}
		}
	}
}

// actionKindNode is the value of action j's `action:` key in the rule
// mapping n, or the rule itself when it is not found.
func actionKindNode(n *yaml.Node, j int) *yaml.Node {
	as := yamlnode.Value(n, "actions")
	if as == nil || as.Kind != yaml.SequenceNode || j >= len(as.Content) {
		return n
	}
	if k := yamlnode.Value(as.Content[j], "action"); k != nil {
		return k
	}
	return as.Content[j]
}
