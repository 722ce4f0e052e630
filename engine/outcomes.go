package engine

import (
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/dispatch"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/model"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
)

// outcomes is what the dispatcher hands back to the engine's parts
// (dispatch.Outcomes, dispatch.Model): the rule states to the evaluator,
// the state to be saved to the state file, the next texts to the board,
// and the tick's margin model from the model's part, on the view and rows
// of the tick. It holds the parts, never the engine.
type outcomes struct {
	eval  *evaluator
	file  *stateFile
	board *board
	model *model.Watch
	view  *market.View
	// snaps and cfg join a snapshot the tick has not joined (Model).
	snaps *market.SnapshotReader
	cfg   *Config
}

var (
	_ dispatch.Outcomes = (*outcomes)(nil)
	_ dispatch.Model    = (*outcomes)(nil)
)

// Acted starts a rule's cooldown: its actions succeeded.
func (o *outcomes) Acted(now time.Time, key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set) {
	o.eval.acted(now, key, idx, r, st, setAt)
}

// Skipped starts it, its actions all left out (act.Skipper).
func (o *outcomes) Skipped(now time.Time, key market.Key, idx int, r *rules.Rule, st *alert.RuleState, setAt *rules.Set) {
	o.eval.skipped(now, key, idx, r, st, setAt)
}

// AccountSettled says an account rule's last call ended.
func (o *outcomes) AccountSettled(now time.Time, d *act.AccountDue, setAt *rules.Set) {
	o.eval.accountSettled(now, d, setAt)
}

// Noted puts what became of a rule's actions in the status's next text.
func (o *outcomes) Noted(at time.Time, symbol, rule, note string) {
	o.board.note(at, symbol, rule, note)
}

// Changed marks the state to be saved.
func (o *outcomes) Changed() { o.file.changed() }

// Model is the tick's margin model of snap, on the tick's rows (joined
// here when the tick has not joined snap).
func (o *outcomes) Model(snap *market.Snapshot) *act.Model {
	o.eval.rowsFor(snap, o.view, o.snaps, o.cfg.IndexNames)
	return o.model.Account(o.view)
}

// Moved moves the tick's model on.
func (o *outcomes) Moved(at time.Time, next margin.Account) { o.model.Moved(at, next) }

// ReadBack marks the model's fit with what a settings call read back.
func (o *outcomes) ReadBack(symbol, mismatch string) { o.model.NoteReadBack(symbol, mismatch) }
