package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/window"
	"github.com/riskguard/riskguard/rules"
)

// volatility follows each index's recent returns for the stress grid
// (margin.Stress): an exponentially weighted mean of the squared log
// returns per second between reads, whose weight halves every
// volHalfLife, so that a market turning wild is seen within the hour and
// a quiet day fades. Reads further apart than volMaxGap (a pause, a
// restart, a clock jump) are not counted as a return.
type volatility struct {
	ix map[string]*volIndex
	// last is when the indexes were last sampled: a tick within
	// volSample of it samples nothing (the grid needs σ over an hour,
	// not every tick's return, and a tick of a thousand positions should
	// not pay for it).
	last time.Time
	// cold lists the indexes first seen whose history has not been read
	// yet (warm), in the order seen.
	cold []string
	// byRow is each row's index at the last sample, by the row's place:
	// a steady account lists the same positions in the same order, and
	// comparing a name costs less than looking it up in ix.
	byRow []volRow
	// step is the last return's interval and weight (add), kept for the
	// next index read over the same interval: the indexes a tick samples
	// were all last sampled at the same tick.
	step volStep
}

// volRow is the index of a row at the last sample.
type volRow struct {
	name string
	x    *volIndex
}

// volStep is a return's interval from one read to the next, and its
// weight.
type volStep struct {
	from, to time.Time
	dt       time.Duration
	w        float64
	known    bool
}

// of is the interval from from to to and its weight in the weighted mean:
// the ones kept when they are of the same two times (the same values,
// worked out from the same fields), else worked out and kept. A nil c
// keeps nothing.
func (c *volStep) of(from, to time.Time) (time.Duration, float64) {
	if c != nil && c.known && c.from == from && c.to == to {
		return c.dt, c.w
	}
	dt := to.Sub(from)
	w := 1 - math.Exp2(-dt.Seconds()/volHalfLife.Seconds())
	if c != nil {
		*c = volStep{from: from, to: to, dt: dt, w: w, known: true}
	}
	return dt, w
}

// volIndex is one index's figures.
type volIndex struct {
	price float64
	at    time.Time
	// first and firstPrice are the first read, where the history ends.
	first      time.Time
	firstPrice float64
	varPerSec  float64 // the weighted mean of r²/Δt
	weight     float64 // the sum of the weights so far, for the start
	n          int     // returns counted
	// recent are the prices sampled within the last volRecentSpan, oldest
	// first: what fast reads; a part of buf (volRecentCap long).
	recent []volPrice
	buf    []volPrice
}

// volPrice is an index price sampled at a time.
type volPrice struct {
	at    time.Time
	price float64
}

// volRecentSpan is how long the sampled prices are kept for fast: the
// longest engine.fast_move_window. volRecentCap is how many samples that
// is at one every volSample (and a spare): the list is made that large
// once, so that a tick's sample never allocates.
const (
	volRecentSpan = time.Hour
	volRecentCap  = int(volRecentSpan/volSample) + 2
)

const (
	volSample   = 10 * time.Second
	volHalfLife = time.Hour
	volMaxGap   = 10 * time.Minute
	// volMinReturns is how many returns (one per volSample at most) an
	// index needs before its own σ is used; until then σ is the floor.
	volMinReturns = 30
	// volWarmSpan is how much of an index's history is read when it is
	// first seen: a half-life, 360 returns at one every volSample, and
	// one page of the exchange's history at a row a second (5,000 rows);
	// volWarmPerTick bounds the indexes read in one tick, so that the
	// reads do not drain the rate limit the next tick's reads need (a
	// start with hundreds of indexes spreads them over as many ticks,
	// each σ the floor until its own are read).
	volWarmSpan    = volHalfLife
	volWarmPerTick = 1
	// volWarmLimit bounds a history read within a tick: a page of an
	// hour comes back in tens of milliseconds, and one stalled read
	// delays the next tick by this much at most, once per index (not the
	// interval: a fast lane's 250 ms would give up reads that are only
	// slow, and σ would stay the floor).
	volWarmLimit = time.Second
	// volMaxReturn bounds a return's log move (about ±22%): one bad print
	// in the history or the index feed must not make every move likely
	// for hours (a print of 1e9 among prices of 100 made σ thousands of
	// percent); a real move that large counts as one of this size. It is
	// not bounded by the index's own σ: a wick of 1% every 10 s must raise
	// σ as fast as it comes.
	volMaxReturn = 0.2
)

