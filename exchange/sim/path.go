package sim

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/shopspring/decimal"
)

// Bounds of the index machinery.
const (
	// maxHistory is how many samples an index keeps by default (18 hours
	// at 1 s); Config.HistoryLimit changes it.
	maxHistory = 1 << 16
	// maxStepsPerAdvance bounds the work of one Step per index; a longer
	// jump draws the walk's older part in one step and keeps no samples
	// of it.
	maxStepsPerAdvance = maxHistory
)

// sample is one point of an index's history.
type sample struct {
	ms    int64 // milliseconds since the epoch
	price decimal.Decimal
}

// index is one index price and the path that moves it. Its price is sampled
// on a grid of Interval from the origin (the exchange's start), so the price
// at a time depends on the seed and that time only, not on how often Step
// is called.
type index struct {
	name     string
	points   []PricePoint
	walk     *WalkSpec
	interval time.Duration
	scale    int32
	origin   time.Time

	k      int64   // last grid step applied
	level  float64 // the walk's unrounded price
	rng    *rand.Rand
	manual bool // set directly: the path no longer moves it

	price   decimal.Decimal
	first   decimal.Decimal // price at the origin, the base of indexValue
	history []sample
	limit   int // most samples history keeps
}

func newIndex(spec IndexSpec, seed int64, origin time.Time, limit int) *index {
	ix := &index{
		limit:    limit,
		name:     spec.Name,
		points:   spec.Points,
		walk:     spec.Walk,
		interval: time.Duration(spec.Interval),
		scale:    int32(*spec.Scale),
		origin:   origin,
	}
	if ix.walk != nil {
		h := fnv.New64a()
		h.Write([]byte(spec.Name))
		ix.rng = rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
		ix.level = ix.walk.Start.InexactFloat64()
		ix.price = ix.walk.Start.Round(ix.scale)
	} else {
		ix.price = ix.scripted(0)
	}
	ix.first = ix.price
	ix.record(origin, ix.price)
	return ix
}

// newManualIndex is an index with no path, created by SetIndexPrice.
func newManualIndex(name string, price decimal.Decimal, at time.Time, limit int) *index {
	ix := &index{name: name, manual: true, interval: time.Second, origin: at, price: price, first: price, limit: limit}
	ix.record(at, price)
	return ix
}

// scripted is the scripted path's price at offset d from the origin.
func (ix *index) scripted(d time.Duration) decimal.Decimal {
	pts := ix.points
	i := sort.Search(len(pts), func(i int) bool { return time.Duration(pts[i].At) > d })
	switch {
	case i == 0:
		return pts[0].Price.Round(ix.scale)
	case i == len(pts):
		return pts[len(pts)-1].Price.Round(ix.scale)
	}
	a, b := pts[i-1], pts[i]
	frac := decimal.NewFromInt(int64(d-time.Duration(a.At))).
		DivRound(decimal.NewFromInt(int64(b.At-a.At)), 16)
	return a.Price.Add(b.Price.Sub(a.Price).Mul(frac)).Round(ix.scale)
}

// stepWalk moves the walk by dt seconds.
func (ix *index) stepWalk(dt float64) {
	w := ix.walk
	z := ix.rng.NormFloat64()
	ix.level *= math.Exp((w.Drift-w.Volatility*w.Volatility/2)*dt + w.Volatility*math.Sqrt(dt)*z)
	if floor := math.Pow(10, -float64(ix.scale)); ix.level < floor || math.IsNaN(ix.level) {
		ix.level = floor
	}
}

// advance moves the path to the last grid point at or before now and
// records the samples on the way. It reports whether the price changed.
func (ix *index) advance(now time.Time) bool {
	if ix.manual || now.Before(ix.origin) {
		return false
	}
	target := int64(now.Sub(ix.origin) / ix.interval)
	if target <= ix.k {
		return false
	}
	before := ix.price
	dt := ix.interval.Seconds()
	if ix.walk != nil {
		if skip := target - ix.k - maxStepsPerAdvance; skip > 0 {
			ix.stepWalk(float64(skip) * dt)
			ix.k += skip
		}
		for ix.k < target {
			ix.k++
			ix.stepWalk(dt)
			ix.price = decimal.NewFromFloat(ix.level).Round(ix.scale)
			ix.record(ix.origin.Add(time.Duration(ix.k)*ix.interval), ix.price)
		}
	} else {
		first := max(ix.k+1, target-maxStepsPerAdvance+1)
		for k := first; k <= target; k++ {
			off := time.Duration(k) * ix.interval
			ix.price = ix.scripted(off)
			ix.record(ix.origin.Add(off), ix.price)
		}
		ix.k = target
	}
	return !ix.price.Equal(before)
}

// set fixes the price directly and detaches the index from its path.
func (ix *index) set(price decimal.Decimal, at time.Time) {
	ix.manual = true
	ix.price = price
	ix.record(at, price)
}

func (ix *index) record(at time.Time, price decimal.Decimal) {
	ms := at.UnixMilli()
	if n := len(ix.history); n > 0 && ix.history[n-1].ms >= ms {
		// A second price in the same millisecond (or a clock that went
		// back) replaces the last sample, keeping history ordered.
		ix.history[n-1].price = price
		return
	}
	if len(ix.history) >= ix.limit {
		// Dropping a quarter at once keeps the copying amortized.
		keep := ix.limit * 3 / 4
		ix.history = append(ix.history[:0], ix.history[len(ix.history)-keep:]...)
	}
	ix.history = append(ix.history, sample{ms: ms, price: price})
}

// between returns the samples with from ≤ ms ≤ to, at most limit of them:
// the earliest when fromSet (so a caller pages forward with from), else the
// latest.
func between(h []sample, from, to int64, limit int, fromSet bool) []sample {
	lo := sort.Search(len(h), func(i int) bool { return h[i].ms >= from })
	hi := sort.Search(len(h), func(i int) bool { return h[i].ms > to })
	if lo >= hi {
		return nil
	}
	out := h[lo:hi]
	if len(out) > limit {
		if fromSet {
			out = out[:limit]
		} else {
			out = out[len(out)-limit:]
		}
	}
	return out
}
