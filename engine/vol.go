package engine

import (
	"math"
	"time"

	"github.com/riskguard/riskguard/engine/market"
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
}

// volIndex is one index's figures.
type volIndex struct {
	price     float64
	at        time.Time
	varPerSec float64 // the weighted mean of r²/Δt
	weight    float64 // the sum of the weights so far, for the start
	n         int     // returns counted
}

const (
	volSample   = 10 * time.Second
	volHalfLife = time.Hour
	volMaxGap   = 10 * time.Minute
	// volMinReturns is how many returns (one per volSample at most) an
	// index needs before its own σ is used; until then σ is the floor.
	volMinReturns = 30
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
	for i := range rows {
		r := &rows[i]
		if !r.Open || !r.HasIndex || !(r.IndexF > 0) || math.IsInf(r.IndexF, 0) {
			continue
		}
		x := v.ix[r.IndexName]
		if x == nil {
			v.ix[r.IndexName] = &volIndex{price: r.IndexF, at: now}
			continue
		}
		dt := now.Sub(x.at)
		if dt <= 0 {
			continue // the same read (two positions on one index) or a clock that ran back
		}
		if dt <= volMaxGap {
			ret := math.Log(r.IndexF / x.price)
			w := 1 - math.Exp2(-dt.Seconds()/volHalfLife.Seconds())
			x.weight = x.weight*(1-w) + w
			x.varPerSec = x.varPerSec*(1-w) + w*(ret*ret/dt.Seconds())
			x.n++
		}
		x.price, x.at = r.IndexF, now
	}
}

// sigma is the index's σ over horizon as a fraction of its price: its
// recent returns' volatility scaled by √horizon, at least floor (and the
// floor alone until the index has volMinReturns returns).
func (v *volatility) sigma(index string, horizon time.Duration, floor float64) float64 {
	x := v.ix[index]
	if x == nil || x.n < volMinReturns || !(x.weight > 0) {
		return floor
	}
	s := math.Sqrt(x.varPerSec / x.weight * horizon.Seconds())
	if !(s > floor) || math.IsNaN(s) {
		return floor
	}
	return s
}
