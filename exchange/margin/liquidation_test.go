package margin

import (
	"math/rand/v2"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// checkLiquidationPrice fails when LiquidationPrice and its decimal
// definition disagree — in value or in exponent, which shows in the
// digits it is written with — and returns whether the float path answered
// by itself.
func checkLiquidationPrice(t *testing.T, direction string, q, entry, collateral, mmr decimal.Decimal, scale int32) bool {
	t.Helper()
	want := liquidationPriceExact(direction, q, entry, collateral, mmr, scale)
	got := LiquidationPrice(direction, q, entry, collateral, mmr, scale)
	if !got.Equal(want) || got.Exponent() != want.Exponent() || got.String() != want.String() {
		t.Fatalf("LiquidationPrice(%s, q %s, entry %s, collateral %s, mmr %s, scale %d) = %s (exp %d), decimal gives %s (exp %d)",
			direction, q, entry, collateral, mmr, scale, got, got.Exponent(), want, want.Exponent())
	}
	if !q.IsPositive() {
		return false
	}
	_, ok := liquidationPriceFloat(direction, q, entry, collateral, mmr, scale)
	return ok
}

// TestLiquidationPriceFloatMatchesDecimal compares the float64 path with
// the decimal definition on the boundaries where rounding decides (a
// liquidation price exactly on a tick, a hair off one, at zero and below)
// and on random positions of every size.
func TestLiquidationPriceFloatMatchesDecimal(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	tests := []struct {
		name                               string
		direction, q, entry, collateral, m string
		scale                              int32
		wantFloat                          bool // the float path answers without the decimal one
	}{
		{"on a tick (long)", exchange.Long, "1", "100", "10", "0", 2, false},   // exactly 90
		{"on a tick (short)", exchange.Short, "1", "100", "10", "0", 2, false}, // exactly 110
		{"a hair above a tick", exchange.Long, "1", "100", "9.999999999999999999", "0", 2, false},
		{"isolated 10x long", exchange.Long, "0.5", "65000", "3250", "0.005", 2, false}, // 58825 exactly
		{"isolated 10x long off tick", exchange.Long, "0.37", "65000.13", "2405.004", "0.005", 2, true},
		{"short on a tick", exchange.Short, "200", "150", "3750", "0.005", 3, false}, // exactly 168
		{"short off tick", exchange.Short, "200", "150", "3751.37", "0.005", 3, true},
		{"cross long with free balance", exchange.Long, "0.5", "65000", "203250.17", "0.005", 2, true}, // far below zero: 0
		{"exactly zero", exchange.Long, "1", "100", "100", "0", 2, false},
		{"a tick below zero", exchange.Long, "1", "100", "100.01", "0", 2, false},
		{"a hair below zero, long", exchange.Long, "1", "100", "100.001", "0", 2, true},    // −0.001 rounds up to 0.00
		{"a hair below zero, short", exchange.Short, "1", "100", "-100.001", "0", 2, true}, // −0.001 rounds down below 0
		{"tiny quantity on a tick", exchange.Long, "0.00000001", "65000", "0.00013", "0.005", 2, false},
		{"tiny quantity", exchange.Long, "0.00000001", "65000.37", "0.00013", "0.005", 2, true},
		{"doge scale on a tick", exchange.Long, "200000", "0.15", "1500", "0.005", 5, false}, // exactly 0.14325
		{"doge scale", exchange.Long, "200000", "0.15", "1500.37", "0.005", 5, true},
		{"huge notional", exchange.Short, "1000000000", "99999.99", "100000000000", "0.05", 2, true},
		{"beyond float", exchange.Long, "1e120", "1", "1e120", "0.005", 2, false},
		{"negative scale", exchange.Long, "1", "100", "10", "0", -1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := checkLiquidationPrice(t, tc.direction, d(tc.q), d(tc.entry), d(tc.collateral), d(tc.m), tc.scale)
			if got != tc.wantFloat {
				t.Errorf("float path answered = %v, want %v", got, tc.wantFloat)
			}
		})
	}
	t.Run("random", func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewPCG(3, 4))
		answered := 0
		const n = 50_000
		for range n {
			entry, q, collateral := randomPosition(rng)
			if rng.IntN(4) == 0 {
				collateral = collateral.Add(decimal.New(rng.Int64N(1_000_000), -2)) // cross
			}
			mmr := decimal.New(rng.Int64N(100)+1, -4)
			dir := exchange.Long
			if rng.IntN(2) == 0 {
				dir = exchange.Short
			}
			if checkLiquidationPrice(t, dir, q, entry, collateral, mmr, int32(rng.IntN(9))) {
				answered++
			}
		}
		// The point of the float path: it answers mostly. (These inputs
		// have few digits, so a sixth of their prices fall exactly on a
		// tick, where the decimal formula must decide.)
		if answered < n*3/4 {
			t.Errorf("the float path answered %d of %d", answered, n)
		}
	})
}

