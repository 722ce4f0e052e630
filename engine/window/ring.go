// Package window holds the rules' functions over the recent past
// (change, max_over_time, rate, drawdown, timeToLiquidation, …): one ring
// of samples per windowed term and position, or the account, filled by the
// guard's own ticks so that a replay fills it exactly as the daemon does,
// and warmed at start from the exchange's index history. Its Store owns
// the rings' layout for the rule set in force and the values of one tick.
package window

import (
	"math"
	"time"

	"github.com/riskguard/riskguard/rules"
)

// maxSlots bounds a window's ring: a window longer than maxSlots intervals
// keeps buckets of span/maxSlots, each with its first, lowest and highest
// value. A ring is at most maxSlots × 40 bytes (10 KiB), per
// position and window.
const maxSlots = 256

// Reasons a windowed term has no value.
const (
	whyHalfEmpty   = "less than half the window has data"
	whyZeroBase    = "the value at the start of the window is 0"
	whyNoPeak      = "the window's peak is not positive"
	whyNotShrink   = "liquidationDistance is not shrinking"
	whyNoValue     = "no value now"
	whyUnknownFunc = "unknown function"
)

// slot is one sample, or one bucket of samples, of a series.
type slot struct {
	t               int64 // unix nanoseconds of the bucket's first sample
	first, min, max float64
	// gaps is the uncovered time, in nanoseconds, from the ring's first
	// sample ever to this slot's first sample: a stretch between two
	// samples longer than the ring's maxGap (missed ticks, a restart)
	// counts as uncovered.
	gaps int64
}

// ring holds a series' recent samples for one window: the engine's own
// ticks fill it, so a replay fills it exactly as the daemon did.
//
// A tick reads a ring's newest slot and the oldest in the window, and a
// thousand positions' rings are far apart in memory: the header keeps a
// copy of both (cur, old), so that a push and a value read no slot unless
// the window's start moved to another one.
type ring struct {
	span, width, maxGap time.Duration
	slots               []slot // circular, oldest at start
	start, n            int
	// dropped is how many slots left the front since the ring began: the
	// slot at i is the (dropped+i)-th ever.
	dropped int
	// cur is a copy of the newest slot (n > 0), written through.
	cur slot
	// old is a copy of the oldest slot in the window as value last found
	// it, the (oldSeq)-th ever, for a window starting at oldFrom; oldOK
	// when it is set.
	old     slot
	oldSeq  int
	oldFrom int64
	oldOK   bool
	// The window's extremes.
	extremeCache
}

// newRing sizes a ring for span at the given tick interval.
func newRing(span, interval time.Duration) *ring {
	width := max(interval, span/maxSlots)
	size := int(span/width) + 2
	// A stretch without samples longer than two ticks, and than a quarter
	// of the window, is not covered: missed ticks, a restart. (A backtest
	// of one-minute bars still covers a five-minute window.)
	return &ring{span: span, width: width, maxGap: max(2*interval, 2*width, span/4), slots: make([]slot, min(size, maxSlots+2))}
}

func (r *ring) at(i int) *slot {
	j := r.start + i
	if j >= len(r.slots) {
		j -= len(r.slots)
	}
	return &r.slots[j]
}

// push adds the value v at t. A sample older than the newest is ignored (a
// clock that jumped back); one within the newest bucket updates it.
func (r *ring) push(t time.Time, v float64) {
	ns := t.UnixNano()
	if r.n > 0 {
		last := &r.cur
		if ns < last.t {
			return
		}
		if ns-last.t < int64(r.width) {
			last.min, last.max = min(last.min, v), max(last.max, v)
			r.extend(v, last.t)
			*r.at(r.n - 1) = *last
			return
		}
	}
	r.extend(v, ns)
	s := slot{t: ns, first: v, min: v, max: v}
	if r.n > 0 {
		s.gaps = r.cur.gaps
		if gap := ns - r.cur.t; gap > int64(r.maxGap) {
			s.gaps += gap
		}
	}
	if r.n == len(r.slots) {
		r.start++
		if r.start == len(r.slots) {
			r.start = 0
		}
		r.n--
		r.dropped++
	}
	*r.at(r.n) = s
	r.n++
	r.cur = s
}

// extremeCache is a window's lowest and highest values when ext, with the
// start of the slot that holds each: valid until that slot leaves the
// window.
type extremeCache struct {
	lo, hi     float64
	loAt, hiAt int64
	ext        bool
}

// extend keeps the cached extremes with a new value in the slot at t.
func (c *extremeCache) extend(v float64, t int64) {
	if !c.ext {
		return
	}
	if v <= c.lo {
		c.lo, c.loAt = v, t
	}
	if v >= c.hi {
		c.hi, c.hiAt = v, t
	}
}

