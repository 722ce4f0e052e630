package engine

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Status is what the guard knows at a moment, for the status page and its
// JSON API: the positions of the last snapshot with every rule's state, the
// last actions, the breaker, the silences and the pauses.
type Status struct {
	Time time.Time `json:"time"`
	// LastSuccess is the tick time of the last complete snapshot; zero
	// before the first. SnapshotAge is Time minus it, in seconds.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	SnapshotAge float64   `json:"snapshotAgeSeconds"`
	// LastTick is the time of the last tick, LastError its error ("" when
	// it was complete).
	LastTick  time.Time     `json:"lastTick,omitzero"`
	LastError string        `json:"lastError,omitempty"`
	DryRun    bool          `json:"dryRun"`
	Breaker   BreakerStatus `json:"breaker"`
	// Account is the account as the margin model makes it of the last
	// snapshot read; nil before the first.
	Account *AccountStatus `json:"account"`
	// Positions are the non-empty positions of the last snapshot read.
	Positions []PositionStatus `json:"positions"`
	// Actions are the last actions decided, newest first.
	Actions  []RecentAction    `json:"actions"`
	Silences []control.Silence `json:"silences"`
	Pauses   []control.Pause   `json:"pauses"`
	// InFlight are the mutating calls still running, oldest first: a
	// symbol with one is not acted on again until it ends.
	InFlight []CallInFlight `json:"inFlight"`
	// Model is the margin model's fit to the exchange's own figures at
	// the last check; absent before the first.
	Model *ModelFit `json:"model,omitempty"`
}

// CallInFlight is a mutating call still running.
type CallInFlight struct {
	Symbol string    `json:"symbol"`
	Call   string    `json:"call"`
	Since  time.Time `json:"since"`
	// Running is how long it has been running at the status's time.
	Running float64 `json:"runningSeconds"`
}

// InFlight lists the mutating calls still running at now, oldest first. It
// never waits for a tick.
func (e *Engine) InFlight(now time.Time) []CallInFlight {
	out := []CallInFlight{}
	for _, f := range e.exec.InFlight() {
		out = append(out, CallInFlight{Symbol: f.Key, Call: f.Call, Since: f.Since, Running: max(now.Sub(f.Since), 0).Seconds()})
	}
	return out
}

// BreakerStatus is the action budget's circuit breaker.
type BreakerStatus struct {
	Open      bool      `json:"open"`
	OpenUntil time.Time `json:"openUntil,omitzero"`
	// Sent is the mutating calls of the last minute, against Budget.
	Sent   int `json:"sentLastMinute"`
	Budget int `json:"budgetPerMinute"`
}

// PositionStatus is one position as the last snapshot read it.
type PositionStatus struct {
	Symbol   string          `json:"symbol"`
	ID       string          `json:"id"`
	Side     string          `json:"side"`
	Size     decimal.Decimal `json:"size"`
	Leverage int             `json:"leverage"`
	// MaxLeverage is the risk limit's; 0 when unknown.
	MaxLeverage      int             `json:"maxLeverage"`
	MarginMode       string          `json:"marginMode"` // cross or isolated
	Margin           decimal.Decimal `json:"margin"`
	Index            decimal.Decimal `json:"index"`
	LiquidationPrice decimal.Decimal `json:"liquidationPrice"`
	// Distance is how far the index is from the liquidation price, a
	// fraction of the index; nil without an index price.
	Distance *float64     `json:"liquidationDistance"`
	Rules    []RuleStatus `json:"rules"`
}

// AccountStatus is the account line of the status page, as the rules'
// account sees it: a figure the model cannot know (the free balance
// without a cross position to infer it from, every total while a position
// is unreadable) is null, no data, never 0.
type AccountStatus struct {
	Equity        *float64 `json:"equity"`
	FreeBalance   *float64 `json:"freeBalance"`
	Margin        *float64 `json:"margin"`
	UnrealizedPNL *float64 `json:"unrealizedPNL"`
	// MarginRatio is the cross positions' maintenance margin over their
	// pool: 1 is liquidation.
	MarginRatio *float64 `json:"marginRatio"`
	Leverage    *float64 `json:"leverage"`
}