// observe takes the tick's index prices of the open positions' indexes,
// at most every volSample.
func (v *volatility) observe(now time.Time, rows []market.Row) {
	if !v.last.IsZero() && now.Sub(v.last) < volSample && !now.Before(v.last) {
		return
	}
	v.last = now
	if v.ix == nil {
		v.ix = map[string]*volIndex{}
	}
	// A sample older than cutoff is older than volRecentSpan: the same
	// test as now.Sub(at) > volRecentSpan, made once a tick.
	cutoff := now.Add(-volRecentSpan)
	if len(v.byRow) < len(rows) {
		v.byRow = append(v.byRow, make([]volRow, len(rows)-len(v.byRow))...)
	}
	for i := range rows {
		r := &rows[i]
		if !r.Open || !r.HasIndex || !(r.IndexF > 0) || math.IsInf(r.IndexF, 0) {
			continue
		}
		var x *volIndex
		if c := &v.byRow[i]; c.x != nil && c.name == r.IndexName {
			x = c.x
		} else {
			x = v.ix[r.IndexName]
			*c = volRow{name: r.IndexName, x: x}
		}
		if x == nil {
			x := &volIndex{price: r.IndexF, at: now, first: now, firstPrice: r.IndexF, buf: make([]volPrice, volRecentCap)}
			x.recent = append(x.buf[:0], volPrice{now, r.IndexF})
			v.ix[r.IndexName] = x
			v.byRow[i] = volRow{name: r.IndexName, x: x}
			v.cold = append(v.cold, r.IndexName)
			continue
		}
		if x.at.Before(now) {
			x.keep(now, cutoff, r.IndexF)
		}
		x.add(now, r.IndexF, &v.step) // the same read twice (two positions on one index) adds nothing
	}
}

// keep samples price at now for fast, forgetting what is older than
// volRecentSpan (and everything after a clock that ran back). The samples
// forgotten are sliced off the front, and the live ones moved back to the
// start of the list only when its end is reached: a sample a minute kept
// for an hour moved 60 samples at every one.
//
// cutoff is now less volRecentSpan: a sample before it is older than
// volRecentSpan.
func (x *volIndex) keep(now, cutoff time.Time, price float64) {
	drop := 0
	for drop < len(x.recent) && (x.recent[drop].at.Before(cutoff) || x.recent[drop].at.After(now)) {
		drop++
	}
	if drop == 0 && len(x.recent) == volRecentCap {
		drop = 1 // more samples than volRecentCap: the oldest goes
	}
	x.recent = x.recent[drop:]
	if len(x.recent) == cap(x.recent) {
		// The end of the list: the live samples back to its start.
		x.recent = x.buf[:copy(x.buf, x.recent)]
	}
	x.recent = append(x.recent, volPrice{now, price})
}

// fast says whether the index is in a fast move at now, its price then
// being price: the prices sampled within window and price span at least
// span (highest / lowest − 1). It says how, e.g. "BTC moved 4.20% within
// 5m (40000 → 38388)", or "" when it is not, or nothing was sampled
// within the window (no data is no fast move: the other bounds still
// hold).
func (v *volatility) fast(index string, now time.Time, price float64, window time.Duration, span float64) string {
	x := v.ix[index]
	if x == nil || !(price > 0) || !(span > 0) {
		return ""
	}
	hi, lo := price, price
	var hiAt, loAt time.Time = now, now
	for _, p := range x.recent {
		if now.Sub(p.at) > window || p.at.After(now) {
			continue
		}
		if p.price > hi {
			hi, hiAt = p.price, p.at
		}
		if p.price < lo {
			lo, loAt = p.price, p.at
		}
	}
	if !(hi/lo-1 >= span) {
		return ""
	}
	from, to := lo, hi
	if hiAt.Before(loAt) {
		from, to = hi, lo
	}
	return fmt.Sprintf("%s moved %.2f%% within %s (%s → %s)", index, (hi/lo-1)*100, rules.FormatSpan(window),
		strconv.FormatFloat(from, 'f', -1, 64), strconv.FormatFloat(to, 'f', -1, 64))
}

// add counts the return from the last price to price at at: weighed in
// when at most volMaxGap after it (its log move within ±volMaxReturn),
// skipped when not after it (the same read, or a clock that ran back).
// step keeps the interval and its weight for the next index read over
// the same one (nil: nothing kept).
func (x *volIndex) add(at time.Time, price float64, step *volStep) {
	dt, w := step.of(x.at, at)
	if dt <= 0 {
		return
	}
	if dt <= volMaxGap {
		ret := math.Max(-volMaxReturn, math.Min(volMaxReturn, math.Log(price/x.price)))
		x.weight = x.weight*(1-w) + w
		x.varPerSec = x.varPerSec*(1-w) + w*(ret*ret/dt.Seconds())
		x.n++
	}
	x.price, x.at = price, at
}

// seed starts index's figures from its history (oldest first, at our
// time): the returns between samples at least volSample apart before the
// first read, then to the first read, as observe would have counted them
// had it been running; the returns counted since the first read are kept
// on top, the history's weighed down by the time they span. Samples that
// are not prices, or not before the first read, are skipped.
func (v *volatility) seed(index string, hist []window.Sample) {
	x := v.ix[index]
	if x == nil {
		return
	}
	var h *volIndex
	for _, s := range hist {
		if !(s.Price > 0) || math.IsInf(s.Price, 0) || !s.At.Before(x.first) {
			continue
		}
		if h == nil {
			h = &volIndex{price: s.Price, at: s.At}
			continue
		}
		if s.At.Sub(h.at) >= volSample {
			h.add(s.At, s.Price, nil)
		}
	}
	if h == nil {
		return
	}
	h.add(x.first, x.firstPrice, nil)
	decay := math.Exp2(-x.at.Sub(x.first).Seconds() / volHalfLife.Seconds())
	x.weight += h.weight * decay
	x.varPerSec += h.varPerSec * decay
	x.n += h.n
}

