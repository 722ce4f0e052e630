package engine

import (
	"fmt"
	"time"

	"github.com/riskguard/riskguard/engine/market"
	"github.com/shopspring/decimal"
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

// join joins the tick's view tv (engine/market: symbol, index) once with
// the rule states. The rows of the last join are reused, and so is the
// state each pointed to when the position at the same place has the same
// key (the exchange lists the positions in a stable order): no map lookup
// then.
func (v *evaluator) join(tv *market.View) []tickRow {
	v.rowGen++
	gen := v.rowGen
	snap := tv.Snap
	n := len(snap.Positions)
	rows := v.rows
	if cap(rows) < n {
		grown := make([]tickRow, n)
		copy(grown, rows[:cap(rows)])
		rows = grown
	}
	rows = rows[:n]
	if len(v.rowFresh) > 0 {
		clear(v.rowFresh)
	}
	for i := range tv.Rows {
		mr := &tv.Rows[i]
		r := &rows[i]
		ps := r.ps // the last tick's state at this place
		if ps == nil || ps.Dropped || ps.Key != mr.Key {
			ps = v.book.Get(mr.Key)
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
			if v.rowFresh == nil {
				v.rowFresh = make(map[market.Key]struct{})
			}
			_, r.dup = v.rowFresh[mr.Key]
			v.rowFresh[mr.Key] = struct{}{}
		}
	}
	v.rows, v.rowsOf = rows, snap
	return rows
}

// joined returns the rows of the last join when it was of snap.
func (v *evaluator) joined(snap *market.Snapshot) ([]tickRow, bool) {
	if v.rowsOf == snap && snap != nil {
		return v.rows, true
	}
	return nil, false
}

// rowsFor returns the rows of snap, joining snap into tv first (through
// r, with the index names) when the last join was not of snap: the one
// place a part that holds a snapshot gets the tick's rows of it.
func (v *evaluator) rowsFor(snap *market.Snapshot, tv *market.View, r *market.SnapshotReader, names map[string]string) []tickRow {
	if rows, ok := v.joined(snap); ok {
		return rows
	}
	tv.Join(snap, r, names)
	return v.join(tv)
}

// rowIndex says whether the row's index price is usable with the
// staleness bound applied (the row holds it), and why not when it is
// missing or stale.
func (v *evaluator) rowIndex(snap *market.Snapshot, r *tickRow, now time.Time) (string, bool) {
	if snap.IndexPrices == nil {
		return "index prices not read", false
	}
	if !r.HasIndex {
		return "index " + r.IndexName + " missing", false
	}
	if why := v.stale(r.IndexName, r.Index, now); why != "" {
		return why, false
	}
	return "", true
}

// stale applies the staleness bound (StaleAfter) to index name's price p
// at now: "" when fresh, otherwise why not.
func (v *evaluator) stale(name string, p decimal.Decimal, now time.Time) string {
	if v.staleAfter <= 0 {
		return ""
	}
	seen, known := v.indexSeen[name]
	if !known || !seen.price.Equal(p) {
		v.indexSeen[name] = indexSeen{price: p, changed: now}
	} else if now.Sub(seen.changed) > v.staleAfter {
		return fmt.Sprintf("index %s unchanged for %s", name, now.Sub(seen.changed).Round(time.Second))
	}
	return ""
}
