package engine

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// accountView is the tick's snapshot as the margin model sees it, built at
// the first settings call of the tick and moved along by the predicted
// effect of each call sent, so that a later call in the same tick sees the
// free balance the earlier ones left.
type accountView struct {
	acct margin.Account
	at   map[string]int // symbol → index in acct.Positions
	// freeKnown: the free balance was inferred from a cross position's
	// liquidation price. Without a cross position it cannot be; the
	// isolated predictions do not need it, and affordability is then left
	// to the exchange.
	freeKnown bool
	// freeWhy says why the free balance is unknown.
	freeWhy string
}

// Why the free balance is unknown to the margin model.
const whyNoCross = "no cross position to infer it from"

// marginView returns the tick's account view, building it from snap.
func (e *Engine) marginView(snap *Snapshot) *accountView {
	if e.tickView != nil {
		return e.tickView
	}
	v := &accountView{at: map[string]int{}, acct: margin.Account{Positions: make([]margin.Position, 0, len(snap.Positions))}}
	var liqs []decimal.Decimal
	rows := e.rowsFor(snap)
	for i := range rows {
		r := &rows[i]
		p, sym := r.P, r.Sym
		if p.Empty || !p.Quantity.IsPositive() || sym == nil {
			continue
		}
		mp := margin.Position{Symbol: sym.Name, Direction: p.Direction, Quantity: p.Quantity, Entry: p.EntryPrice,
			Leverage: max(p.Leverage, 1), Cross: p.Cross, RiskLimit: p.RiskLimit, Scale: int32(sym.QuoteScale), Held: p.Margin, Value: p.EntryValue}
		if r.HasIndex {
			mp.Index = r.Index
		}
		mp.MM, _ = e.maintenance(r.ps, p, &mp)
		v.at[sym.Name] = len(v.acct.Positions)
		v.acct.Positions = append(v.acct.Positions, mp)
		liqs = append(liqs, p.LiquidationPrice)
	}
	// The free balance changes with the cross positions (their margins,
	// a settings call, a trade) and with transfers: it is inferred again
	// when a cross position changed, and at least every freeRefresh.
	switch free, known, sig, ok := e.cachedFree(snap); {
	case e.readInFlight != "":
		// A call that may move the pool was in flight while the
		// positions were read: the snapshot may or may not show its
		// effect, so the free balance it implies is not relied on (the
		// exchange decides what is affordable), nor kept.
		v.freeWhy = e.readInFlight
	case ok:
		v.acct.Free, v.freeKnown = free, known
	default:
		for i, mp := range v.acct.Positions {
			if !mp.Cross {
				continue
			}
			if free, ok := v.acct.InferFree(i, liqs[i]); ok {
				v.acct.Free, v.freeKnown = free, true
				break
			}
		}
		e.free = freeCache{sig: sig, at: e.lastTick, free: v.acct.Free, known: v.freeKnown}
	}
	if !v.freeKnown && v.freeWhy == "" {
		v.freeWhy = whyNoCross
	}
	e.tickView = v
	return v
}

// maintenance is the position's maintenance margin, cached in its state
// ps (nil: not cached) per position version (it changes with the quantity, the entry price and
// the risk limit only), with its float64 for the account's figures.
func (e *Engine) maintenance(ps *posState, p *exchange.Position, mp *margin.Position) (decimal.Decimal, float64) {
	if ps == nil {
		mm := mp.Maintenance()
		return mm, market.ToFloat(mm)
	}
	if ps.mmVersion != p.Version || ps.mm.IsZero() {
		ps.mm, ps.mmVersion = mp.Maintenance(), p.Version
		ps.mmFloat = market.ToFloat(ps.mm)
	}
	return ps.mm, ps.mmFloat
}

// crossSig identifies the snapshot's cross positions and their versions.
func (e *Engine) crossSig(snap *Snapshot) uint64 {
	sig := fnv.New64a()
	for i := range snap.Positions {
		p := &snap.Positions[i]
		if p.Empty || !p.Cross || !p.Quantity.IsPositive() {
			continue
		}
		b := append(e.sigBuf[:0], p.ID...)
		b = strconv.AppendInt(append(b, '/'), p.Version, 10)
		b = strconv.AppendInt(append(b, '/'), int64(p.Leverage), 10)
		e.sigBuf = append(b, ';')
		sig.Write(e.sigBuf)
	}
	return sig.Sum64()
}