// randomPosition draws a position's entry price and quantity, of every
// size, and its isolated collateral: the margin at 1× to 100×.
func randomPosition(rng *rand.Rand) (entry, q, collateral decimal.Decimal) {
	entry = decimal.New(rng.Int64N(10_000_000)+1, -int32(rng.IntN(5)))
	q = decimal.New(rng.Int64N(1_000_000)+1, -int32(rng.IntN(9)))
	lev := rng.Int64N(100) + 1
	return entry, q, q.Mul(entry).DivRound(decimal.NewFromInt(lev), 8)
}

// FuzzLiquidationPrice compares LiquidationPrice with its decimal
// definition on any inputs.
func FuzzLiquidationPrice(f *testing.F) {
	f.Add(true, int64(1), int32(0), int64(100), int32(0), int64(10), int32(0), int64(0), int32(0), int32(2))
	f.Add(false, int64(200), int32(0), int64(150), int32(0), int64(3750), int32(0), int64(5), int32(-3), int32(3))
	f.Add(true, int64(37), int32(-2), int64(6500013), int32(-2), int64(2405004), int32(-3), int64(5), int32(-3), int32(2))
	f.Fuzz(func(t *testing.T, long bool, q int64, qe int32, entry int64, ee int32, coll int64, ce int32, mmr int64, me int32, scale int32) {
		exp := func(e int32) int32 { return e%30 - 10 } // keep the decimal arithmetic fast
		dir := exchange.Short
		if long {
			dir = exchange.Long
		}
		checkLiquidationPrice(t, dir, decimal.New(q, exp(qe)), decimal.New(entry, exp(ee)), decimal.New(coll, exp(ce)),
			decimal.New(mmr, exp(me)), scale%20)
	})
}

func BenchmarkLiquidationPrice(b *testing.B) {
	d := decimal.RequireFromString
	q, entry, coll, mmr := d("0.37"), d("65000.13"), d("2405.004"), d("0.005")
	for _, bc := range []struct {
		name string
		fn   func(string, decimal.Decimal, decimal.Decimal, decimal.Decimal, decimal.Decimal, int32) decimal.Decimal
	}{{"LiquidationPrice", LiquidationPrice}, {"decimal", liquidationPriceExact}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.fn(exchange.Long, q, entry, coll, mmr, 2)
			}
		})
	}
}

