package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/internal/yamlnode"
	"github.com/riskguard/riskguard/rules"
	"gopkg.in/yaml.v3"
)

// venue is one row of the registry of venues: the name exchange.venue
// gives it, the calls of the exchange contract it offers, and how the
// daemon builds it. Adding a venue is its package (a type that is an
// exchange.Venue and passes exchange/conformance) and its row in
// defaultVenues.
type venue struct {
	Name string
	// Offers are the calls it offers, in the contract's order: what the
	// loader checks the rules' kinds against without building it (check
	// needs no credentials). TestVenueRowsOfferWhatTheyBuild holds it to
	// exchange.Capabilities of the venue built.
	Offers exchange.Calls
	// New builds it from an account's configuration; opts are the signed
	// client's (the request hook, a test's clock), which another venue
	// may ignore.
	New func(cfg *config, logger *slog.Logger, opts ...exchange.Option) (exchange.Venue, error)
}

// venues is the registry: a row per venue, looked up by name.
type venues []venue

// defaultVenue is exchange.venue's default: the signed client.
const defaultVenue = "rest"

// defaultVenues is the registry the program ships; Main.venues replaces
// it in tests.
func defaultVenues() venues {
	return venues{
		{Name: defaultVenue, Offers: exchange.Contract(),
			New: func(cfg *config, logger *slog.Logger, opts ...exchange.Option) (exchange.Venue, error) {
				c, err := newClient(cfg, logger, opts...)
				if err != nil {
					return nil, err
				}
				return c, nil
			}},
	}
}

// find is the row named name.
func (vs venues) find(name string) (venue, bool) {
	i := slices.IndexFunc(vs, func(v venue) bool { return v.Name == name })
	if i < 0 {
		return venue{}, false
	}
	return vs[i], true
}

// names lists the rows' names, for an error.
func (vs venues) names() []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}

// orDefault is vs, or the shipped registry when vs is nil.
func (vs venues) orDefault() venues {
	if vs == nil {
		return defaultVenues()
	}
	return vs
}

// venueOf reads exchange.venue and finds its row in reg; an unknown name
// is the key's error, and leaves the shipped default.
func (l *loader) venueOf(reg venues) venue {
	k := key("exchange", "venue")
	name := l.str(k, defaultVenue)
	v, ok := reg.find(name)
	if !ok {
		hint := ""
		if s := rules.DidYouMean(name, reg.names()); s != "" {
			hint = fmt.Sprintf(" (did you mean %q?)", s)
		}
		l.bad(k, l.envOf(k), "%q is not a venue riskguard knows%s: one of %s", name, hint, strings.Join(reg.names(), ", "))
		v, _ = defaultVenues().find(defaultVenue)
	}
	return v
}

// venueNeeds refuses every action whose kind needs a call the venue does
// not offer, at the action's kind, naming the rule and the call: such a
// rule would be skipped at the moment it fires.
func (l *loader) venueNeeds(set *rules.Set, v venue) {
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
