package model

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange/margin"
)

// fitWatch is the margin model checked against the exchange's own
// figures, every tick (tick-owned): the last fit, what it was computed
// from, and the read-backs the model did not predict.
type fitWatch struct {
	fit margin.Fit
	// known: a fit has been computed; unfit: the last one said (the
	// guard starts assuming the model fits, so the first misfit is said).
	known, unfit bool
	keys         []fitKey // of the positions the fit was computed from
	at           time.Time
	// mismatched are the symbols whose last read-back the model did not
	// predict, with what it said; cleared by a read-back that matches.
	mismatched map[string]string
	dirty      bool // mismatched changed since the fit was computed
	// ps, rep and tol are what the fit was computed from: when a check
	// falls due and they are all the same (a steady account under a
	// steady index), the fit is the same and is kept.
	ps  []margin.Position
	rep []margin.Reported
	tol float64
	// spare and spareRep are the lists the next check is built into (the
	// ones replaced by the last fit), so a check allocates none.
	spare    []margin.Position
	spareRep []margin.Reported
	// scratch is where the checks are built: a fit's positions are
	// overwritten two checks later, when only w.fit and the status's
	// copy, both the last one, still name them.
	scratch margin.FitScratch
	// why is fit.Why() once asked (whyKnown), until the fit changes.
	why      string
	whyKnown bool
	// unjudged names the open positions of the last fit the model cannot
	// judge (margin.Unjudgeable), as last said: said again only when it
	// changes.
	unjudged string
	// keysAt is the join of view (market.View.Joins) whose rows keys
	// names, holdsAt the last one holdsIn compared and found the fit to
	// hold in (0: none since the fit): while the view stays steady since
	// (View.Steady), each holds again without comparing a position.
	view            *market.View
	keysAt, holdsAt uint64
}

// whyUnfit is the fit's Why, computed once per fit: the account view of a
// tick with a plan, or whose free balance is inferred again, asks for it.
func (w *fitWatch) whyUnfit() string {
	if !w.whyKnown {
		w.why, w.whyKnown = w.fit.Why(), true
	}
	return w.why
}

// fitKey identifies what the fit is computed from, for one open
// position: its leverage and mode, and the figures the fit reads as the
// view converted them (the spec gives the position's version no meaning:
// it is no sign that its figures changed).
type fitKey struct {
	id, direction string
	version       int64
	leverage      int
	cross         bool
	qty, ev       float64
	margin, liq   float64
}

// fitKeyOf is the key of an open position's row.
func fitKeyOf(r *market.Row) fitKey {
	p := r.P
	k := fitKey{id: p.ID, direction: p.Direction, version: p.Version, leverage: p.Leverage, cross: p.Cross}
	if n := r.N; n != nil {
		k.qty, k.ev, k.margin, k.liq = n.Quantity, n.EntryValue, n.Margin, n.LiquidationPrice
	}
	return k
}

// sameFitKeys reports whether the view's open positions are keys, in
// order: compared in place, without building anything.
func sameFitKeys(keys []fitKey, v *market.View) bool {
	n := 0
	for i := range v.Rows {
		r := &v.Rows[i]
		if !r.Open {
			continue
		}
		if n == len(keys) || keys[n] != fitKeyOf(r) {
			return false
		}
		n++
	}
	return n == len(keys)
}

// appendFitKeys appends the keys of the view's open positions to dst.
func appendFitKeys(dst []fitKey, v *market.View) []fitKey {
	for i := range v.Rows {
		if r := &v.Rows[i]; r.Open {
			dst = append(dst, fitKeyOf(r))
		}
	}
	return dst
}

// Emitter says an event outside any tick's report (the journal).
type Emitter interface {
	Emit(ctx context.Context, rep *journal.Report, ev journal.Event)
}