// cachedFree is the free balance inferred for the same cross positions
// within freeRefresh; ok is false when it must be inferred again, for the
// cross positions sig identifies.
func (e *Engine) cachedFree(snap *Snapshot) (free decimal.Decimal, known bool, sig uint64, ok bool) {
	fc := &e.free
	sig = e.crossSig(snap)
	if fc.at.IsZero() || e.lastTick.Before(fc.at) || e.lastTick.Sub(fc.at) >= freeRefresh || fc.sig != sig {
		return decimal.Zero, false, sig, false
	}
	return fc.free, fc.known, sig, true
}

// freeRefresh is how often the free balance is inferred again while the
// cross positions stay as they are (a deposit or a withdrawal).
const freeRefresh = time.Minute

// freeCache is the last inferred free balance, and of which cross
// positions.
type freeCache struct {
	sig   uint64
	at    time.Time
	free  decimal.Decimal
	known bool
}

// prediction is what the margin model says a settings call will do to its
// position.
type prediction struct {
	margin.Effect
	// others are the cross positions whose liquidation price the call
	// moves (a leverage cut takes free balance from their pool).
	others    []otherEffect
	leverage  int // the leverage predicted
	direction string
	index     decimal.Decimal
	freeKnown bool
	freeWhy   string
	next      margin.Account
}

// predict predicts setting the plan's position to want; nil when the
// model does not know the position or its index price.
func (e *Engine) predict(snap *Snapshot, pl *act.Plan, want exchange.Settings) *prediction {
	v := e.marginView(snap)
	i, ok := v.at[pl.Sym.Name]
	if !ok || !v.acct.Positions[i].Index.IsPositive() {
		return nil
	}
	next, eff := v.acct.Apply(i, want.Leverage, want.Cross)
	p := &prediction{Effect: eff, leverage: want.Leverage, direction: pl.Pos.Direction, index: v.acct.Positions[i].Index, freeKnown: v.freeKnown, freeWhy: v.freeWhy, next: next}
	if !eff.MarginMoved.IsZero() || want.Cross != pl.Pos.Cross {
		for j, o := range v.acct.Positions {
			if j == i || !o.Cross || !o.Index.IsPositive() {
				continue
			}
			before, after := v.acct.LiquidationPrice(j), next.LiquidationPrice(j)
			if before.Equal(after) {
				continue
			}
			db, _ := margin.Distance(o.Direction, o.Index, before)
			da, _ := margin.Distance(o.Direction, o.Index, after)
			p.others = append(p.others, otherEffect{symbol: o.Symbol, before: before, after: after, distBefore: db, distAfter: da})
		}
	}
	return p
}

// otherEffect is a call's predicted effect on another position.
type otherEffect struct {
	symbol                string
	before, after         decimal.Decimal // liquidation prices
	distBefore, distAfter decimal.Decimal
}

func (o otherEffect) closer() bool { return o.distAfter.LessThan(o.distBefore) }

func (o otherEffect) String() string {
	return fmt.Sprintf("%s liquidation %s → %s (%s → %s away)", o.symbol, o.before, o.after,
		o.distBefore.Shift(2).StringFixed(2)+"%", o.distAfter.Shift(2).StringFixed(2)+"%")
}

// OthersFloor is how far from liquidation another position must stay when
// a leverage cut its rule allows takes free balance from that position's
// cross pool (or the rule's min_liquidation_distance, when higher).
const OthersFloor = 0.10

// othersBound keeps a leverage cut from taking free balance out of a cross
// pool that backs other positions: in a move that takes both down, the
// margin moved into the cut position is lost with it and the pool is short
// for the others — one position's safety traded for another's. Only rules
// that set allow_closer_liquidation may, and then only while every other
// position stays OthersFloor (or their floor) away.
func othersBound(pl *act.Plan) func(*prediction) (bool, string) {
	allowed, floor := closerAllowed(pl, rules.LowerLeverage)
	floor = decimal.Max(floor, decimal.NewFromFloat(OthersFloor))
	return func(p *prediction) (bool, string) {
		for _, o := range p.others {
			switch {
			case !o.closer():
			case !allowed:
				return false, fmt.Sprintf("%dx would take free balance from the cross pool and move %s; the rule does not allow it (allow_closer_liquidation)", p.leverage, o)
			case o.distAfter.LessThan(floor):
				return false, fmt.Sprintf("%dx would move %s, under %s%%", p.leverage, o, floor.Shift(2).StringFixed(2))
			}
		}
		return true, ""
	}
}

