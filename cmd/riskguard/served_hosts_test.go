package main

import (
	"slices"
	"testing"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/ha"
)

// TestServedHostsIncludeTheAdvertisedAddress: under ha: the other
// processes reach this one's control API by the address it advertises
// (Telegram forwarding, the CLI sent on by a standby's 421), so that name is
// served as well as engine.allowed_hosts; without ha: only those. (web's
// TestHostsAnswered checks that the server answers exactly the names given.)
func TestServedHostsIncludeTheAdvertisedAddress(t *testing.T) {
	allowed := []string{"guard.example.org"}
	for _, tc := range []struct {
		name string
		cfg  *config.Config
		want []string
	}{
		{"no ha", &config.Config{Engine: engine.Config{AllowedHosts: allowed}}, allowed},
		{"ha advertising a name", &config.Config{Engine: engine.Config{AllowedHosts: allowed}, HA: &config.HA{Config: ha.Config{Advertise: "node1.example:9464"}}}, []string{"guard.example.org", "node1.example:9464"}},
		{"ha without an address", &config.Config{Engine: engine.Config{}, HA: &config.HA{}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := servedHosts(tc.cfg)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("servedHosts = %q, want %q", got, tc.want)
			}
		})
	}
}
