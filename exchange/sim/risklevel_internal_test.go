package sim

import (
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// The risk level riskLevelAt works out with the float64s it keeps by
// contract is margin.RiskLevel of the position as it is, when the index,
// the collateral, the quantity, the entry or the risk limit change from
// one read to the next, and back again (a kept conversion of figures that
// changed would give the old level).
func TestRiskLevelMemoIsRiskLevel(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	ex, err := New(Config{Key: "k", Secret: "s", Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	d := decimal.RequireFromString
	type change struct {
		name string
		do   func(p *exchange.Position, coll, index *decimal.Decimal)
	}
	changes := []change{
		{"as it is", func(*exchange.Position, *decimal.Decimal, *decimal.Decimal) {}},
		{"index down", func(_ *exchange.Position, _, x *decimal.Decimal) { *x = x.Mul(d("0.9")) }},
		{"index up", func(_ *exchange.Position, _, x *decimal.Decimal) { *x = x.Mul(d("1.08")) }},
		{"collateral halved", func(_ *exchange.Position, c, _ *decimal.Decimal) { *c = c.Div(d("2")) }},
		{"quantity doubled", func(p *exchange.Position, _, _ *decimal.Decimal) { p.Quantity = p.Quantity.Mul(d("2")) }},
		{"entry moved", func(p *exchange.Position, _, _ *decimal.Decimal) { p.EntryPrice = p.EntryPrice.Mul(d("1.01")) }},
		{"maintenance rate", func(p *exchange.Position, _, _ *decimal.Decimal) {
			p.RiskLimit.MaintenanceMarginRate = p.RiskLimit.MaintenanceMarginRate.Mul(d("3"))
		}},
		{"entry value past the risk limit", func(p *exchange.Position, _, _ *decimal.Decimal) {
			p.EntryValue = p.EntryValue.Mul(d("40"))
		}},
		{"index far down", func(_ *exchange.Position, _, x *decimal.Decimal) { *x = x.Mul(d("0.5")) }},
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for ci, q := range ex.slots {
		if q == nil || q.Empty {
			continue
		}
		p := *q
		ix, ok := ex.indexOf(ci)
		if !ok {
			continue
		}
		orig := ix.price
		coll := p.Margin
		for round := range 2 { // the second round goes through the same figures again
			for _, c := range changes {
				c.do(&p, &coll, &ix.price)
				got := ex.riskLevelAt(ci, &p, coll)
				want := margin.RiskLevel(p.Direction, p.Quantity, p.EntryPrice, coll, margin.MaintenanceRate(p.RiskLimit, p.EntryValue), ix.price)
				if got != want {
					t.Errorf("contract %d round %d, %s: level %d, want %d", ci, round, c.name, got, want)
				}
			}
			p, coll, ix.price = *q, q.Margin, orig
		}
		ix.price = orig
	}
}