// slotter is a ring's slots, oldest first.
type slotter interface {
	at(i int) *slot
	count() int
}

// extremes are the lowest and highest values of s's slots from i on,
// rescanned only when a cached extreme has left the window from the unix
// nanoseconds given.
func (c *extremeCache) extremes(s slotter, i int, from int64) (float64, float64) {
	if c.ext && c.loAt >= from && c.hiAt >= from {
		return c.lo, c.hi
	}
	c.lo, c.hi = math.Inf(1), math.Inf(-1)
	for j := i; j < s.count(); j++ {
		sl := s.at(j)
		if sl.min <= c.lo {
			c.lo, c.loAt = sl.min, sl.t
		}
		if sl.max >= c.hi {
			c.hi, c.hiAt = sl.max, sl.t
		}
	}
	c.ext = true
	return c.lo, c.hi
}

func (r *ring) count() int { return r.n }

// extremes are the lowest and highest values of the slots from i on.
func (r *ring) extremes(i int, from int64) (float64, float64) {
	return r.extremeCache.extremes(r, i, from)
}

// oldest is the oldest slot in the window that starts at from, and its
// place; nil when none is. It starts from the one found last when the
// window has not moved back since: the slots before it are older still.
func (r *ring) oldest(from int64) (int, *slot) {
	i := 0
	if r.oldOK && from >= r.oldFrom && r.oldSeq >= r.dropped {
		i = r.oldSeq - r.dropped
		if r.old.t >= from {
			r.oldFrom = from
			return i, &r.old
		}
		i++ // it has left the window
	}
	for i < r.n && r.at(i).t < from {
		i++
	}
	if i == r.n {
		r.oldOK = false
		return i, nil
	}
	// The newest slot's bucket may still change; its start, first value
	// and gaps, which are what an oldest slot is read for, do not.
	r.old, r.oldSeq, r.oldFrom, r.oldOK = *r.at(i), r.dropped+i, from, true
	return i, &r.old
}

// value computes fn over the window ending at now, whose current value
// is cur; why says why there is none.
func (r *ring) value(fn string, now time.Time, cur float64) (float64, string) {
	ns := now.UnixNano()
	from := ns - int64(r.span)
	i, oldest := r.oldest(from)
	if oldest == nil {
		return 0, whyHalfEmpty
	}
	newest := &r.cur
	return apply(fn, ns, r.span, r.maxGap, oldest, newest, cur, r, i)
}

// extremer gives the lowest and highest values of a ring's slots from
// the i-th on, in the window from the unix nanoseconds given.
type extremer interface {
	extremes(i int, from int64) (float64, float64)
}

// apply computes fn at ns (unix nanoseconds) over a window of span whose
// oldest slot, the i-th of x, and newest slot are given, with the current
// value cur; a stretch without samples longer than maxGap is uncovered.
// why says why there is no value. (An interface, not a closure: a
// closure passed here would be allocated at every call.)
func apply(fn string, ns int64, span, maxGap time.Duration, oldest, newest *slot, cur float64, x extremer, i int) (float64, string) {
	uncovered := newest.gaps - oldest.gaps
	if tail := ns - newest.t; tail > int64(maxGap) {
		uncovered += tail
	}
	if covered := ns - oldest.t - uncovered; covered*2 < int64(span) {
		return 0, whyHalfEmpty
	}
	switch fn {
	case rules.FnChange:
		if oldest.first == 0 {
			return 0, whyZeroBase
		}
		return (cur - oldest.first) / oldest.first, ""
	case rules.FnRate, rules.FnTimeToLiquidation:
		dt := time.Duration(ns - oldest.t).Seconds()
		if dt <= 0 {
			return 0, whyHalfEmpty
		}
		rate := (cur - oldest.first) / dt
		if fn == rules.FnRate {
			return rate, ""
		}
		if rate >= 0 {
			return 0, whyNotShrink
		}
		return max(cur, 0) / -rate, ""
	case rules.FnMinOverTime, rules.FnMaxOverTime, rules.FnDrawdown:
		lo, hi := x.extremes(i, ns-int64(span))
		lo, hi = min(lo, cur), max(hi, cur)
		switch fn {
		case rules.FnMinOverTime:
			return lo, ""
		case rules.FnMaxOverTime:
			return hi, ""
		}
		if hi <= 0 {
			return 0, whyNoPeak
		}
		return (hi - cur) / hi, ""
	}
	return 0, whyUnknownFunc
}