// sigma is the index's σ over horizon as a fraction of its price: its
// recent returns' volatility scaled by √horizon, at least floor (and the
// floor alone until the index has volMinReturns returns).
func (v *volatility) sigma(index string, horizon time.Duration, floor float64) float64 {
	return v.ix[index].sigma(horizon, floor)
}

// sigmaAt is sigma of index, the index of the row at place i of the view
// observe last sampled: looked up by the row's place where observe kept
// it (byRow; an index's entry, once made, is never replaced), else by
// name. The tick's account asks it of every row.
func (v *volatility) sigmaAt(i int, index string, horizon time.Duration, floor float64) float64 {
	if i < len(v.byRow) {
		if c := &v.byRow[i]; c.x != nil && c.name == index {
			return c.x.sigma(horizon, floor)
		}
	}
	return v.sigma(index, horizon, floor)
}

// sigma is the index's σ over horizon (volatility.sigma); x nil: an index
// not seen, the floor.
func (x *volIndex) sigma(horizon time.Duration, floor float64) float64 {
	if x == nil || x.n < volMinReturns || !(x.weight > 0) {
		return floor
	}
	s := math.Sqrt(x.varPerSec / x.weight * horizon.Seconds())
	if !(s > floor) || math.IsNaN(s) {
		return floor
	}
	return s
}

// History reads an index's prices over the span that ends at now, oldest
// first (window.Store.IndexHistory); window.ErrNoHistory when it has no
// reader of the exchange's history.
type History interface {
	IndexHistory(ctx context.Context, index string, now time.Time, span time.Duration) ([]window.Sample, error)
}

// Warm reads, after the tick at now has decided, the history of an index
// first seen (warm, within volWarmLimit).
func (m *Watch) Warm(ctx context.Context, now time.Time) { m.warm(ctx, now, volWarmLimit) }

// warm reads the history of up to volWarmPerTick indexes first
// seen and not read yet (volatility.cold), after the tick has decided, so
// that σ is the market's own from a start's first ticks instead of the
// floor until volMinReturns returns are watched. A read that fails is
// said and not tried again: the index keeps the floor until its own
// returns are enough. Without a history reader (a replay, an adapter
// without the call) nothing is read.
//
// Within a tick a read may take at most limit (0: no bound): a history
// call the exchange stalls must not hold up the next tick's reads, which
// are what the guard's reaction time is made of.
func (m *Watch) warm(ctx context.Context, now time.Time, limit time.Duration) {
	v := &m.vol
	if m.hist == nil {
		v.cold = v.cold[:0]
		return
	}
	n := min(len(v.cold), volWarmPerTick)
	for _, index := range v.cold[:n] {
		rctx, cancel := ctx, context.CancelFunc(func() {})
		if limit > 0 {
			rctx, cancel = context.WithTimeout(ctx, limit)
		}
		hist, err := m.hist.IndexHistory(rctx, index, now, volWarmSpan)
		cancel()
		switch {
		case errors.Is(err, window.ErrNoHistory):
			v.cold = v.cold[:0]
			return
		case err != nil:
			m.log.Warn("index history for the stress grid's σ not read in full: σ starts from the rows read", "index", index, "rows", len(hist), "err", err)
		}
		v.seed(index, hist)
	}
	v.cold = append(v.cold[:0], v.cold[n:]...)
}

// WarmForCheck observes the view's indexes at now and reads the history of every
// one (riskguard check --exchange watches no returns of its own), and
// says where the σ come from: "σ from the last 1h of each index's history
// (BTC 1079 returns, SOL 12: the floor), at least
// engine.stress_sigma_floor", or why it is the floor.
func (m *Watch) WarmForCheck(ctx context.Context, now time.Time, tv *market.View) string {
	v := &m.vol
	v.observe(now, tv.Rows)
	for len(v.cold) > 0 {
		m.warm(ctx, now, 0)
	}
	var parts, counts []string
	read, enough := false, false
	for _, index := range slices.Sorted(maps.Keys(v.ix)) {
		n := v.ix[index].n
		read, enough = read || n > 0, enough || n >= volMinReturns
		counts = append(counts, fmt.Sprintf("%s %d", index, n))
		part := fmt.Sprintf("%s %d returns", index, n)
		if n < volMinReturns {
			part += ": the floor"
		}
		parts = append(parts, part)
	}
	switch {
	case !read:
		return "σ is engine.stress_sigma_floor: no index history could be read"
	case !enough:
		return fmt.Sprintf("σ is engine.stress_sigma_floor: the index history holds fewer than %d returns (%s)", volMinReturns, strings.Join(counts, ", "))
	}
	return fmt.Sprintf("σ from the last %gh of each index's history (%s), at least engine.stress_sigma_floor", volWarmSpan.Hours(), strings.Join(parts, ", "))
}
