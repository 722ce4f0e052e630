package model

import (
	"context"
	"fmt"
	"time"

	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange/margin"
)

// Check is what Watch.Check found (the engine's CheckModel): the margin
// model's fit to the exchange's figures, and the account on the stress
// grid.
type Check struct {
	// Fit is over the judged positions only (Unjudged are left out, of
	// the cross pool too).
	Fit margin.Fit
	// Stress is the account on the stress grid (margin.Stress), with the
	// free balance the fit inferred; each index's σ is from its history
	// (read by the check: SigmaFrom), the floor (engine.stress_sigma_floor)
	// where that holds too few returns. Unknown (Known
	// false) when the account holds a cross position and the free
	// balance could not be inferred. Over the judged positions only.
	Stress margin.Stress
	// SigmaFrom says where the grid's σ came from: each index's history
	// (how many returns), or the floor where none could be read.
	SigmaFrom string
	// Open counts the open positions read, judged or not: an item of the
	// positions answer that could not be decoded counts (an empty
	// position needs only its identity to be read, so one that could not
	// be was not empty, or had no identity).
	Open int
	// Unjudged are the open positions the fit and the grid leave out,
	// each with why, in the listing's order, the undecodable items last.
	Unjudged []Unjudged
}

// Unjudged is an open position Check could not judge.
type Unjudged struct {
	// Symbol is the symbol's name, or "symbol id N" when the symbols do
	// not name it; ID the position's id ("" when it could not be read).
	Symbol, ID string
	// Why says what is wrong, in the words of the read or the model.
	Why string
}

// Check checks the margin model against the exchange's own figures of
// the view tv (of one snapshot, read by snaps), under tolerance tol, as a
// tick would, and puts the account on the stress grid of settings st,
// σ read from each index's history (WarmForCheck): `riskguard check
// --exchange`. An open position it cannot judge (undecodable, of an
// unlisted symbol, or with figures the model cannot take:
// margin.Unjudgeable) is left out and named in Unjudged, never passed
// over in silence.
func (m *Watch) Check(ctx context.Context, now time.Time, tv *market.View, snaps *market.SnapshotReader, tol float64, st Stress) Check {
	snap := tv.Snap
	var c Check
	for i := range tv.Rows {
		r := &tv.Rows[i]
		if !r.Open {
			continue
		}
		c.Open++
		if r.Sym == nil {
			c.Unjudged = append(c.Unjudged, Unjudged{Symbol: fmt.Sprintf("symbol id %d", r.P.SymbolID), ID: r.P.ID,
				Why: unlistedWhy(snap, r.P.SymbolID)})
		}
	}
	ps, rep := tv.Model()
	// The fit names its positions: copies, as the view's are its own.
	var acct margin.Account
	var judged []margin.Reported
	for i := range ps {
		row := tv.ModelRow(i)
		if why := margin.Unjudgeable(row.P); why != "" {
			c.Unjudged = append(c.Unjudged, Unjudged{Symbol: row.Sym.Name, ID: row.P.ID, Why: why})
			continue
		}
		acct.Positions = append(acct.Positions, ps[i])
		judged = append(judged, rep[i])
	}
	for _, pe := range snap.Partial {
		if pe.What != "positions" {
			continue
		}
		for _, it := range pe.Items {
			c.Open++
			sym := fmt.Sprintf("symbol id %d", it.SymbolID)
			if s, ok := snaps.Symbol(it.SymbolID); ok {
				sym = s.Name
			}
			c.Unjudged = append(c.Unjudged, Unjudged{Symbol: sym, ID: it.ID, Why: "unreadable: " + it.Err.Error()})
		}
	}
	c.Fit = margin.CheckFit(acct, judged, tol)
	if c.Fit.FreeKnown {
		acct.Free = c.Fit.Free
	} else if acct.HasOpenCross() {
		return c
	}
	c.SigmaFrom = m.WarmForCheck(ctx, now, tv)
	c.Stress = acct.Stress(m.Sigma(tv, st), st.Likely, nil)
	return c
}

// unlistedWhy says why the symbols in force do not name symbol id: it
// could not be read, or the exchange does not list it.
func unlistedWhy(snap *market.Snapshot, id int64) string {
	for _, pe := range snap.Partial {
		if pe.What != "symbols" {
			continue
		}
		for _, it := range pe.Items {
			if it.SymbolID == id {
				return fmt.Sprintf("its symbol could not be read: %v", it.Err)
			}
		}
	}
	return fmt.Sprintf("the exchange's symbol list has no contract symbol with id %d", id)
}
