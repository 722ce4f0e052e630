package engine

import (
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// modelWatch is the margin model as the tick uses it (tick-owned): the fit
// checked against the exchange's own figures (fit.go), the free balance
// inferred from the cross positions, and the tick's account view the
// predictions are made on (predict.go), with the account's figures
// (account.go). The engine hands it the tick's view (engine/market) and
// rows; it reaches back for nothing.
type modelWatch struct {
	// fit is the model checked against the exchange.
	fit fitWatch
	// free is the last inferred free balance.
	free freeCache
	// view is the tick's account for the margin model, built at its
	// first settings call; nil until then.
	view *act.Model
	// liqs remembers isolated liquidation prices from tick to tick for
	// the tick's account.
	liqs margin.Liquidations
	// now is the tick's time; inFlight says which call was in flight
	// while the tick read the positions ("" when none): the snapshot may
	// predate its effect on the cross pool.
	now      time.Time
	inFlight string
	// lines are the account's, reused from tick to tick.
	lines []margin.Line
	// vol follows the indexes' volatility; stress is the grid's settings
	// (engine.stress_*), set each tick.
	vol    volatility
	stress stressSettings
	// stressAt is when the status's stress grid was last worked out.
	stressAt time.Time
	// rules are the rules in force and fastDistance the fast lane's
	// distance (0 when the lane is off), set each tick: the floor no
	// settings call may leave a position under (floorOf).
	rules        *rules.Set
	fastDistance float64
}

// stressSettings are the stress grid's settings: σ over horizon, at least
// floor; likely moves within ±likely σ.
type stressSettings struct {
	horizon time.Duration
	floor   float64
	likely  float64
	// fastMove and fastWindow: an index that spanned fastMove within
	// fastWindow is in a fast move (volatility.fast).
	fastMove   float64
	fastWindow time.Duration
	// orderCost and dust: act.Model.OrderCost and DustNotional.
	orderCost float64
	dust      decimal.Decimal
	asAsked   bool
}

// begin starts the tick at now, whose positions were read while the call
// inFlight names was in flight ("" when none): the last tick's view is
// let go.
func (m *modelWatch) begin(now time.Time, inFlight string) {
	m.now, m.inFlight, m.view = now, inFlight, nil
}

// moved moves the tick's view on to next when the tick that decided at is
// the current one (a call of its plan changed the account).
func (m *modelWatch) moved(at time.Time, next margin.Account) {
	if m.view != nil && m.now.Equal(at) {
		m.view.Acct = next
	}
}
