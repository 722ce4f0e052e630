package engine

import (
	"context"
	"math"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// maxSlots bounds a window's ring: a window longer than maxSlots intervals
// keeps buckets of span/maxSlots, each with its first, last, lowest and
// highest value. A ring is at most maxSlots × 48 bytes (12 KiB), per
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
	t                     int64 // unix nanoseconds of the bucket's first sample
	first, last, min, max float64
	// gaps is the uncovered time, in nanoseconds, from the ring's first
	// sample ever to this slot's first sample: a stretch between two
	// samples longer than the ring's maxGap (missed ticks, a restart)
	// counts as uncovered.
	gaps int64
}

// ring holds a series' recent samples for one window: the engine's own
// ticks fill it, so a replay fills it exactly as the daemon did.
type ring struct {
	span, width, maxGap time.Duration
	slots               []slot // circular, oldest at start
	start, n            int
	// lo and hi are the window's extremes when ext, with the start of
	// the slot that holds each: valid until that slot leaves the window.
	lo, hi     float64
	loAt, hiAt int64
	ext        bool
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

func (r *ring) at(i int) *slot { return &r.slots[(r.start+i)%len(r.slots)] }

// push adds the value v at t. A sample older than the newest is ignored (a
// clock that jumped back); one within the newest bucket updates it.
func (r *ring) push(t time.Time, v float64) {
	ns := t.UnixNano()
	if r.n > 0 {
		last := r.at(r.n - 1)
		if ns < last.t {
			return
		}
		if ns-last.t < int64(r.width) {
			last.last = v
			last.min, last.max = min(last.min, v), max(last.max, v)
			r.extend(v, last.t)
			return
		}
	}
	r.extend(v, ns)
	s := slot{t: ns, first: v, last: v, min: v, max: v}
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

// extend keeps the cached extremes with a new value in the slot at t.
func (r *ring) extend(v float64, t int64) {
	if !r.ext {
		return
	}
	if v <= r.lo {
		r.lo, r.loAt = v, t
	}
	if v >= r.hi {
		r.hi, r.hiAt = v, t
	}
}

// extremes are the lowest and highest values of the slots from i on,
// rescanned only when a cached extreme has left the window.
func (r *ring) extremes(i int, from int64) (float64, float64) {
	if r.ext && r.loAt >= from && r.hiAt >= from {
		return r.lo, r.hi
	}
	r.lo, r.hi = math.Inf(1), math.Inf(-1)
	for j := i; j < r.n; j++ {
		s := r.at(j)
		if s.min <= r.lo {
			r.lo, r.loAt = s.min, s.t
		}
		if s.max >= r.hi {
			r.hi, r.hiAt = s.max, s.t
		}
	}
	r.ext = true
	return r.lo, r.hi
}

// value computes fn over the window ending at now, whose current value
// is cur; why says why there is none.
func (r *ring) value(fn string, now time.Time, cur float64) (float64, string) {
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
	uncovered := newest.gaps - oldest.gaps
	if tail := ns - newest.t; tail > int64(r.maxGap) {
		uncovered += tail
	}
	if covered := ns - oldest.t - uncovered; covered*2 < int64(r.span) {
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
		lo, hi := r.extremes(i, from)
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

// windowSet is the rule set's windowed terms, deduplicated: the engine
// keeps one ring per term and position (or one for the account).
type windowSet struct {
	specs []rules.Window
	// byRule maps each rule's j-th window (Env.SetWindow) to a spec.
	byRule [][]int
	// position and account list the specs of each kind.
	position, account []int
	// needAccount: some rule reads the account (or is an account rule).
	needAccount bool
}

func newWindowSet(set *rules.Set) windowSet {
	var ws windowSet
	at := map[string]int{}
	ws.byRule = make([][]int, len(set.Rules))
	for ri, r := range set.Rules {
		if r.ReadsAccount() || r.Account() {
			ws.needAccount = true
		}
		for _, a := range r.Actions {
			if a.ReadsAccount() {
				ws.needAccount = true
			}
		}
		for _, w := range r.Windows() {
			g, ok := at[w.Key()]
			if !ok {
				g = len(ws.specs)
				at[w.Key()] = g
				ws.specs = append(ws.specs, w)
				if w.Account() {
					ws.account = append(ws.account, g)
					ws.needAccount = true
				} else {
					ws.position = append(ws.position, g)
				}
			}
			ws.byRule[ri] = append(ws.byRule[ri], g)
		}
	}
	return ws
}

// remap returns rings, aligned with old's specs, aligned with ws's: a
// term kept by a reload keeps its samples.
func (ws *windowSet) remap(old *windowSet, rings []*ring) []*ring {
	if len(rings) == 0 {
		return nil
	}
	byKey := make(map[string]*ring, len(rings))
	for g, r := range rings {
		if g < len(old.specs) && r != nil {
			byKey[old.specs[g].Key()] = r
		}
	}
	out := make([]*ring, len(ws.specs))
	for g, w := range ws.specs {
		out[g] = byKey[w.Key()]
	}
	return out
}

// windowValues are the values of the specs for one position (or the
// account) at one tick.
type windowValues struct {
	v   []float64
	why []string
}

func (wv *windowValues) reset(n int) {
	if cap(wv.v) < n {
		wv.v, wv.why = make([]float64, n), make([]string, n)
	}
	wv.v, wv.why = wv.v[:n], wv.why[:n]
}

// sample pushes env's current value of each spec in gs into rings
// (creating them as needed) and computes every spec's value. A series
// without a value now is not pushed, and its terms have none.
func (e *Engine) sample(ctx context.Context, now time.Time, env *rules.Env, gs []int, rings []*ring, index string, out *windowValues) []*ring {
	if len(rings) < len(e.win.specs) {
		rings = append(rings, make([]*ring, len(e.win.specs)-len(rings))...)
	}
	for _, g := range gs {
		w := e.win.specs[g]
		cur, ok := w.Read(env)
		if !ok {
			out.v[g], out.why[g] = 0, whyNoValue
			continue
		}
		r := rings[g]
		if r == nil {
			r = newRing(w.Span, e.cfg.Interval)
			if w.Series == "indexPrice" && index != "" {
				e.warm(ctx, now, r, index)
			}
			rings[g] = r
		}
		r.push(now, cur)
		out.v[g], out.why[g] = r.value(w.Fn, now, cur)
	}
	return rings
}

// setWindows sets rule ri's windowed terms in env from the values.
func (e *Engine) setWindows(ri int, env *rules.Env, pos, acct *windowValues) {
	for j, g := range e.win.byRule[ri] {
		src := pos
		if e.win.specs[g].Account() {
			src = acct
		}
		env.SetWindow(j, src.v[g], src.why[g])
	}
}

// IndexHistoryReader is implemented by a Reader that can read an index's
// past prices (GET /v1/market/indexes/{name}); the engine warms the
// windows over indexPrice from it, so that a restart does not blind a
// velocity rule.
type IndexHistoryReader interface {
	IndexHistory(ctx context.Context, name string, q url.Values) ([][]decimal.Decimal, error)
}

// warm fills a new indexPrice ring with the index's history over its span,
// read once per index name, span and tick.
func (e *Engine) warm(ctx context.Context, now time.Time, r *ring, index string) {
	hr, ok := e.reader.(IndexHistoryReader)
	if !ok {
		return
	}
	key := index + " " + r.span.String()
	hist, ok := e.history[key]
	if !ok || !hist.at.Equal(now) {
		q := url.Values{}
		q.Set("from", strconv.FormatInt(now.Add(-r.span).UnixMilli(), 10))
		q.Set("to", strconv.FormatInt(now.UnixMilli(), 10))
		q.Set("limit", "5000")
		rows, err := hr.IndexHistory(ctx, index, q)
		if err != nil {
			e.log.Warn("index history not read: its windows start empty", "index", index, "err", err)
		}
		hist = indexHistory{at: now, rows: rows}
		if len(e.history) > 256 {
			clear(e.history) // one tick's reads are all it is for
		}
		e.history[key] = hist
	}
	for _, row := range hist.rows {
		if len(row) < 2 {
			continue
		}
		t := time.UnixMilli(row[0].IntPart())
		if t.Before(now.Add(-r.span)) || !t.Before(now) {
			continue
		}
		r.push(t, row[1].InexactFloat64())
	}
}

// indexHistory is one read of an index's history.
type indexHistory struct {
	at   time.Time
	rows [][]decimal.Decimal
}

var _ IndexHistoryReader = (*exchange.Client)(nil)

// bindWindows builds the set's windowed terms, keeping the samples of the
// terms the previous set had too. The caller holds tick.
func (e *Engine) bindWindows(set *rules.Set) {
	old := e.win
	e.win = newWindowSet(set)
	e.hasAccountRules = slices.ContainsFunc(set.Rules, (*rules.Rule).Account)
	e.acctRings = e.win.remap(&old, e.acctRings)
	for _, ps := range e.positions {
		ps.rings = e.win.remap(&old, ps.rings)
	}
}