// closer reports whether the call moves the liquidation price closer to
// the index.
func (p *prediction) closer() bool { return p.Closer(p.direction, p.index) }

// distances are the position's distances to liquidation before and after,
// fractions of the index (0 when there is no liquidation price).
func (p *prediction) distances() (before, after decimal.Decimal) {
	before, _ = margin.Distance(p.direction, p.index, p.LiquidationBefore)
	after, _ = margin.Distance(p.direction, p.index, p.LiquidationAfter)
	return before, after
}

// String is the prediction as the log, the audit log and the
// notifications say it: "liquidation 55120 → 61120 (13.88% → 4.50% away),
// +0 margin, free 3000 after".
func (p *prediction) String() string {
	before, after := p.distances()
	s := fmt.Sprintf("liquidation %s → %s (%s → %s away)", p.LiquidationBefore, p.LiquidationAfter,
		before.Shift(2).StringFixed(2)+"%", after.Shift(2).StringFixed(2)+"%")
	if !p.MarginMoved.IsZero() {
		sign := "+"
		if p.MarginMoved.IsNegative() {
			sign = ""
		}
		s += fmt.Sprintf(", %s%s margin", sign, p.MarginMoved.Round(2))
	}
	if p.freeKnown {
		s += fmt.Sprintf(", free balance %s after", p.FreeAfter.Round(2))
	} else {
		s += ", free balance unknown (" + p.freeWhy + ")"
	}
	for _, o := range p.others {
		s += "; " + o.String()
	}
	return s
}

// record is the prediction as an audit record carries it.
func (p *prediction) record() *Prediction {
	before, after := p.distances()
	r := &Prediction{LiquidationBefore: p.LiquidationBefore, LiquidationAfter: p.LiquidationAfter,
		DistanceBefore: before, DistanceAfter: after, MarginMoved: p.MarginMoved}
	if p.freeKnown {
		free := p.FreeAfter
		r.FreeAfter = &free
	}
	return r
}

// closerAllowed reports whether the plan's actions of kind may move a
// liquidation price closer: every rule asking for one opts in, and the
// floor is the highest of theirs.
func closerAllowed(pl *act.Plan, kind rules.ActionKind) (bool, decimal.Decimal) {
	floor := decimal.Zero
	asked := false
	for _, d := range pl.Due {
		for _, a := range d.Rule.Actions {
			if a.Kind != kind {
				continue
			}
			asked = true
			if !d.Rule.AllowCloserLiquidation {
				return false, floor
			}
			floor = decimal.Max(floor, decimal.NewFromFloat(d.Rule.MinLiquidationDistance))
		}
	}
	return asked, floor
}

// harmEvent is a settings change the engine did not send because it would
// move the position's liquidation price closer: audited and logged each
// time, notified when notify is set (once per firing).
func harmEvent(base Record, pred *prediction, why string, note bool) event {
	r := base
	r.Phase, r.Reason, r.Prediction = "skipped", why, pred.record()
	text := fmt.Sprintf("skipped %s %s: %s; %s", base.Action, base.Symbol, pred, why)
	ev := event{Audit: &r, Level: slog.LevelWarn, Msg: text,
		Attrs: []any{"action", base.Action, "symbol", base.Symbol, "rule", joinRules(base.Rules)},
		Count: func(m *Metrics) { m.Action(base.Action, "skipped_harmful") }}
	if note {
		ev.Note = &notify.Message{Time: base.Time, Kind: notify.KindActionFailed, Severity: "warning", Symbol: base.Symbol,
			Action: base.Action, Rule: joinRules(base.Rules), Text: text}
	}
	return ev
}

// mismatchEvent is the exchange reading back a liquidation price the
// model did not predict: the live test of the model's assumptions.
func mismatchEvent(now time.Time, symbol string, predicted, got decimal.Decimal) event {
	text := fmt.Sprintf("the margin model disagrees with the exchange on %s: predicted liquidation %s, got %s", symbol, predicted, got)
	return event{Level: slog.LevelWarn, Msg: text, Attrs: []any{"symbol", symbol},
		Audit: &Record{Time: now, Type: "model", Symbol: symbol, Reason: text},
		Count: func(m *Metrics) { m.ModelMismatch(symbol) }}
}
