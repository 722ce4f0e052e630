package main

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/exchange"
)

// venue is one row of the registry of venues: the name exchange.venue
// gives it, the calls of the exchange contract it offers, and how the
// daemon builds it. The configuration names the venue (config.Venue is
// what the loader checks of a row); the row maps the name to the
// constructor. Adding a venue is its package (a type that is an
// exchange.Venue and passes exchange/conformance) and its row in
// defaultVenues.
type venue struct {
	Name string
	// Offers are the calls it offers, in the contract's order: what the
	// loader checks the rules' kinds against without building it (check
	// needs no credentials; config.Options.Venues). TestVenueRowsOfferWhatTheyBuild holds it to
	// exchange.Capabilities of the venue built.
	Offers exchange.Calls
	// New builds it from an account's configuration; opts are the signed
	// client's (the request hook, a test's clock), which another venue
	// may ignore.
	New func(cfg *config.Config, logger *slog.Logger, opts ...exchange.Option) (exchange.Venue, error)
}

// venues is the registry: a row per venue, looked up by name.
type venues []venue

// defaultVenues is the registry the program ships; Main.venues replaces
// it in tests.
func defaultVenues() venues {
	return venues{
		{Name: config.DefaultVenue, Offers: exchange.Contract(),
			New: func(cfg *config.Config, logger *slog.Logger, opts ...exchange.Option) (exchange.Venue, error) {
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

// specs is what the loader checks exchange.venue against: each row's
// name and the calls it offers (config.Options.Venues).
func (vs venues) specs() []config.Venue {
	vs = vs.orDefault()
	out := make([]config.Venue, len(vs))
	for i, v := range vs {
		out[i] = config.Venue{Name: v.Name, Offers: v.Offers}
	}
	return out
}

// build builds the venue cfg's exchange.venue names, with the signed
// client's opts; a configuration built by hand, not loaded, names none
// and gets the shipped default.
func (vs venues) build(cfg *config.Config, logger *slog.Logger, opts ...exchange.Option) (exchange.Venue, error) {
	name := cfg.Exchange.Venue
	if name == "" {
		name = config.DefaultVenue
	}
	v, ok := vs.orDefault().find(name)
	if !ok {
		return nil, fmt.Errorf("exchange.venue %q: no such venue", name) // the loader refuses it first
	}
	return v.New(cfg, logger, opts...)
}
