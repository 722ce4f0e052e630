// Package model is the margin model as the engine's tick uses it: the fit
// of exchange/margin's model checked against the exchange's own figures
// (fit.go), the free balance inferred from the cross positions, the tick's
// account view the predictions are made on (predict.go), the account's
// figures the rules read (account.go), and each index's σ for the stress
// grid (vol.go). The engine hands it the tick's view (engine/market) and
// its time; it reaches back for nothing, and never imports the engine.
package model

import (
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Watch is the margin model as the tick uses it (tick-owned: only the
// goroutine holding the engine's tick calls it).
type Watch struct {
	// fit is the model checked against the exchange.
	fit fitWatch
	// free is the last inferred free balance.
	free freeCache
	// mm are the positions' maintenance margins by place of the view,
	// each worked out again only when its figures change.
	mm []mmSlot
	// view is the tick's account for the margin model, built at its
	// first settings call; nil until then.
	view *act.Model
	// liqs remembers isolated liquidation prices from tick to tick for
	// the tick's account.
	liqs margin.Liquidations
	// liqsOf and liqsAt are the view and its join the last tick's account
	// was built from: a view steady since holds its positions' prices
	// (margin.Liquidations.Hold).
	liqsOf *market.View
	liqsAt uint64
	// now is the tick's time; inFlight says which call was in flight
	// while the tick read the positions ("" when none): the snapshot may
	// predate its effect on the cross pool.
	now      time.Time
	inFlight string
	// lines are the account's, reused from tick to tick.
	lines []margin.Line
	// vol follows the indexes' volatility, read from hist when first
	// seen (warm); stress is the grid's settings (engine.stress_*) and
	// orders how a decision judges an order, set each tick.
	vol    volatility
	hist   History
	log    *slog.Logger
	stress Stress
	orders Orders
	// stressAt is when the status's stress grid was last worked out.
	stressAt time.Time
	// rules are the rules in force and fastDistance the fast lane's
	// distance (0 when the lane is off), set each tick: the floor no
	// settings call may leave a position under (floorOf).
	rules        *rules.Set
	fastDistance float64
	// places is each model position's place by symbol (act.Model.At),
	// as last made: the same while the view is steady since.
	places rowMaps[int]
	// dust is orders.Dust as a decimal.
	dust dustMemo
	// bufs are the tick's account's lists, reused from tick to tick.
	bufs accountBufs
	// fns are the tick's model's Sigma, Floor and Fast, made once.
	fns tickFuncs
}

// accountBufs are the tick's account (Account): the model itself, its
// positions, their floats and σ, the liquidation prices the exchange
// listed, and the account read for the grid and the forfeit from the
// floats (grid: margin.Floats.Scratch), written again at the first
// Account of each tick. The last tick's model is let go at Begin (a step
// uses the model of its tick: act.Host.Model), and none of them outlives
// the tick: its positions are read by the tick's model, its memo and the
// grids read from them (margin.Priced), each let go with the model; a
// prediction, a fill, a grid and the free balance's
// inputs keep copies (Apply and Reduce copy the positions, Liquidations
// and freeInputs.keep copy them), and the floats are read into the grid's
// own figures. The account is read from the floats once a tick (its memo
// is the model's, made once: act.Model.Floats holds while the model's
// account is the tick's own, and a call moves it on to another), and a
// prediction keeps none of it: its forfeits list parts of their own, the
// one before none (TestAccountBuffersOutliveNothing).
type accountBufs struct {
	model act.Model
	ps    []margin.Position
	lines []margin.Line
	sigma []float64
	liqs  []decimal.Decimal
	grid  margin.Scratch
	spare act.Spare // the candidates of its decisions by cost
}

// rowMaps is a map made from the rows of a view at one join (of, at),
// which no one writes: made again only when the view's rows changed
// since (market.View.Steady), the index prices aside.
type rowMaps[V any] struct {
	of *market.View
	at uint64
	m  map[string]V
}

// get is the map of view v's rows: the one kept when v is steady since it
// was made, else build's.
func (r *rowMaps[V]) get(v *market.View, build func() map[string]V) map[string]V {
	if r.m != nil && r.of == v && v.Steady(r.at) {
		return r.m
	}
	*r = rowMaps[V]{of: v, at: v.Joins(), m: build()}
	return r.m
}

// New returns a watch that has seen no tick. hist reads an index's
// history for σ's warm-up (nil: none is read); a nil logger discards.
func New(hist History, logger *slog.Logger) *Watch {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Watch{hist: hist, log: logger}
}

// Stress are the stress grid's settings: σ over Horizon, at least Floor;
// likely moves within ±Likely σ.
type Stress struct {
	Horizon time.Duration
	Floor   float64
	Likely  float64
	// FastMove and FastWindow: an index that spanned FastMove within
	// FastWindow is in a fast move (volatility.fast).
	FastMove   float64
	FastWindow time.Duration
}

// Orders are how the tick's decisions judge an order (engine.order_cost,
// engine.dust_notional, engine.orders_as_asked): Cost is
// act.Model.OrderCost, Dust its DustNotional (as a decimal: Watch makes
// it once per value) and AsAsked its OrdersAsAsked.
type Orders struct {
	Cost    float64
	Dust    float64
	AsAsked bool
}

// Settings are what the tick's model reads of the engine's settings and
// rules, set at each tick (Observe).
type Settings struct {
	Stress Stress
	Orders Orders
	// Rules are the rules in force, FastDistance the fast lane's distance
	// (0 when the lane is off): the floor no settings call may leave a
	// position under.
	Rules        *rules.Set
	FastDistance float64
}

// Begin starts the tick at now, whose positions were read while the call
// inFlight names was in flight ("" when none): the last tick's view is
// let go.
func (m *Watch) Begin(now time.Time, inFlight string) {
	m.now, m.inFlight, m.view = now, inFlight, nil
}

// Observe takes in the tick's view v at now: each open position's index
// price for σ, and the settings s the tick's account view reads.
func (m *Watch) Observe(now time.Time, v *market.View, s Settings) {
	m.vol.observe(now, v.Rows)
	m.stress, m.orders, m.rules, m.fastDistance = s.Stress, s.Orders, s.Rules, s.FastDistance
	if d := &m.dust; !d.made || d.of != s.Orders.Dust {
		*d = dustMemo{of: s.Orders.Dust, dec: decimal.NewFromFloat(s.Orders.Dust), made: true}
	}
}

// dustMemo is the dust notional as a decimal (act.Model.DustNotional),
// made again only when the setting's value changes: every tick made it
// from its float.
type dustMemo struct {
	of   float64
	dec  decimal.Decimal
	made bool
}

// Moved moves the tick's view on to next when the tick that decided at is
// the current one (a call of its plan changed the account).
func (m *Watch) Moved(at time.Time, next margin.Account) {
	if m.view != nil && m.now.Equal(at) {
		m.view.Acct = next
	}
}

// StressDue reports whether the status's stress grid is due at now (at
// most every every, and again after a clock that ran back), and notes it
// worked out at now when it is.
func (m *Watch) StressDue(now time.Time, every time.Duration) bool {
	if at := m.stressAt; !at.IsZero() && now.Sub(at) < every && !now.Before(at) {
		return false
	}
	m.stressAt = now
	return true
}
