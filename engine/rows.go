package engine

import (
	"time"

	"github.com/riskguard/riskguard/engine/market"
)

// tickRow is a row of the tick's view (engine/market) joined with the
// position's rule state.
type tickRow struct {
	*market.Row
	// ps is the position's rule state: found when the rows are built,
	// created by evaluate; nil while it has none.
	ps *posState
	// dup: an earlier non-empty row of the tick has the same key;
	// evaluate skips it.
	dup bool
}

// buildRows joins the snapshot's positions once for the tick: market's view
// (symbol, index) and the rule states. The rows of the last build are
// reused, and so is the state each pointed to when the position at the
// same place has the same key (the exchange lists the positions in a
// stable order): no map lookup then.
func (e *Engine) buildRows(snap *Snapshot) []tickRow {
	e.rowGen++
	gen := e.rowGen
	e.view.Join(snap, e.snaps, e.cfg.IndexNames)
	n := len(snap.Positions)
	rows := e.rows
	if cap(rows) < n {
		grown := make([]tickRow, n)
		copy(grown, rows[:cap(rows)])
		rows = grown
	}
	rows = rows[:n]
	if len(e.rowFresh) > 0 {
		clear(e.rowFresh)
	}
	for i := range e.view.Rows {
		mr := &e.view.Rows[i]
		r := &rows[i]
		ps := r.ps // the last tick's state at this place
		if ps == nil || ps.Dropped || ps.Key != mr.Key {
			ps = e.book.Get(mr.Key)
		}
		*r = tickRow{Row: mr, ps: ps}
		if mr.P.Empty {
			if ps != nil {
				ps.X.closedGen = gen
			}
			continue
		}
		switch {
		case ps != nil:
			r.dup = ps.X.rowGen == gen
			ps.X.rowGen = gen
		default:
			if e.rowFresh == nil {
				e.rowFresh = make(map[market.Key]struct{})
			}
			_, r.dup = e.rowFresh[mr.Key]
			e.rowFresh[mr.Key] = struct{}{}
		}
	}
	e.rows, e.rowsOf = rows, snap
	return rows
}

// rowsFor returns the tick's rows of snap, building them if the tick has
// not.
func (e *Engine) rowsFor(snap *Snapshot) []tickRow {
	if e.rowsOf == snap && snap != nil {
		return e.rows
	}
	return e.buildRows(snap)
}

// rowIndex says whether the row's index price is usable with the
// staleness bound applied (the row holds it), and why not when it is
// missing or stale.
func (e *Engine) rowIndex(snap *Snapshot, r *tickRow, now time.Time) (string, bool) {
	if snap.IndexPrices == nil {
		return "index prices not read", false
	}
	if !r.HasIndex {
		return "index " + r.IndexName + " missing", false
	}
	if why := e.stale(r.IndexName, r.Index, now); why != "" {
		return why, false
	}
	return "", true
}