// liquidationPriceWide is the decimal definition, value and exponent,
// wherever it answers: on the boundaries float64 leaves to the decimals (a
// price exactly on a tick, a hair off one, at zero and below, buffers
// rounded half away from zero), on random positions of every size and
// sign, and it answers nearly all of those a guard sees.
func TestLiquidationPriceWideMatchesDecimal(t *testing.T) {
	t.Parallel()
	d := decimal.RequireFromString
	check := func(dir string, q, entry, coll, mmr decimal.Decimal, scale int32) bool {
		t.Helper()
		got, ok := liquidationPriceWide(dir, q, entry, coll, mmr, scale)
		if !ok {
			return false
		}
		if want := liquidationPriceExact(dir, q, entry, coll, mmr, scale); !SameDec(got, want) {
			t.Fatalf("liquidationPriceWide(%s, q %s, entry %s, collateral %s, mmr %s, scale %d) = %s (exp %d), decimal gives %s (exp %d)",
				dir, q, entry, coll, mmr, scale, got, got.Exponent(), want, want.Exponent())
		}
		return true
	}
	for _, tc := range []struct {
		dir, q, entry, coll, mmr string
		scale                    int32
		answers                  bool
	}{
		{exchange.Long, "1", "100", "10", "0", 2, true}, // exactly 90
		{exchange.Short, "1", "100", "10", "0", 2, true},
		{exchange.Long, "1", "100", "9.999999999999999999", "0", 2, false}, // 19 digits
		{exchange.Long, "1", "100", "9.99999999999999999", "0", 2, true},
		{exchange.Long, "0.5", "65000", "3250", "0.005", 2, true}, // 58825 exactly
		{exchange.Short, "200", "150", "3750", "0.005", 3, true},
		{exchange.Long, "3", "100", "10", "0", 2, true},                   // a buffer of 3.333…: rounded at 16 places
		{exchange.Long, "3", "100", "20", "0", 2, true},                   // 6.666…7: half away from zero
		{exchange.Short, "3", "100", "-20", "0", 2, true},                 // a negative buffer
		{exchange.Long, "2", "65", "0.0000000000000001", "0", 16, true},   // a buffer of half a unit at 16 places: up
		{exchange.Short, "2", "65", "-0.0000000000000001", "0", 16, true}, // and away from zero below it
		{exchange.Long, "1", "100", "100", "0", 2, true},                  // exactly zero
		{exchange.Long, "1", "100", "100.01", "0", 2, true},
		{exchange.Long, "1", "100", "100.001", "0", 2, true}, // −0.001 rounds up to 0.00
		{exchange.Short, "1", "100", "-100.001", "0", 2, true},
		{exchange.Long, "0.00000001", "65000", "0.00013", "0.005", 2, true},
		{exchange.Long, "200000", "0.15", "1500", "0.005", 5, true},
		{exchange.Long, "0.5", "65000", "3250", "0.005", 12, true},
		{exchange.Long, "0.5", "65000", "3250", "0.005", 16, false}, // 58825·10¹⁶ ticks: over an int64
		{exchange.Long, "0.5", "65", "3.25", "0.005", 16, true},
		{exchange.Long, "0.5", "65", "3.25", "0.005", 17, false},
		{exchange.Long, "1", "100", "10", "0", -1, false},
		{exchange.Long, "1000000000", "99999.99", "100000000000", "0.05", 2, true},
		{exchange.Long, "1e120", "1", "1e120", "0.005", 2, true}, // a coefficient of 1: it fits
		{exchange.Long, "1234567890123456789", "1", "10", "0.005", 2, false},
	} {
		if got := check(tc.dir, d(tc.q), d(tc.entry), d(tc.coll), d(tc.mmr), tc.scale); got != tc.answers {
			t.Errorf("%s q %s entry %s collateral %s mmr %s scale %d: answered %v, want %v", tc.dir, tc.q, tc.entry, tc.coll, tc.mmr, tc.scale, got, tc.answers)
		}
	}
	rng := rand.New(rand.NewPCG(8, 9))
	answered, onTick := 0, 0
	const n = 50_000
	for range n {
		entry, q, coll := randomPosition(rng)
		switch rng.IntN(4) {
		case 0:
			coll = coll.Add(decimal.New(rng.Int64N(1_000_000), -2)) // cross
		case 1:
			coll = coll.Neg() // past liquidation
		}
		mmr := decimal.New(rng.Int64N(100)+1, -4)
		dir := exchange.Long
		if rng.IntN(2) == 0 {
			dir = exchange.Short
		}
		scale := int32(rng.IntN(9))
		if rng.IntN(3) == 0 {
			// The collateral that puts the price exactly on a tick: the
			// case float64 cannot decide.
			liq := entry.Mul(decimal.New(int64(50+rng.IntN(50)), -2)).Round(scale)
			move := entry.Sub(liq)
			if dir == exchange.Short {
				move = move.Neg()
			}
			coll = move.Mul(q).Add(mmr.Mul(q.Mul(entry)))
			onTick++
		}
		if check(dir, q, entry, coll, mmr, scale) {
			answered++
		}
	}
	if answered < n*95/100 || onTick < n/4 {
		t.Errorf("answered %d of %d (%d on a tick)", answered, n, onTick)
	}
}