// CheckFit checks the model, under tolerance tol, against the figures of
// the tick's view when they changed (or a read-back did, or at least
// every freeRefresh), says a change between fitting and not fitting
// (audit, log) with say, and returns the fit; fresh is true when it is
// one computed now, for the caller to count and publish. A snapshot read
// while a call was in flight is not checked: its figures may straddle
// the call.
func (m *Watch) CheckFit(ctx context.Context, now time.Time, v *market.View, tol float64, say Emitter) (f margin.Fit, fresh bool) {
	w := &m.fit
	if m.inFlight != "" && w.known {
		return w.fit, false
	}
	if w.view != v {
		w.view, w.keysAt, w.holdsAt = v, 0, 0
	}
	same := w.known && (v.Steady(w.keysAt) || sameFitKeys(w.keys, v))
	if same && !w.dirty && !now.Before(w.at) && now.Sub(w.at) < freeRefresh {
		return w.fit, false
	}
	if w.known && !w.dirty && w.tol == tol && w.holdsIn(v, tol) {
		// Only the indexes moved, under isolated positions the model
		// prices exactly: CheckFit would give the same fit (a replay's
		// every step), and the positions are compared in place.
		if !same {
			w.keys = appendFitKeys(w.keys[:0], v)
		}
		w.at, w.keysAt = now, v.Joins()
		return w.fit, false
	}
	// Copied into the spare lists (the view's are its own until the
	// next join): the ones the fit was computed from are compared with
	// them, and become the spares when they are replaced.
	vps, vrep := v.Model()
	ps, rep := append(w.spare[:0], vps...), append(w.spareRep[:0], vrep...)
	w.spare, w.spareRep = ps, rep
	if w.known && !w.dirty && w.tol == tol && sameFitInputs(w.ps, w.rep, ps, rep) {
		// CheckFit of the very same figures: the same fit, already said,
		// counted and published.
		if !same {
			w.keys = appendFitKeys(w.keys[:0], v)
		}
		w.at, w.keysAt = now, v.Joins()
		return w.fit, false
	}
	if w.known {
		// Only what changed is solved again: an isolated position whose
		// index alone moved keeps its modelled figures (the same fit as
		// CheckFit's, field for field).
		f = w.scratch.CheckFitAfter(w.fit, margin.Account{Positions: w.ps}, w.rep, margin.Account{Positions: ps}, rep, tol)
	} else {
		f = w.scratch.CheckFit(margin.Account{Positions: ps}, rep, tol)
	}
	for sym, text := range w.mismatched {
		f.MarkMismatch(sym, text)
	}
	w.fit, w.known, w.at, w.dirty = f, true, now, false
	if !same {
		w.keys = appendFitKeys(w.keys[:0], v)
	}
	w.keysAt, w.holdsAt = v.Joins(), 0
	w.spare, w.spareRep = w.ps, w.rep
	w.ps, w.rep, w.tol, w.whyKnown = ps, rep, tol, false
	if unfit := !f.Fits(); unfit != w.unfit {
		w.unfit = unfit
		say.Emit(ctx, nil, fitEvent(now, f))
	}
	if u := unjudgedOf(v, len(vps)); u != w.unjudged {
		w.unjudged = u
		say.Emit(ctx, nil, unjudgedEvent(now, u))
	}
	return f, true
}

// unjudgedOf names the first n model positions of v that the model
// cannot judge (margin.Unjudgeable): "XSOL (position 1_103): entry price
// 0 is not positive", joined by "; ", "" when it can judge them all. It
// runs with a fresh fit only: the same positions judge the same.
func unjudgedOf(v *market.View, n int) string {
	var parts []string
	for i := range n {
		row := v.ModelRow(i)
		if why := margin.Unjudgeable(row.P); why != "" {
			parts = append(parts, fmt.Sprintf("%s (position %s): %s", row.Sym.Name, row.P.ID, why))
		}
	}
	return strings.Join(parts, "; ")
}

