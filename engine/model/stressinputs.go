package model

import (
	"time"

	"github.com/riskguard/riskguard/engine/market"
)

// StressInputs are the stress grid's inputs (margin.Account.Stress) as the
// engine judges its actions by them: each open position's symbol's σ over
// Horizon from the returns its index has shown, Floor until it has shown
// enough (volMinReturns), and the likely range. A backtest reads them to
// put its simulated account on the grid the engine would have seen.
type StressInputs struct {
	// Sigma is each symbol's σ, a fraction of its index, for the open
	// positions of the last tick; a symbol not in it has Floor.
	Sigma   map[string]float64
	Floor   float64
	Horizon time.Duration
	Likely  float64
}

// SigmaOf is the σ of symbol: its own, else the floor. It is the sigma
// margin.Account.Stress takes.
func (s StressInputs) SigmaOf(symbol string) float64 {
	if v, ok := s.Sigma[symbol]; ok {
		return v
	}
	return s.Floor
}

// AtFloor reports whether symbol's σ is the floor (its index has shown
// too few returns, or they were quieter than the floor).
func (s StressInputs) AtFloor(symbol string) bool {
	return !(s.SigmaOf(symbol) > s.Floor)
}

// StressInputs returns the stress grid's inputs under the settings st
// as of the tick whose view is tv: σ of the symbols it saw open (none
// before the first tick: the floor for every symbol).
func (m *Watch) StressInputs(tv *market.View, st Stress) StressInputs {
	in := StressInputs{Floor: st.Floor, Horizon: st.Horizon, Likely: st.Likely, Sigma: map[string]float64{}}
	sigma := m.Sigma(tv, st)
	for i := range tv.Rows {
		if r := &tv.Rows[i]; r.Open && r.Sym != nil {
			in.Sigma[r.Sym.Name] = sigma(r.Sym.Name)
		}
	}
	return in
}