// accountStatus is a's known figures. The status and its figures are one
// allocation: it is made every tick.
func accountStatus(a *rules.Account) *AccountStatus {
	all := &struct {
		s AccountStatus
		v [6]float64
	}{}
	n := 0
	known := func(f rules.AccountField, v float64) *float64 {
		if a.Unknown()&f != 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		all.v[n] = v
		n++
		return &all.v[n-1]
	}
	all.s = AccountStatus{
		Equity: known(rules.AccountEquity, a.Equity), FreeBalance: known(rules.AccountFreeBalance, a.FreeBalance),
		Margin: known(rules.AccountMargin, a.Margin), UnrealizedPNL: known(rules.AccountUnrealizedPNL, a.UnrealizedPNL),
		MarginRatio: known(rules.AccountMarginRatio, a.MarginRatio), Leverage: known(rules.AccountLeverage, a.Leverage),
	}
	return &all.s
}

// RuleStatus is one rule's state on a position.
type RuleStatus struct {
	Rule  string `json:"rule"`
	State string `json:"state"`
	// Since is when it became pending or fired; zero when inactive or
	// without data.
	Since time.Time `json:"since,omitzero"`
}

// published is what the last tick left for Status; under mu.
type published struct {
	// listed are the contract symbols of the last symbols read, sorted.
	listed    []string
	positions []statusRow
	lastTick  time.Time
	lastErr   string
	breaker   act.Breaker
	dryRun    bool
	budget    int
	account   *AccountStatus
	// fit is the last model fit; model is what Status shows of it, made
	// from it at the first Status after it changed (a replay checks the
	// fit every step and seldom asks).
	fit   *margin.Fit
	model *ModelFit
}