// unjudgedEvent says which open positions the model cannot judge, as
// check --exchange names them, or that it judges every one again.
func unjudgedEvent(now time.Time, unjudged string) journal.Event {
	if unjudged == "" {
		text := "the margin model judges every open position again"
		return journal.Event{Level: slog.LevelInfo, Msg: text, Audit: &journal.Record{Time: now, Type: "model", Reason: text}}
	}
	text := "the margin model cannot judge " + unjudged + ": the exchange lists figures it cannot take, so the guard cannot predict its actions there; look at the position on the exchange (check --exchange names it too)"
	return journal.Event{Level: slog.LevelWarn, Msg: text, Audit: &journal.Record{Time: now, Type: "model", Reason: text}}
}

// holdsIn is margin.FitHolds of the last fit, under tolerance tol, and
// the view's model positions, compared in place; when it holds, the kept
// positions take the view's index prices. In a view steady since it last
// held (holdsAt) it holds again, without comparing: margin.PositionHolds
// reads no index price.
func (w *fitWatch) holdsIn(v *market.View, tol float64) bool {
	if !(tol > 0) {
		tol = margin.DefaultFitTolerance
	}
	if tol != w.fit.Tolerance || len(w.fit.Positions) != len(w.ps) || len(w.rep) != len(w.ps) {
		return false
	}
	ps, rep := v.Model()
	if len(ps) != len(w.ps) {
		return false
	}
	if !v.Steady(w.holdsAt) {
		for k := range ps {
			if !margin.PositionHolds(&w.fit.Positions[k], &w.ps[k], w.rep[k], &ps[k], rep[k]) {
				return false
			}
		}
		w.holdsAt = v.Joins()
	}
	for k := range ps {
		w.ps[k].Index = ps[k].Index
	}
	return true
}

// sameFitInputs reports whether two lists of model positions and
// reported figures are the same input to margin.CheckFit: every field it
// reads equal, decimals in value and exponent (Held and MM it ignores).
func sameFitInputs(ps []margin.Position, rep []margin.Reported, qs []margin.Position, req []margin.Reported) bool {
	if len(ps) != len(qs) || len(rep) != len(req) {
		return false
	}
	for i := range ps {
		p, q := &ps[i], &qs[i]
		if !margin.SameButIndex(p, q) || !margin.SameDec(p.Index, q.Index) {
			return false
		}
	}
	for i := range rep {
		if !margin.SameReported(rep[i], req[i]) {
			return false
		}
	}
	return true
}

// Fit is the last fit checked (CheckFit), zero before the first.
func (m *Watch) Fit() margin.Fit { return m.fit.fit }

// NoteReadBack records whether the last settings call on symbol read
// back what the model predicted (mismatch says how not, "" when it did):
// a mismatch keeps the symbol unfit until one matches again.
func (m *Watch) NoteReadBack(symbol string, mismatch string) { m.fit.noteReadBack(symbol, mismatch) }

// noteReadBack records whether the last settings call on symbol read back
// what the model predicted: a mismatch keeps the symbol unfit until one
// matches again.
func (w *fitWatch) noteReadBack(symbol string, mismatch string) {
	_, had := w.mismatched[symbol]
	switch {
	case mismatch != "":
		if w.mismatched == nil {
			w.mismatched = map[string]string{}
		}
		w.mismatched[symbol] = mismatch
		w.dirty = true
	case had:
		delete(w.mismatched, symbol)
		w.dirty = true
	}
}

// fitEvent says the model starting or ceasing to fit the exchange.
func fitEvent(now time.Time, f margin.Fit) journal.Event {
	text := "the margin model fits the exchange again: " + f.Summary()
	level := slog.LevelInfo
	if !f.Fits() {
		text = "the margin model does not fit the exchange: " + f.Why() +
			"; its predictions are unverified and decide nothing (a leverage cut goes out as the rule asks)"
		level = slog.LevelWarn
	}
	return journal.Event{Level: level, Msg: text, Attrs: []any{"worst", fmt.Sprintf("%.6g", f.Worst)},
		Audit: &journal.Record{Time: now, Type: "model", Symbol: f.WorstSymbol, Reason: text}}
}
