package margin

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// reportedBy is what an exchange running the model itself would list.
func reportedBy(a Account) []Reported {
	out := make([]Reported, len(a.Positions))
	liqs := a.CrossLiquidationPrices()
	for i, p := range a.Positions {
		out[i] = Reported{Margin: p.Margin(), Liquidation: liqs[i]}
		if !p.Cross {
			out[i].Liquidation = a.LiquidationPrice(i)
		}
	}
	return out
}

func TestCheckFit(t *testing.T) {
	t.Parallel()
	acct := func() Account {
		return Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(true, "3100"), xsol(false)}}
	}
	tests := []struct {
		name    string
		alter   func(r []Reported)
		fits    bool
		worst   string // symbol
		why     string
		free    string
		spread0 bool
	}{
		{"the model's own figures", func([]Reported) {}, true, "", "", "3000", true},
		// the exchange: 100.5 reported on XBTC's 1,600
		{"margin net of something", func(r []Reported) { r[0].Margin = dec("100.5") }, false, "XBTC",
			"XBTC (margin 100.5 reported, 1600 modelled)", "3000", true},
		// XSOL's maintenance rate differs: the exchange liquidates at 142
		{"isolated liquidation", func(r []Reported) { r[2].Liquidation = dec("142") }, false, "XSOL",
			"XSOL (liquidation 142 reported, 140.75 modelled)", "3000", true},
		// XETH's reported price implies 1,000 more free than XBTC's
		{"cross positions disagree", func(r []Reported) { r[1].Liquidation = r[1].Liquidation.Add(dec("100")) }, false, "",
			"the cross positions imply free balances (3000 … 4000) apart", "3000", false},
		// a tick's rounding is within tolerance
		{"within a tick", func(r []Reported) { r[2].Liquidation = r[2].Liquidation.Add(dec("0.01")) }, true, "XSOL", "", "3000", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := acct()
			rep := reportedBy(a)
			tt.alter(rep)
			f := CheckFit(a, rep, 0)
			if f.Fits() != tt.fits {
				t.Errorf("fits %t, want %t: %s", f.Fits(), tt.fits, f.Summary())
			}
			if !f.FreeKnown || !f.Free.Equal(dec(tt.free)) {
				t.Errorf("free %s (%t), want %s", f.Free, f.FreeKnown, tt.free)
			}
			if (f.FreeSpread == 0) != tt.spread0 {
				t.Errorf("free spread %v", f.FreeSpread)
			}
			if f.WorstSymbol != tt.worst && !(tt.fits && tt.worst == "") {
				t.Errorf("worst on %q (%s), want %q", f.WorstSymbol, f.WorstWhat, tt.worst)
			}
			if tt.why != "" && !strings.HasPrefix(f.Why(), tt.why) {
				t.Errorf("why %q, want %q", f.Why(), tt.why)
			}
			if tt.fits && f.Why() != "" {
				t.Errorf("why %q for a fit", f.Why())
			}
		})
	}
}

// A read-back the model did not predict keeps the position unfit until
// one matches again.
func TestFitMismatch(t *testing.T) {
	t.Parallel()
	a := Account{Free: dec("3000"), Positions: []Position{xbtc(true), xsol(false)}}
	f := CheckFit(a, reportedBy(a), 0)
	if !f.Fits() {
		t.Fatal(f.Summary())
	}
	f.MarkMismatch("XSOL", "predicted liquidation 139.84, got 141.5")
	if f.Fits() || f.WorstSymbol != "XSOL" || f.Why() != "XSOL (predicted liquidation 139.84, got 141.5)" {
		t.Errorf("after a mismatch: %s", f.Summary())
	}
	if p, _ := f.Symbol("XBTC"); !p.Fits(f.Tolerance) {
		t.Error("XBTC unfit by XSOL's read-back")
	}
}

// TestCheckFitMatchesPairwise: CheckFit sums the cross pool once; every
// figure it gives equals the definition's, position by position
// (inferFree and LiquidationPrice, each summing over the others), on
// seeded accounts whose reported figures are off by a little or a lot.
func TestCheckFitMatchesPairwise(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(18, 5))
	for n := range 500 {
		a := randomAccount(r)
		rep := reportedBy(a)
		for i := range rep {
			if r.IntN(3) == 0 {
				rep[i].Liquidation = rep[i].Liquidation.Add(decimal.NewFromInt(int64(r.IntN(200) - 100)))
			}
		}
		f := CheckFit(a, rep, 0)
		m := Account{Positions: slices.Clone(a.Positions)}
		for i := range m.Positions {
			m.Positions[i].Held, m.Positions[i].MM = decimal.Zero, decimal.Zero
		}
		var free decimal.Decimal
		known := false
		for i := range m.Positions {
			got := f.Positions[i]
			want, ok := m.inferFree(i, rep[i].Liquidation)
			if ok != got.HasFree || ok && !want.Equal(got.FreeInferred) {
				t.Fatalf("account %d, position %d: free %s (%t), pairwise %s (%t)", n, i, got.FreeInferred, got.HasFree, want, ok)
			}
			if ok && !known {
				free, known = want, true
			}
		}
		m.Free = decimal.Max(free, decimal.Zero)
		for i, p := range m.Positions {
			if !p.Open() || p.Cross && !known {
				continue
			}
			if want, got := m.LiquidationPrice(i), f.Positions[i].LiquidationModelled; !want.Equal(got) {
				t.Fatalf("account %d, position %d: liquidation %s, pairwise %s", n, i, got, want)
			}
		}
	}
}
