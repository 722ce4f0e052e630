package engine

import (
	"time"

	"github.com/riskguard/riskguard/engine/dispatch"
	"github.com/riskguard/riskguard/engine/lane"
	"github.com/riskguard/riskguard/engine/model"
	"github.com/riskguard/riskguard/engine/reconcile"
)

// Config is the engine's part of the configuration file. Each field is one
// row of Settings (settings.go): its key, its default, whether a reload
// applies it, its check.
type Config struct {
	// Interval between two ticks of Run.
	Interval time.Duration
	// DryRun runs everything but the mutating calls, which are logged and
	// audited as intended.
	DryRun bool
	// MaxActionsPerMinute is the global budget of mutating calls; the call
	// past it opens the circuit breaker.
	MaxActionsPerMinute int
	// BreakerReset is how long an open breaker stays open.
	BreakerReset time.Duration
	// SymbolsRefresh is how often symbols and risk limits are re-read from
	// /v1/market/trades; they are also re-read when a position names an
	// unknown symbol id.
	SymbolsRefresh time.Duration
	// StaleAfter treats an index price that has not changed for this long
	// as missing; 0 disables the check.
	StaleAfter time.Duration
	// IndexNames maps a contract symbol name to the index name that prices
	// it; by default the symbol's baseName.
	IndexNames map[string]string
	// AuditLog is the path of the JSON-lines audit log; empty disables it.
	AuditLog string
	// StateFile is the path of the persisted rule states and cooldowns;
	// empty keeps them in memory only.
	StateFile string
	// ActionTimeout bounds each mutating call, which finishes even when the
	// daemon is asked to stop.
	ActionTimeout time.Duration
	// ActionConcurrency is how many symbols' actions run at once in a tick:
	// a call that hangs on one symbol does not hold back another's.
	ActionConcurrency int
	// MaxSnapshotAge is the age of a tick's snapshot (from the start of its
	// read) past which no action is sent on it; the next tick reads afresh.
	// 0 means two intervals, at least minSnapshotAge.
	MaxSnapshotAge time.Duration
	// MaxWindow is the longest window a rule's function over time may
	// ask for; the loader refuses longer ones.
	MaxWindow time.Duration
	// SymbolBackoffMax caps the backoff of a symbol whose actions keep
	// failing: after n consecutive failures its next attempt waits
	// interval×2^(n-1), at most this long. Other symbols are not held back.
	SymbolBackoffMax time.Duration
	// LiquidationMargin is how close to its liquidation price (a fraction
	// of it) a position must have been, by the index when it was gone or
	// at the last read, for its disappearance to be said as a liquidation
	// rather than a close.
	LiquidationMargin float64
	// ListingLag is how long after an answer that says an order filled
	// the positions listing may still show the position as before it (a
	// read model behind the matching engine): it is read again within it,
	// and one that still disagrees is an inconsistency of the exchange,
	// never a reason to send the order again.
	ListingLag time.Duration
	// LiquidationConfirmReads is how many reads in a row a position at,
	// past or near its liquidation price (LiquidationMargin) must be left
	// out of the listing before it is said liquidated; the first says it
	// probably was. A position listed empty is said at once.
	LiquidationConfirmReads int
	// UnreachableAfter is how long the reads may keep failing before a
	// critical notification says the exchange is unreachable; one more says
	// when it is back.
	UnreachableAfter time.Duration
	// FastInterval replaces Interval while any rule is pending or firing
	// on a position, or any position is closer to its liquidation price
	// than FastDistance: the guard looks more often only when it may have
	// to act. 0 (the default) turns the fast lane off.
	FastInterval time.Duration
	// AllowedHosts are the host names (or addresses) the status page and
	// API answer to besides the loopback ones (localhost, 127.0.0.1,
	// [::1]): a request naming another host is refused, so that a web
	// page cannot read them through DNS rebinding. The engine does not
	// read it; the daemon's listener does.
	AllowedHosts []string
	// ControlFailAfter is how long the Telegram control's getUpdates may
	// keep failing before a critical notification and
	// riskguard_telegram_control_failing say so. The engine does not read
	// it; the daemon's control does.
	ControlFailAfter time.Duration
	// StressHorizon, StressSigmaFloor and StressLikely shape the stress
	// grid every action is judged by (margin.Stress): each index's σ is
	// the volatility of its own recent returns scaled to StressHorizon
	// (the time a move has before someone reacts), at least
	// StressSigmaFloor (a fraction of the index, for a quiet market); a
	// move within ±StressLikely σ is likely.
	StressHorizon    time.Duration
	StressSigmaFloor float64
	StressLikely     float64
	// FastMove and FastMoveWindow say when an index is in a fast move: it
	// spanned at least FastMove (a fraction: highest / lowest − 1) within
	// the last FastMoveWindow. No call moves a position closer to its
	// liquidation price while its index is in one: a wick is no time to
	// move margin.
	FastMove       float64
	FastMoveWindow time.Duration
	// OrderCost is what an order pays the market, a fraction of its
	// notional (the taker fee and half the spread): what a reduce costs at
	// mark to market when the decision compares it with holding.
	OrderCost float64
	// DustNotional is the notional (quote currency) under which what is
	// left of a position is dust: a reduce that would leave less closes
	// it whole.
	DustNotional float64
	// OrdersAsAsked sends a reduce order as its rules ask, unjudged: for
	// rules that reduce for a reason of their own (exposure, not the risk
	// of liquidation), which the expected cost does not see.
	OrdersAsAsked bool
	// FastDistance is the liquidation distance (a fraction of the index,
	// as the rules' liquidationDistance) under which a position puts the
	// guard in the fast lane.
	FastDistance float64
	// ModelTolerance is the worst relative error of the margin model
	// against the exchange's own figures (margins, liquidation prices,
	// the free balance the cross positions imply) under which the model
	// fits: only then do its predictions decide.
	ModelTolerance float64
}

