package window

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// series feeds a ring one sample per second from t0: values[i] at
// t0+i s; NaN is a tick without data (nothing pushed).
func series(span time.Duration, values ...float64) (*ring, time.Time) {
	r := newRing(span, time.Second)
	now := t0
	for i, v := range values {
		now = t0.Add(time.Duration(i) * time.Second)
		if !math.IsNaN(v) {
			r.push(now, v)
		}
	}
	return r, now
}

func TestRingFunctions(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	ramp := []float64{100, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90} // 10 s, −10%
	for _, tc := range []struct {
		name   string
		span   time.Duration
		values []float64
		fn     string
		want   float64
		why    string
	}{
		{"change over the whole window", 10 * time.Second, ramp, rules.FnChange, -0.10, ""},
		{"change over a shorter window", 5 * time.Second, ramp, rules.FnChange, (90.0 - 95) / 95, ""},
		{"rate per second", 10 * time.Second, ramp, rules.FnRate, -1, ""},
		{"min", 6 * time.Second, []float64{5, 3, 8, 4, 6}, rules.FnMinOverTime, 3, ""},
		{"max", 6 * time.Second, []float64{5, 3, 8, 4, 6}, rules.FnMaxOverTime, 8, ""},
		{"max leaves the window", 3 * time.Second, []float64{9, 3, 5, 4, 6}, rules.FnMaxOverTime, 6, ""},
		{"drawdown from the peak", 6 * time.Second, []float64{100, 120, 110, 90}, rules.FnDrawdown, 0.25, ""},
		{"time to liquidation", 8 * time.Second, []float64{0.10, 0.09, 0.08, 0.07, 0.06}, rules.FnTimeToLiquidation, 6, ""},
		{"not shrinking", 4 * time.Second, []float64{0.06, 0.07, 0.08}, rules.FnTimeToLiquidation, 0, whyNotShrink},
		{"empty window", 10 * time.Second, nil, rules.FnChange, 0, whyHalfEmpty},
		{"less than half covered", 10 * time.Second, []float64{100, 99, 98, 97}, rules.FnChange, 0, whyHalfEmpty},
		{"just half covered", 10 * time.Second, []float64{100, 99, 98, 97, 96, 95}, rules.FnChange, -0.05, ""},
		// A gap of 6 s in a 10 s window: 4 s covered.
		{"clock gap", 10 * time.Second, []float64{100, 99, nan, nan, nan, nan, nan, 97, 96, 95, 94}, rules.FnChange, 0, whyHalfEmpty},
		// A gap of 2 s (two intervals) still counts as covered.
		{"short gap", 10 * time.Second, []float64{100, nan, 98, 97, 96, 95, 94, 93, 92, 91, 90}, rules.FnChange, -0.10, ""},
		{"change from zero", 10 * time.Second, []float64{0, 0, 0, 0, 0, 0, 1}, rules.FnChange, 0, whyZeroBase},
	} {
		r, now := series(tc.span, tc.values...)
		cur := 0.0
		if n := len(tc.values); n > 0 {
			cur = tc.values[n-1]
		}
		got, why := r.value(tc.fn, now, cur)
		if why != tc.why || (why == "" && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("%s: %s = %g (%q), want %g (%q)", tc.name, tc.fn, got, why, tc.want, tc.why)
		}
	}
}

// A long window keeps buckets, not every tick: bounded memory, the same
// extremes.
func TestRingBuckets(t *testing.T) {
	t.Parallel()
	r := newRing(24*time.Hour, 2*time.Second)
	if len(r.slots) > maxSlots+2 {
		t.Fatalf("%d slots for a day at 2 s", len(r.slots))
	}
	now := t0
	for i := range 43200 { // a day of 2 s ticks
		now = t0.Add(time.Duration(i) * 2 * time.Second)
		v := 100.0
		if i == 20000 {
			v = 150 // one spike
		}
		r.push(now, v)
	}
	if got, why := r.value(rules.FnMaxOverTime, now, 100); got != 150 || why != "" {
		t.Errorf("max over the day = %g (%q), want the spike 150", got, why)
	}
	if got, why := r.value(rules.FnDrawdown, now, 100); math.Abs(got-1.0/3) > 1e-9 || why != "" {
		t.Errorf("drawdown = %g (%q), want 1/3", got, why)
	}
}

// A clock that jumps back does not corrupt the ring; one that jumps ahead
// leaves a gap that is not data.
func TestRingClockJumps(t *testing.T) {
	t.Parallel()
	r, now := series(10*time.Second, 100, 99, 98, 97, 96, 95, 94)
	r.push(now.Add(-time.Hour), 1) // back: ignored
	if got, _ := r.value(rules.FnMinOverTime, now, 94); got != 94 {
		t.Errorf("min after a jump back = %g, want 94", got)
	}
	later := now.Add(time.Hour)
	r.push(later, 90)
	if _, why := r.value(rules.FnChange, later, 90); why != whyHalfEmpty {
		t.Errorf("after a jump ahead: %q, want no data", why)
	}
}

var _ HistoryReader = (*exchange.Client)(nil)

// The ring agrees with the reference ring (refRing, which reads every
// slot it needs from the slots) on every value, whatever the clock does:
// ticks at the interval, within one bucket, gaps, jumps back, windows
// that wrap the ring many times, values asked for at an earlier time.
func TestRingMatchesReference(t *testing.T) {
	t.Parallel()
	fns := []string{rules.FnChange, rules.FnRate, rules.FnTimeToLiquidation, rules.FnMinOverTime, rules.FnMaxOverTime, rules.FnDrawdown}
	rng := rand.New(rand.NewPCG(18, 5))
	for run := range 400 {
		interval := []time.Duration{time.Second, 2 * time.Second, time.Minute}[run%3]
		span := []time.Duration{5 * time.Second, time.Minute, 5 * time.Minute, time.Hour, 24 * time.Hour}[rng.IntN(5)]
		r, ref := newRing(span, interval), newRefRing(span, interval)
		now := t0
		v := 100.0
		for step := range 3000 {
			switch k := rng.IntN(100); {
			case k < 80: // a tick
				now = now.Add(interval)
			case k < 88: // within a bucket, or a sub-interval step
				now = now.Add(time.Duration(rng.Int64N(int64(interval))))
			case k < 94: // a gap
				now = now.Add(time.Duration(rng.Int64N(int64(span))))
			case k < 97: // the clock jumps back
				now = now.Add(-time.Duration(rng.Int64N(int64(span / 2))))
			default: // a long outage
				now = now.Add(2 * span)
			}
			v = v*(1+(rng.Float64()-0.5)/50) + float64(rng.IntN(3)-1)*rng.Float64()
			if rng.IntN(10) == 0 {
				v = 0
			}
			if rng.IntN(20) != 0 { // now and then a tick without data
				r.push(now, v)
				ref.push(now, v)
			}
			at := now
			if rng.IntN(30) == 0 {
				at = now.Add(-time.Duration(rng.Int64N(int64(span)))) // asked about the past
			}
			for _, fn := range fns {
				got, why := r.value(fn, at, v)
				want, wantWhy := ref.value(fn, at, v)
				if why != wantWhy || math.Float64bits(got) != math.Float64bits(want) {
					t.Fatalf("run %d (span %s, interval %s) step %d: %s = %v (%q), reference %v (%q)",
						run, span, interval, step, fn, got, why, want, wantWhy)
				}
			}
		}
	}
}
