package engine

import "github.com/riskguard/riskguard/engine/model"

// StressInputs are the stress grid's inputs as the engine judges its
// actions by them (model.StressInputs).
type StressInputs = model.StressInputs

// StressInputs returns the stress grid's inputs as of the last tick, under
// the settings in force: a backtest's report reads them.
func (e *Engine) StressInputs() StressInputs {
	e.tick.Lock()
	defer e.tick.Unlock()
	return e.model.StressInputs(&e.view, e.cfg.stress())
}