// TickRequests is the number of exchange requests a tick is budgeted for
// when the fast lane's rate is checked against the client's rate limit:
// the two reads of a steady tick (positions, index prices) and one left
// for an action or a symbols refresh, so that the fast lane never eats the
// budget an action needs.
const TickRequests = 3

// minSnapshotAge is the least default MaxSnapshotAge: a short interval
// does not make an ordinary read (a few round trips) too old to act on.
const minSnapshotAge = 3 * time.Second

// stress is the stress grid's settings of the config.
func (c Config) stress() model.Stress {
	return model.Stress{Horizon: c.StressHorizon, Floor: c.StressSigmaFloor, Likely: c.StressLikely, FastMove: c.FastMove, FastWindow: c.FastMoveWindow}
}

// orders is how the config has a decision judge an order.
func (c Config) orders() model.Orders {
	return model.Orders{Cost: c.OrderCost, Dust: c.DustNotional, AsAsked: c.OrdersAsAsked}
}

// reconcileSettings are the settings the reconciler reads.
func (c Config) reconcileSettings() reconcile.Settings {
	return reconcile.Settings{LiquidationMargin: c.LiquidationMargin, ConfirmReads: c.LiquidationConfirmReads, Interval: c.Interval}
}

// lane is the fast lane's settings.
func (c Config) lane() lane.Settings {
	return lane.Settings{Interval: c.Interval, FastInterval: c.FastInterval, FastDistance: c.FastDistance}
}

// laneDistance is the fast lane's distance when the lane is on, 0 when it
// is off: a floor of the settings calls (act.Model.Floor).
func (c Config) laneDistance() float64 {
	if c.FastInterval <= 0 || c.FastInterval >= c.Interval {
		return 0
	}
	return c.FastDistance
}

// dispatch is the settings the dispatcher reads.
func (c Config) dispatch() dispatch.Config {
	return dispatch.Config{DryRun: c.DryRun, MaxActionsPerMinute: c.MaxActionsPerMinute, BreakerReset: c.BreakerReset,
		MaxSnapshotAge: c.MaxSnapshotAge, ActionConcurrency: c.ActionConcurrency, ActionTimeout: c.ActionTimeout,
		Interval: c.Interval, SymbolBackoffMax: c.SymbolBackoffMax, ListingLag: c.ListingLag}
}