// symbols are the symbols a control may name besides "account": those
// the exchange lists and the open positions' of the last snapshot.
func (p *published) symbols() []string {
	out := slices.Clone(p.listed)
	for _, r := range p.positions {
		name := "" // as Status shows a position of an unknown symbol
		if r.sym != nil {
			name = r.sym.Name
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// publishStatus records what Status shows of the tick that read snap
// (nil when the positions could not be read: the last ones are kept). The
// caller holds tick.
func (e *Engine) publishStatus(snap *Snapshot, err error) {
	var pos []statusRow
	var acct *AccountStatus
	if snap != nil {
		// The tick made the account when a rule reads it; else it is made
		// for the status once someone has asked for it (a backtest never
		// does, and does not pay for it).
		switch {
		case e.win.NeedAccount():
			acct = accountStatus(&e.acct)
		case e.statusRead.Load():
			a := e.model.accountOf(&e.view, e.rowsFor(snap))
			acct = accountStatus(&a)
		}
		// Built in the list the previous publication replaced: Status
		// reads the published one under mu, so no reader holds it.
		pos = e.statusSpare[:0]
		rows := e.rowsFor(snap)
		for i := range rows {
			r := &rows[i]
			if r.P.Empty || r.P.Quantity.IsZero() {
				continue
			}
			if len(pos) < cap(pos) {
				pos = pos[:len(pos)+1]
			} else {
				pos = append(pos, statusRow{})
			}
			pos[len(pos)-1].set(r)
		}
		// Let go of the older snapshots' positions the list held past
		// its new end.
		if n := len(e.statusSpare); n > len(pos) {
			clear(pos[len(pos):n])
		}
	}
	b := e.breaker.Clone()
	e.mu.Lock()
	defer e.mu.Unlock()
	if snap != nil {
		e.statusSpare, e.status.positions = e.status.positions, pos
		e.status.account = acct
	}
	e.status.lastTick, e.status.lastErr, e.status.breaker = e.lastTick, "", b
	e.status.dryRun, e.status.budget = e.cfg.DryRun, e.cfg.MaxActionsPerMinute
	if err != nil {
		e.status.lastErr = err.Error()
	}
}

// statusRow is a position of the snapshot Status shows: it makes the
// PositionStatus when asked, from the position as read, its symbol (nil
// when unknown) and its index price (zero when none to show), so that a
// tick does not pay for a page nobody reads.
type statusRow struct {
	p     *exchange.Position
	sym   *exchange.ContractSymbol
	index decimal.Decimal
}

// set makes sr the status of the tick row r's position, writing a pointer
// only when it changes (a write while the collector marks costs a
// barrier).
func (sr *statusRow) set(r *tickRow) {
	sr.p = r.P
	if sr.sym != r.Sym {
		sr.sym = r.Sym
	}
	var index decimal.Decimal
	// An index a float cannot hold ("1e400" is +Inf) is no data, as the
	// rules see it: no index, no distance.
	if r.Sym != nil && r.HasIndex && finite(r.IndexF) {
		index = r.Index
	}
	if sr.index != index {
		sr.index = index
	}
}

// status is the row's position as Status shows it.
func (sr *statusRow) status() PositionStatus {
	p := sr.p
	ps := PositionStatus{ID: p.ID, Side: p.Direction, Size: p.Quantity, Leverage: p.Leverage, MaxLeverage: p.RiskLimit.MaxLeverage,
		MarginMode: "isolated", Margin: p.Margin, LiquidationPrice: p.LiquidationPrice}
	if p.Cross {
		ps.MarginMode = "cross"
	}
	if sym := sr.sym; sym != nil {
		ps.Symbol = sym.Name
		if ps.MaxLeverage == 0 {
			ps.MaxLeverage = sym.RiskLimit.MaxLeverage
		}
		if sr.index.IsPositive() {
			ps.Index = sr.index
		}
	}
	return ps
}

// positionsLocked are the published positions as Status shows them, in a
// new list. The caller holds mu.
func (e *Engine) positionsLocked() []PositionStatus {
	if e.status.positions == nil {
		return nil
	}
	out := make([]PositionStatus, len(e.status.positions))
	for i := range e.status.positions {
		out[i] = e.status.positions[i].status()
	}
	return out
}

// complete fills what a tick leaves for Status to compute when asked
// (a tick does not pay for a page nobody reads): the distance to
// liquidation, and each rule's state from the rules in force and the
// active ones.
func (ps *PositionStatus) complete(set *rules.Set, active []ActiveRule) {
	if ps.Index.IsPositive() {
		// Not finite (a liquidation price past a float's range): no data,
		// never a NaN the status's JSON cannot carry.
		if d := rules.LiquidationDistance(side(ps.Side), ps.Index.InexactFloat64(), ps.LiquidationPrice.InexactFloat64()); finite(d) {
			ps.Distance = &d
		}
	}
	// [] when no rule applies (only account rules, or rules of other
	// symbols): the page reads a list.
	ps.Rules = []RuleStatus{}
	for _, r := range set.Rules {
		if r.Account() || !r.AppliesTo(ps.Symbol) {
			continue
		}
		rs := RuleStatus{Rule: r.Name, State: Inactive.String()}
		for _, a := range active {
			if a.Rule == r.Name && a.Symbol == ps.Symbol {
				rs.State, rs.Since = a.State.String(), a.Since
			}
		}
		ps.Rules = append(ps.Rules, rs)
	}
}

// Status returns what the guard knows at now. It never waits for a tick.
func (e *Engine) Status(now time.Time) *Status {
	e.statusRead.Store(true)
	e.mu.Lock()
	st := &Status{Time: now, LastSuccess: e.lastOK, LastTick: e.status.lastTick, LastError: e.status.lastErr,
		Positions: e.positionsLocked(), DryRun: e.status.dryRun, Account: e.status.account}
	set, active := e.current, e.active
	b := e.status.breaker
	b.Sent = slices.Clone(b.Sent)
	budget := e.status.budget
	if e.status.model == nil && e.status.fit != nil {
		e.status.model = modelFitOf(*e.status.fit)
	}
	st.Model = e.status.model
	e.mu.Unlock()
	if !st.LastSuccess.IsZero() {
		st.SnapshotAge = now.Sub(st.LastSuccess).Seconds()
	}
	b.Prune(now)
	st.Breaker = BreakerStatus{Open: b.Open(now), Sent: len(b.Sent), Budget: budget}
	if st.Breaker.Open {
		st.Breaker.OpenUntil = b.OpenUntil
	}
	slices.SortFunc(st.Positions, func(a, b PositionStatus) int {
		return cmp.Or(cmp.Compare(a.Symbol, b.Symbol), cmp.Compare(a.Side, b.Side))
	})
	for i := range st.Positions {
		st.Positions[i].complete(set, active)
	}
	st.Actions = e.jr.Recent()
	if st.Actions == nil {
		st.Actions = []RecentAction{}
	}
	st.Silences, st.Pauses = e.ctl.Silences(now), e.ctl.Pauses(now)
	st.InFlight = e.InFlight(now)
	if st.Positions == nil {
		st.Positions = []PositionStatus{}
	}
	if st.Silences == nil {
		st.Silences = []control.Silence{}
	}
	if st.Pauses == nil {
		st.Pauses = []control.Pause{}
	}
	return st
}

// finite reports whether f is a number JSON can carry and a reader can use.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
