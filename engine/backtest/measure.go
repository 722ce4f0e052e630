package backtest

import (
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// A run's account measure is sampled after the prices moved and the
// exchange liquidated what they crossed, before the engine's tick: the
// account as the market left it, before the guard answers, so a guard that
// repairs the account in the same tick is not credited with a move it did
// not prevent; an action's effect is in the next tick's sample. Each
// sample is the measure's move together (margin.Survival's Together, from
// the liquidation prices the in-process exchange holds:
// sim.Exchange.Together) of the whole account. It is taken on every tick
// that can have changed it — a data step (new prices, the trader's own
// trades) or a tick after the guard sent an action — and skipped on the
// ticks between two data steps where nothing moved (Options.Interval), so
// the worst is exact. It costs about 5% of BenchmarkReplay's CPU (one data
// step a tick there).

// worstMeasure is the lowest account measure a run has seen.
type worstMeasure struct {
	sampled bool
	worst   decimal.Decimal
	acted   bool // the last tick sent an action
	// At the worst sample: its time, the account as the stress grid reads
	// it (sim.Exchange.StressAccountInto) and the engine's σ then. The
	// grid is worked out from them once asked (grid): a falling market
	// makes a new worst at most steps, and only the last is shown.
	at     time.Time
	acct   margin.Account
	liqs   []decimal.Decimal
	inputs engine.StressInputs
}

// sampleMeasure samples the lane's account measure when the tick can have
// changed it (moved: a data step). A measure that is not known (an index
// without a price) is not a sample: no data is neither good nor bad.
func (l *lane) sampleMeasure(moved bool) {
	if !moved && !l.measure.acted && l.measure.sampled {
		return
	}
	if l.measure.sampled && l.ex.TogetherAtLeast(l.measure.worst) {
		return // not below the worst: computing it would change nothing
	}
	m, ok := l.ex.Together()
	if !ok {
		return
	}
	if w := &l.measure; !w.sampled || m.LessThan(w.worst) {
		w.worst, w.sampled = m, true
		w.at, w.inputs = l.clock.t, l.eng.StressInputs()
		w.acct, w.liqs = l.ex.StressAccountInto(w.acct.Positions, w.liqs)
	}
}

// grid is the run's account on the stress grid at its worst sample, nil
// without a sample: what stressGrid gave then.
func (w *worstMeasure) grid() *StressGrid {
	if !w.sampled {
		return nil
	}
	return &StressGrid{Time: w.at, Stress: w.acct.Stress(w.inputs.SigmaOf, w.inputs.Likely, w.liqs), Inputs: w.inputs}
}

// stressGrid is the run's account on the stress grid now, with σ as its
// engine had it at its last tick.
func (l *lane) stressGrid() *StressGrid {
	in := l.eng.StressInputs()
	return &StressGrid{Time: l.clock.t, Stress: l.ex.Stress(in.SigmaOf, in.Likely), Inputs: in}
}

// worstAccountMeasure is the run's measure at its worst: 0 when the
// exchange liquidated a position (the move that liquidates it happened),
// else the lowest sample; nil without a sample.
func (l *lane) worstAccountMeasure(liquidated bool) *float64 {
	if liquidated {
		z := 0.0
		return &z
	}
	if !l.measure.sampled {
		return nil
	}
	f := l.measure.worst.InexactFloat64()
	return &f
}
