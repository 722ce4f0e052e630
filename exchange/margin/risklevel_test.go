package margin

import (
	"math/rand/v2"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// checkRiskLevel fails when RiskLevel and its decimal definition disagree,
// and returns whether the float path answered by itself.
func checkRiskLevel(t *testing.T, direction string, q, entry, collateral, mmr, index decimal.Decimal) bool {
	t.Helper()
	want := riskLevelExact(direction, q, entry, collateral, mmr, index)
	if got := RiskLevel(direction, q, entry, collateral, mmr, index); got != want {
		t.Fatalf("RiskLevel(%s, q %s, entry %s, collateral %s, mmr %s, index %s) = %d, decimal gives %d",
			direction, q, entry, collateral, mmr, index, got, want)
	}
	if !q.IsPositive() {
		return false
	}
	_, ok := riskLevelFloat(direction, q, entry, collateral, mmr, index)
	return ok
}

// TestRiskLevelFloatMatchesDecimal compares the float64 path with the
// decimal definition on the boundaries where rounding decides (equity at
// zero, ratios at an exact integer percent, the 100 cap) and on random
// positions of every size.
func TestRiskLevelFloatMatchesDecimal(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	tests := []struct {
		name                                       string
		direction, q, entry, collateral, mm, index string
		wantFloat                                  bool // the float path answers without the decimal one
	}{
		{"at entry", exchange.Long, "2", "60000", "12000", "0.005", "60000", false}, // exactly 5%
		{"halfway down", exchange.Long, "2", "60000", "12000", "0.005", "57150", true},
		{"equity exactly zero", exchange.Long, "2", "60000", "12000", "0.005", "54000", false},
		{"equity just positive", exchange.Long, "2", "60000", "12000", "0.005", "54000.01", true},
		{"equity just negative", exchange.Long, "2", "60000", "12000", "0.005", "53999.99", true},
		{"exactly 100", exchange.Long, "2", "60000", "12000", "0.005", "54300", false},
		{"just over 100", exchange.Long, "2", "60000", "12000", "0.005", "54299.99", true},
		{"exactly 1 percent", exchange.Short, "1", "100", "50", "0.005", "100", false},
		{"a hair over an integer", exchange.Long, "1", "100", "0.49999999999999999", "0.005", "100", false},
		{"short in profit", exchange.Short, "3.5", "2500.5", "900", "0.01", "2000", true},
		{"tiny quantity", exchange.Long, "0.00000001", "65000", "0.0001", "0.005", "64000", true},
		{"huge notional", exchange.Short, "1000000000", "99999.99", "100000000000", "0.05", "100010", true},
		{"zero rate", exchange.Long, "2", "60000", "12000", "0", "59000", false},
		{"beyond float", exchange.Long, "1e120", "1", "1e120", "0.005", "1", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := checkRiskLevel(t, tc.direction, d(tc.q), d(tc.entry), d(tc.collateral), d(tc.mm), d(tc.index))
			if got != tc.wantFloat {
				t.Errorf("float path answered = %v, want %v", got, tc.wantFloat)
			}
		})
	}
	t.Run("random", func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewPCG(1, 2))
		answered := 0
		const n = 20_000
		for range n {
			entry, q, collateral := randomPosition(rng)
			if rng.IntN(4) == 0 {
				collateral = collateral.Add(decimal.New(rng.Int64N(1_000_000), -2)) // cross
			}
			mmr := decimal.New(rng.Int64N(100)+1, -4)
			// An index within ±60% of the entry, at the entry's scale.
			move := decimal.New(rng.Int64N(1200)-600, -3)
			index := entry.Add(entry.Mul(move)).Round(entry.Exponent() * -1)
			dir := exchange.Long
			if rng.IntN(2) == 0 {
				dir = exchange.Short
			}
			if checkRiskLevel(t, dir, q, entry, collateral, mmr, index) {
				answered++
			}
		}
		// The point of the float path: it answers nearly always.
		if answered < n*9/10 {
			t.Errorf("the float path answered %d of %d", answered, n)
		}
	})
}

// FuzzRiskLevel compares RiskLevel with its decimal definition on any
// inputs.
func FuzzRiskLevel(f *testing.F) {
	f.Add(true, int64(2), int32(0), int64(60000), int32(0), int64(12000), int32(0), int64(5), int32(-3), int64(57150), int32(0))
	f.Add(false, int64(1), int32(0), int64(100), int32(0), int64(50), int32(0), int64(5), int32(-3), int64(100), int32(0))
	f.Add(true, int64(7), int32(-8), int64(6500012), int32(-2), int64(31), int32(-4), int64(1), int32(-2), int64(6400000), int32(-2))
	f.Fuzz(func(t *testing.T, long bool, q int64, qe int32, entry int64, ee int32, coll int64, ce int32, mmr int64, me int32, index int64, ie int32) {
		exp := func(e int32) int32 { return e%30 - 10 } // keep the decimal arithmetic fast
		dir := exchange.Short
		if long {
			dir = exchange.Long
		}
		checkRiskLevel(t, dir, decimal.New(q, exp(qe)), decimal.New(entry, exp(ee)), decimal.New(coll, exp(ce)),
			decimal.New(mmr, exp(me)), decimal.New(index, exp(ie)))
	})
}

func BenchmarkRiskLevel(b *testing.B) {
	d := decimal.RequireFromString
	q, entry, coll, mmr, index := d("2"), d("60000"), d("12000"), d("0.005"), d("57150.37")
	for _, bc := range []struct {
		name string
		fn   func(string, decimal.Decimal, decimal.Decimal, decimal.Decimal, decimal.Decimal, decimal.Decimal) int
	}{{"RiskLevel", RiskLevel}, {"decimal", riskLevelExact}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.fn(exchange.Long, q, entry, coll, mmr, index)
			}
		})
	}
}
