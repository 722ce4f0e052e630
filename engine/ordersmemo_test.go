package engine

import "testing"

// The tick's orders, kept while the config's figures stay, are at every
// tick the config's orders made afresh, as each figure changes and
// changes back.
func TestOrdersMemoIsTheConfigsOrders(t *testing.T) {
	t.Parallel()
	var m ordersMemo
	c := Config{OrderCost: 0.001, DustNotional: 5, OrdersAsAsked: false}
	steps := []struct {
		name string
		set  func(c *Config)
	}{
		{"as it is", func(*Config) {}},
		{"again", func(*Config) {}},
		{"order cost", func(c *Config) { c.OrderCost = 0.002 }},
		{"dust notional", func(c *Config) { c.DustNotional = 12.5 }},
		{"orders as asked", func(c *Config) { c.OrdersAsAsked = true }},
		{"dust back", func(c *Config) { c.DustNotional = 5 }},
		{"dust zero", func(c *Config) { c.DustNotional = 0 }},
		{"all back", func(c *Config) { *c = Config{OrderCost: 0.001, DustNotional: 5} }},
	}
	for _, s := range steps {
		s.set(&c)
		got, want := m.of(&c), c.orders()
		if got.Cost != want.Cost || got.AsAsked != want.AsAsked ||
			got.Dust.String() != want.Dust.String() || got.Dust.Exponent() != want.Dust.Exponent() {
			t.Errorf("%s: orders %+v, the config's %+v", s.name, got, want)
		}
	}
}
