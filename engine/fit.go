package engine

import (
	"context"
	"fmt"
	"log/slog"
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
}

// whyUnfit is the fit's Why, computed once per fit: the account view of a
// tick with a plan, or whose free balance is inferred again, asks for it.
func (w *fitWatch) whyUnfit() string {
	if !w.whyKnown {
		w.why, w.whyKnown = w.fit.Why(), true
	}
	return w.why
}

// ModelFit is the margin model's fit as Status shows it.
type ModelFit struct {
	Fits bool `json:"fits"`
	// Worst is the worst relative error, of WorstSymbol's WorstFigure
	// (margin, liquidation, read-back, free balance).
	Worst       float64 `json:"worstError"`
	WorstSymbol string  `json:"worstSymbol,omitempty"`
	WorstFigure string  `json:"worstFigure,omitempty"`
	Tolerance   float64 `json:"tolerance"`
	// Summary says it in one line: "fits (…)" or "does not fit: XBTC
	// (margin 100.5 reported, 6000 modelled)".
	Summary   string             `json:"summary"`
	Positions []ModelFitPosition `json:"positions"`
}

// ModelFitPosition is one position's fit.
type ModelFitPosition struct {
	Symbol string  `json:"symbol"`
	Fits   bool    `json:"fits"`
	Error  float64 `json:"error"`
	Figure string  `json:"figure,omitempty"`
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

// emitter says an event outside any report (the journal).
type emitter interface {
	Emit(ctx context.Context, rep *journal.Report, ev event)
}

// checkFit checks the model, under tolerance tol, against the figures of
// the tick's view when they changed (or a read-back did, or at least
// every freeRefresh), says a change between fitting and not fitting
// (audit, log) with say, and returns the fit; fresh is true when it is
// one computed now, for the caller to count and publish. A snapshot read
// while a call was in flight is not checked: its figures may straddle
// the call.
func (m *modelWatch) checkFit(ctx context.Context, now time.Time, v *market.View, tol float64, say emitter) (f margin.Fit, fresh bool) {
	w := &m.fit
	if m.inFlight != "" && w.known {
		return w.fit, false
	}
	same := w.known && sameFitKeys(w.keys, v)
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
		w.at = now
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
		w.at = now
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
	w.spare, w.spareRep = w.ps, w.rep
	w.ps, w.rep, w.tol, w.whyKnown = ps, rep, tol, false
	if unfit := !f.Fits(); unfit != w.unfit {
		w.unfit = unfit
		say.Emit(ctx, nil, fitEvent(now, f))
	}
	return f, true
}

// holdsIn is margin.FitHolds of the last fit, under tolerance tol, and
// the view's model positions, compared in place; when it holds, the kept
// positions take the view's index prices.
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
	for k := range ps {
		if !margin.PositionHolds(&w.fit.Positions[k], &w.ps[k], w.rep[k], &ps[k], rep[k]) {
			return false
		}
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
func fitEvent(now time.Time, f margin.Fit) event {
	text := "the margin model fits the exchange again: " + f.Summary()
	level := slog.LevelInfo
	if !f.Fits() {
		text = "the margin model does not fit the exchange: " + f.Why() +
			"; its predictions are unverified and decide nothing (a leverage cut goes out as the rule asks)"
		level = slog.LevelWarn
	}
	return event{Level: level, Msg: text, Attrs: []any{"worst", fmt.Sprintf("%.6g", f.Worst)},
		Audit: &journal.Record{Time: now, Type: "model", Symbol: f.WorstSymbol, Reason: text}}
}

// modelFitOf is what Status shows of a fit.
func modelFitOf(f margin.Fit) *ModelFit {
	mf := &ModelFit{Fits: f.Fits(), Worst: f.Worst, WorstSymbol: f.WorstSymbol, WorstFigure: f.WorstWhat, Tolerance: f.Tolerance,
		Summary: f.Summary(), Positions: make([]ModelFitPosition, 0, len(f.Positions))}
	for _, p := range f.Positions {
		mf.Positions = append(mf.Positions, ModelFitPosition{Symbol: p.Symbol, Fits: p.Fits(f.Tolerance), Error: p.Error, Figure: p.What})
	}
	return mf
}
