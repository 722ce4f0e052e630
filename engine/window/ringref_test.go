package window

import (
	"time"
)

// refRing is the ring as it was before it kept its newest and oldest
// slots in its header: the reference the ring must agree with, value for
// value.
type refRing struct {
	span, width, maxGap time.Duration
	slots               []slot // circular, oldest at start
	start, n            int
	// The window's extremes.
	extremeCache
}

// newRefRing sizes a ring for span at the given tick interval.
func newRefRing(span, interval time.Duration) *refRing {
	width := max(interval, span/maxSlots)
	size := int(span/width) + 2
	// A stretch without samples longer than two ticks, and than a quarter
	// of the window, is not covered: missed ticks, a restart. (A backtest
	// of one-minute bars still covers a five-minute window.)
	return &refRing{span: span, width: width, maxGap: max(2*interval, 2*width, span/4), slots: make([]slot, min(size, maxSlots+2))}
}

func (r *refRing) at(i int) *slot { return &r.slots[(r.start+i)%len(r.slots)] }

// push adds the value v at t. A sample older than the newest is ignored (a
// clock that jumped back); one within the newest bucket updates it.
func (r *refRing) push(t time.Time, v float64) {
	ns := t.UnixNano()
	if r.n > 0 {
		last := r.at(r.n - 1)
		if ns < last.t {
			return
		}
		if ns-last.t < int64(r.width) {
			last.min, last.max = min(last.min, v), max(last.max, v)
			r.extend(v, last.t)
			return
		}
	}
	r.extend(v, ns)
	s := slot{t: ns, first: v, min: v, max: v}
	if r.n > 0 {
		last := r.at(r.n - 1)
		s.gaps = last.gaps
		if gap := ns - last.t; gap > int64(r.maxGap) {
			s.gaps += gap
		}
	}
	if r.n == len(r.slots) {
		r.start = (r.start + 1) % len(r.slots)
		r.n--
	}
	*r.at(r.n) = s
	r.n++
}

func (r *refRing) count() int { return r.n }

// extremes are the lowest and highest values of the slots from i on.
func (r *refRing) extremes(i int, from int64) (float64, float64) {
	return r.extremeCache.extremes(r, i, from)
}

// value computes fn over the window ending at now, whose current value
// is cur; why says why there is none.
func (r *refRing) value(fn string, now time.Time, cur float64) (float64, string) {
	ns := now.UnixNano()
	from := ns - int64(r.span)
	// The oldest slot in the window.
	i := 0
	for i < r.n && r.at(i).t < from {
		i++
	}
	if i == r.n {
		return 0, whyHalfEmpty
	}
	oldest, newest := r.at(i), r.at(r.n-1)
	return apply(fn, ns, r.span, r.maxGap, oldest, newest, cur, r, i)
}
