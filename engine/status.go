package engine

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/engine/model"
	"github.com/riskguard/riskguard/engine/reconcile"
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
	// before the first. SnapshotAge is Time minus it, in seconds; nil
	// (null) while no snapshot was ever read, so that "never" is not
	// "just now".
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	SnapshotAge *float64  `json:"snapshotAgeSeconds"`
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
	Actions  []journal.RecentAction `json:"actions"`
	Silences []control.Silence      `json:"silences"`
	Pauses   []control.Pause        `json:"pauses"`
	// InFlight are the mutating calls still running, oldest first: a
	// symbol with one is not acted on again until it ends.
	InFlight []CallInFlight `json:"inFlight"`
	// Model is the margin model's fit to the exchange's own figures at
	// the last check; absent before the first.
	Model *ModelFit `json:"model,omitempty"`
	// Liquidations are the positions the guard saw liquidated that no one
	// has acknowledged yet (AckLiquidation), oldest first; [] when there
	// is none.
	Liquidations []LiquidationStatus `json:"liquidations"`
	// Stress is the account on the stress grid, worked out at most every
	// stressEvery once the status is read; null before that, or when the
	// model cannot tell (no free balance for cross positions, an index
	// without a price).
	Stress *StressStatus `json:"stress"`
}

// StressStatus is the account on the stress grid (margin.Stress), as the
// status shows it.
type StressStatus struct {
	Time time.Time `json:"time"`
	// ExpectedLoss is in the quote currency; Likely the likely range in σ.
	ExpectedLoss float64 `json:"expectedLoss"`
	Likely       float64 `json:"likelySigma"`
	// Sigma is each symbol's σ over engine.stress_horizon, a fraction.
	Sigma []SigmaStatus `json:"sigma"`
	// Fatal are the likely moves that liquidate a position, smallest
	// first per position ("−3.40% (-1.7σ, every index together)
	// liquidates XSOL LONG"); [] when none.
	Fatal []string `json:"fatal"`
	// Moves are the loss each move of ±1…5σ leaves (margin.StressShown),
	// every index together and the worst of one index alone.
	Moves []StressMove `json:"moves"`
}

// StressMove is the loss one move of the grid leaves: every index
// together, and the index alone whose move costs the most (the first of
// equals; "" and 0 when none costs anything). Lost names what each
// liquidates ("XBTC LONG").
type StressMove struct {
	Sigma        float64  `json:"sigma"`
	Together     float64  `json:"together"`
	TogetherLost []string `json:"togetherLost"`
	Alone        float64  `json:"alone"`
	AloneSymbol  string   `json:"aloneSymbol"`
	AloneLost    []string `json:"aloneLost"`
}

// SigmaStatus is one symbol's σ.
type SigmaStatus struct {
	Symbol string  `json:"symbol"`
	Sigma  float64 `json:"sigma"`
}

// stressEvery is how often the status's stress grid is worked out again.
const stressEvery = 10 * time.Second

// stressStatus is s as the status shows it, at now; nil when unknown.
func stressStatus(s margin.Stress, now time.Time) *StressStatus {
	if !s.Known {
		return nil
	}
	st := &StressStatus{Time: now, ExpectedLoss: math.Round(s.Expected*100) / 100, Likely: s.Likely, Sigma: []SigmaStatus{}, Fatal: []string{}}
	for _, sg := range s.Sigma {
		st.Sigma = append(st.Sigma, SigmaStatus{Symbol: sg.Symbol, Sigma: sg.Sigma})
	}
	for _, f := range s.Fatal {
		st.Fatal = append(st.Fatal, f.String())
	}
	families, rows := s.Table()
	st.Moves = []StressMove{}
	for _, r := range rows {
		mv := StressMove{Sigma: r.K, TogetherLost: []string{}, AloneLost: []string{}}
		for i, p := range r.Points {
			loss := math.Round(p.Loss*100) / 100
			switch {
			case families[i] == margin.StressTogether:
				mv.Together, mv.TogetherLost = loss, append(mv.TogetherLost, p.Lost...)
			case loss > mv.Alone:
				mv.Alone, mv.AloneSymbol, mv.AloneLost = loss, families[i], append([]string{}, p.Lost...)
			}
		}
		st.Moves = append(st.Moves, mv)
	}
	return st
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

// modelFitOf is what Status shows of a fit.
func modelFitOf(f margin.Fit) *ModelFit {
	mf := &ModelFit{Fits: f.Fits(), Worst: f.Worst, WorstSymbol: f.WorstSymbol, WorstFigure: f.WorstWhat, Tolerance: f.Tolerance,
		Summary: f.Summary(), Positions: make([]ModelFitPosition, 0, len(f.Positions))}
	for _, p := range f.Positions {
		mf.Positions = append(mf.Positions, ModelFitPosition{Symbol: p.Symbol, Fits: p.Fits(f.Tolerance), Error: p.Error, Figure: p.What})
	}
	return mf
}

// LiquidationStatus is a position the guard saw liquidated, as the status
// page keeps it marked until acknowledged.
type LiquidationStatus struct {
	Time             time.Time       `json:"time"`
	Symbol           string          `json:"symbol"`
	Side             string          `json:"side"`
	Quantity         decimal.Decimal `json:"quantity"`
	LiquidationPrice decimal.Decimal `json:"liquidationPrice"`
	Index            decimal.Decimal `json:"index"`
	// Margin is the position's margin at the last read before it was
	// gone; Cross says it was a cross position.
	Margin decimal.Decimal `json:"margin"`
	Cross  bool            `json:"cross"`
	// Loss says what the liquidation cost, as far as the last read tells
	// (lossText): the page's banner and riskguard status name it.
	Loss string `json:"loss"`
	// Text is what the critical notification said.
	Text string `json:"text"`
}

// lossText is what a liquidation cost as far as the last read tells: an
// isolated position loses its margin; a cross one its margin and what the
// shared pool covered, which no read shows.
func (l LiquidationStatus) lossText() string {
	switch {
	case !l.Margin.IsPositive():
		return "its margin (not read)"
	case l.Cross:
		return "its margin " + l.Margin.Round(2).StringFixed(2) + " and what the cross pool covered"
	}
	return "its margin " + l.Margin.Round(2).StringFixed(2) + " (isolated)"
}

// ClosedOrderReader is an exchange adapter that lists the closed orders: a
// liquidation's evidence (reconcile.Evidence).
type ClosedOrderReader = reconcile.ClosedOrderReader

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
func (e *Engine) InFlight(now time.Time) []CallInFlight { return callsInFlight(e.disp.InFlight(), now) }

// callsInFlight are the executor's calls in flight as the status shows
// them at now.
func callsInFlight(fl []act.Flight, now time.Time) []CallInFlight {
	out := []CallInFlight{}
	for _, f := range fl {
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
	MaxLeverage int             `json:"maxLeverage"`
	MarginMode  string          `json:"marginMode"` // cross or isolated
	Margin      decimal.Decimal `json:"margin"`
	// QuoteScale is the symbol's quoteScale: the decimals its money is
	// shown with (the margin as read may carry more); 0 when unknown.
	QuoteScale       int             `json:"quoteScale"`
	Index            decimal.Decimal `json:"index"`
	LiquidationPrice decimal.Decimal `json:"liquidationPrice"`
	// Distance is how far the index is from the liquidation price, a
	// fraction of the index; nil without an index price.
	Distance *float64     `json:"liquidationDistance"`
	Rules    []RuleStatus `json:"rules"`
	// Thresholds are the distances under which the rules of the position
	// fire, for those whose condition says one plainly
	// (rules.Rule.DistanceBelow); [] when none does. The page colours the
	// distance by them.
	Thresholds []DistanceThreshold `json:"distanceThresholds"`
}

// DistanceThreshold is a rule's liquidation distance threshold.
type DistanceThreshold struct {
	Rule     string  `json:"rule"`
	Severity string  `json:"severity"`
	Below    float64 `json:"below"`
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
	// Next says, for a firing rule only, what the guard does next about
	// it and why no more: "paused …", "cooling down until …" (after what
	// its last attempt did: at target, skipped because …, refused …),
	// "held: …", "circuit breaker open until …", "acts at the next tick
	// its condition holds". Absent on the other states.
	Next string `json:"next,omitempty"`
}

// ruleNote is what became of a rule's actions on a symbol at its last
// attempt (engine/dispatch's nextNote): "" when they did what was asked.
type ruleNote struct {
	at   time.Time
	text string
}

// nexts is what Status reads to say what the guard does next about a
// firing rule (RuleStatus.Next).
type nexts struct {
	now     time.Time
	notes   map[[2]string]ruleNote // by symbol and rule
	pauses  []control.Pause
	breaker BreakerStatus
	dryRun  bool
}

// text is Next of firing rule r, as a tells of it.
func (n *nexts) text(r *rules.Rule, a alert.Alert) string {
	for _, p := range n.pauses {
		if !p.StartsAt.After(n.now) && !p.Ended(n.now) && p.Holds([]string{r.Name}, a.Symbol) {
			until := "until resumed"
			if !p.EndsAt.IsZero() {
				until = "until " + n.clock(p.EndsAt)
			}
			return fmt.Sprintf("paused %s (by %s): nothing is sent", until, p.CreatedBy)
		}
	}
	note, noted := n.notes[[2]string{a.Symbol, r.Name}]
	if !a.LastActionAt.IsZero() {
		if until := a.LastActionAt.Add(r.Cooldown); until.After(n.now) {
			did := "acted at " + n.clock(a.LastActionAt)
			if n.dryRun {
				did = "logged at " + n.clock(a.LastActionAt) + " (dry run: nothing sent)"
			}
			if noted && note.text != "" && !note.at.Before(a.LastActionAt) {
				did = note.text
			}
			return did + "; cooling down until " + n.clock(until)
		}
	}
	if n.breaker.Open {
		return "circuit breaker open until " + n.clock(n.breaker.OpenUntil) + ": no call is sent"
	}
	if noted && note.text != "" && !note.at.Before(a.Since) {
		return note.text
	}
	return "acts at the next tick its condition holds"
}

// clock is t as the status's texts say it: the time in UTC, with the date
// when it is not now's.
func (n *nexts) clock(t time.Time) string {
	t = t.UTC()
	if y, m, d := t.Date(); y == n.now.UTC().Year() && m == n.now.UTC().Month() && d == n.now.UTC().Day() {
		return t.Format("15:04:05") + " UTC"
	}
	return t.Format("2006-01-02 15:04:05") + " UTC"
}

// board is what callers read while a tick may be running: what the last
// tick published for Status, the rule set in force and the active rules,
// when the last complete snapshot was read, the wait before the next tick,
// and a reload waiting for the running tick to end. Its lock is held for
// a few assignments only, never across I/O: nothing that answers a caller
// waits for a tick.
type board struct {
	mu        sync.Mutex
	lastOK    time.Time
	current   *rules.Set    // the set in force, as Rules reports it
	stress    *StressStatus // the last stress grid worked out (setStress)
	active    []alert.Alert // published after every tick that changed a state; only copies leave the board
	status    published     // what the last tick left for Status
	wait      time.Duration
	pending   *rules.Set // a reload waiting for the running tick to end
	pendingAt time.Time
	// pendingCfg is the reload's engine settings; nil to keep them.
	pendingCfg *Config

	// spare is the list of positions the last publication replaced,
	// reused by the next; listedOf is the read status.listed was made of
	// (both tick-owned).
	spare    []statusRow
	listedOf *exchange.Trades
	// read is set once Status is called: from then on each tick also
	// makes the account for it when no rule does.
	read atomic.Bool
	// liquidated are the liquidations not acknowledged yet (at most
	// maxLiquidationsKept, the oldest dropped).
	liquidated []LiquidationStatus
	// notes are what became of the firing rules' last attempts, by
	// symbol and rule (a hedge-mode long and short share one), for
	// Status's next texts; those of rules no longer active are dropped
	// when the active ones are published.
	notes map[[2]string]ruleNote
}

// note records what became of rule's actions on symbol at the attempt at.
func (b *board) note(at time.Time, symbol, rule, text string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.notes == nil {
		b.notes = make(map[[2]string]ruleNote)
	}
	b.notes[[2]string{symbol, rule}] = ruleNote{at: at, text: text}
}

// maxLiquidationsKept bounds the liquidations the board keeps marked.
const maxLiquidationsKept = 100

// liquidation keeps the reconciler's rl marked until it is acknowledged.
func (b *board) liquidation(rl reconcile.Liquidation) {
	l := LiquidationStatus{Time: rl.Time, Symbol: rl.Symbol, Side: rl.Side, Quantity: rl.Quantity, LiquidationPrice: rl.LiquidationPrice,
		Index: rl.Index, Margin: rl.Margin, Cross: rl.Cross, Text: rl.Text}
	l.Loss = l.lossText()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.liquidated = append(b.liquidated, l)
	if n := len(b.liquidated) - maxLiquidationsKept; n > 0 {
		b.liquidated = slices.Delete(b.liquidated, 0, n)
	}
}

// ErrNoLiquidation is the error of acknowledging a liquidation of a symbol
// the guard does not keep marked.
var ErrNoLiquidation = errors.New("no liquidation to acknowledge")

// ackLiquidation unmarks the liquidations of symbol (every one when
// symbol is "*") and returns how many.
func (b *board) ackLiquidation(symbol string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.liquidated)
	b.liquidated = slices.DeleteFunc(b.liquidated, func(l LiquidationStatus) bool { return symbol == "*" || strings.EqualFold(l.Symbol, symbol) })
	if n == len(b.liquidated) {
		return 0, fmt.Errorf("%w of %s: the guard keeps none marked", ErrNoLiquidation, symbol)
	}
	return n - len(b.liquidated), nil
}

// newBoard is the board before the first tick: set in force, the next
// tick after wait.
func newBoard(set *rules.Set, wait time.Duration) *board {
	return &board{current: set, wait: wait}
}

// Rules returns the rule set in force, or the one a reload is about to
// put in force.
func (b *board) Rules() *rules.Set {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending != nil {
		return b.pending
	}
	return b.current
}

// Active lists the rules that are pending, firing or without data, as the
// last tick left them.
func (b *board) Active() []alert.Alert {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.activeLocked()
}

// activeLocked is a copy of the active rules, nil for none: the board's
// own list is written again by the next tick (setActive). The caller
// holds mu.
func (b *board) activeLocked() []alert.Alert {
	if len(b.active) == 0 {
		return nil
	}
	return slices.Clone(b.active)
}

// LastSuccess is the time of the last tick whose snapshot was complete.
func (b *board) LastSuccess() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastOK
}

// NextInterval is the wait the last tick chose before the next.
func (b *board) NextInterval() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.wait
}

// Listed returns the contract symbols of the last symbols read, or nil
// before the first.
func (b *board) Listed() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.status.listed)
}

// symbols are the symbols a control may name besides "account".
func (b *board) symbols() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.status.symbols()
}

// succeeded records a complete snapshot read by the tick at now.
func (b *board) succeeded(now time.Time) {
	b.mu.Lock()
	b.lastOK = now
	b.mu.Unlock()
}

// setRules puts set in force.
func (b *board) setRules(set *rules.Set) {
	b.mu.Lock()
	b.current = set
	b.mu.Unlock()
}

// setActive publishes the active rules, copied into the board's own list
// (what it hands out are copies, activeLocked), and forgets the notes of
// the rules not among them.
func (b *board) setActive(active []alert.Alert) {
	b.mu.Lock()
	b.active = append(b.active[:0], active...)
	for k := range b.notes {
		if !slices.ContainsFunc(active, func(a alert.Alert) bool { return a.Symbol == k[0] && a.Rule == k[1] }) {
			delete(b.notes, k)
		}
	}
	b.mu.Unlock()
}

// breaker is the breaker the last tick published, which nothing writes
// once published. The caller holds tick: the ticks are its only writers.
func (b *board) breaker() act.Breaker { return b.status.breaker }

// setWait publishes the wait before the next tick.
func (b *board) setWait(wait time.Duration) {
	b.mu.Lock()
	b.wait = wait
	b.mu.Unlock()
}

// setListed publishes the names of tr's contract symbols, when tr is not
// the read they were last made of. The caller holds tick.
func (b *board) setListed(tr *exchange.Trades) {
	if tr == nil || tr == b.listedOf {
		return
	}
	b.listedOf = tr
	names := tr.ContractNames()
	b.mu.Lock()
	b.status.listed = names
	b.mu.Unlock()
}

// setStress keeps the last stress grid for Status.
func (b *board) setStress(s *StressStatus) {
	b.mu.Lock()
	b.stress = s
	b.mu.Unlock()
}

// setFit keeps the last model fit for Status.
func (b *board) setFit(f margin.Fit) {
	b.mu.Lock()
	b.status.fit, b.status.model = &f, nil
	b.mu.Unlock()
}

// request leaves a reload (set, with the engine settings cfg, nil to keep
// them) for the tick to apply.
func (b *board) request(set *rules.Set, now time.Time, cfg *Config) {
	b.mu.Lock()
	b.pending, b.pendingAt, b.pendingCfg = set, now, cfg
	b.mu.Unlock()
}

// take returns the reload left by request, if any, and forgets it.
func (b *board) take() (*rules.Set, time.Time, *Config) {
	b.mu.Lock()
	defer b.mu.Unlock()
	set, now, cfg := b.pending, b.pendingAt, b.pendingCfg
	b.pending, b.pendingCfg = nil, nil
	return set, now, cfg
}

// wanted reports whether Status was ever asked for.
func (b *board) wanted() bool { return b.read.Load() }

// published is what the last tick left for Status; under the board's
// lock.
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
func (e *Engine) publishStatus(snap *market.Snapshot, err error) {
	// The breaker's copy is taken again only when it changed: the tick
	// sends no call at most ticks.
	br := e.board.breaker()
	if !e.disp.BreakerIs(&br) {
		br = e.disp.Breaker()
	}
	p := published{lastTick: e.lastTick, breaker: br, dryRun: e.cfg.DryRun, budget: e.cfg.MaxActionsPerMinute}
	if err != nil {
		p.lastErr = err.Error()
	}
	var rows []tickRow
	if snap != nil {
		// The tick made the account when a rule reads it; else it is made
		// for the status once someone has asked for it (a backtest never
		// does, and does not pay for it).
		acct, made := e.eval.account()
		switch {
		case made:
			p.account = accountStatus(acct)
		case e.board.wanted():
			e.rowsFor(snap)
			a := e.model.AccountOf(&e.view)
			p.account = accountStatus(&a)
		}
		rows = e.rowsFor(snap)
		if e.board.wanted() && e.model.StressDue(e.lastTick, stressEvery) {
			// Worked out for a reader only, and not every tick: the grid
			// is the account's, which moves slowly.
			m := e.model.Account(&e.view)
			var s margin.Stress
			if m.FreeKnown || !m.Acct.HasOpenCross() {
				s = m.Acct.Stress(m.Sigma, m.Likely, nil) // with the points the page shows
			}
			e.board.setStress(stressStatus(s, e.lastTick))
		}
	}
	e.board.publish(p, rows, snap != nil)
}

// publish records what Status shows of a tick: p's time, error, breaker,
// settings and account, and the non-empty positions of rows. A tick that
// could not read the positions (!read) leaves the last ones and their
// account. The caller holds tick.
func (b *board) publish(p published, rows []tickRow, read bool) {
	var pos []statusRow
	if read {
		// Built in the list the previous publication replaced: Status
		// reads the published one under mu, so no reader holds it.
		pos = b.spare[:0]
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
		if n := len(b.spare); n > len(pos) {
			clear(pos[len(pos):n])
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if read {
		b.spare, b.status.positions = b.status.positions, pos
		b.status.account = p.account
	}
	b.status.lastTick, b.status.lastErr, b.status.breaker = p.lastTick, p.lastErr, p.breaker
	b.status.dryRun, b.status.budget = p.dryRun, p.budget
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
		ps.Symbol, ps.QuoteScale = sym.Name, sym.QuoteScale
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
func (b *board) positionsLocked() []PositionStatus {
	if b.status.positions == nil {
		return nil
	}
	out := make([]PositionStatus, len(b.status.positions))
	for i := range b.status.positions {
		out[i] = b.status.positions[i].status()
	}
	return out
}

// complete fills what a tick leaves for Status to compute when asked
// (a tick does not pay for a page nobody reads): the distance to
// liquidation, and each rule's state from the rules in force and the
// active ones, with what happens next to a firing one.
func (ps *PositionStatus) complete(set *rules.Set, active []alert.Alert, n *nexts) {
	if ps.Index.IsPositive() {
		// Not finite (a liquidation price past a float's range): no data,
		// never a NaN the status's JSON cannot carry.
		if d := rules.LiquidationDistance(model.Side(ps.Side), ps.Index.InexactFloat64(), ps.LiquidationPrice.InexactFloat64()); finite(d) {
			ps.Distance = &d
		}
	}
	// [] when no rule applies (only account rules, or rules of other
	// symbols): the page reads a list.
	ps.Rules, ps.Thresholds = []RuleStatus{}, []DistanceThreshold{}
	for _, r := range set.Rules {
		if r.Account() || !r.AppliesTo(ps.Symbol) {
			continue
		}
		if d, ok := r.DistanceBelow(); ok {
			ps.Thresholds = append(ps.Thresholds, DistanceThreshold{Rule: r.Name, Severity: string(r.Severity), Below: d})
		}
		rs := RuleStatus{Rule: r.Name, State: alert.Inactive.String()}
		for _, a := range active {
			if a.Rule == r.Name && a.Symbol == ps.Symbol {
				rs.State, rs.Since = a.State.String(), a.Since
				if a.State == alert.Firing {
					rs.Next = n.text(r, a)
				}
			}
		}
		ps.Rules = append(ps.Rules, rs)
	}
}

// Status returns what the guard knows at now: the last tick's
// publication, the last actions, the silences and pauses, the calls in
// flight. It never waits for a tick.
func (e *Engine) Status(now time.Time) *Status {
	pauses := e.ctl.Pauses(now)
	st := e.board.statusAt(now, pauses)
	st.Actions = e.jr.Recent()
	if st.Actions == nil {
		st.Actions = []journal.RecentAction{}
	}
	for i := range st.Actions {
		if st.Actions[i].Rules == nil {
			st.Actions[i].Rules = []string{} // a copy: the journal's list is not touched
		}
	}
	st.Silences, st.Pauses = e.ctl.Silences(now), pauses
	st.InFlight = callsInFlight(e.disp.InFlight(), now)
	if st.Silences == nil {
		st.Silences = []control.Silence{}
	}
	if st.Pauses == nil {
		st.Pauses = []control.Pause{}
	}
	return st
}

// statusAt is what the last tick published, as Status shows it at now
// (pauses are those in force, for the next texts).
func (b *board) statusAt(now time.Time, pauses []control.Pause) *Status {
	b.read.Store(true)
	b.mu.Lock()
	st := &Status{Time: now, LastSuccess: b.lastOK, LastTick: b.status.lastTick, LastError: b.status.lastErr,
		Positions: b.positionsLocked(), DryRun: b.status.dryRun, Account: b.status.account}
	set, active := b.current, b.activeLocked()
	br := b.status.breaker
	br.Sent = slices.Clone(br.Sent)
	budget := b.status.budget
	if b.status.model == nil && b.status.fit != nil {
		b.status.model = modelFitOf(*b.status.fit)
	}
	st.Model = b.status.model
	st.Liquidations = append([]LiquidationStatus{}, b.liquidated...) // [], never null
	st.Stress = b.stress
	n := nexts{now: now, notes: maps.Clone(b.notes), pauses: pauses, dryRun: st.DryRun}
	b.mu.Unlock()
	if !st.LastSuccess.IsZero() {
		age := now.Sub(st.LastSuccess).Seconds()
		st.SnapshotAge = &age
	}
	br.Prune(now)
	st.Breaker = BreakerStatus{Open: br.Open(now), Sent: len(br.Sent), Budget: budget}
	if st.Breaker.Open {
		st.Breaker.OpenUntil = br.OpenUntil
	}
	slices.SortFunc(st.Positions, func(a, b PositionStatus) int {
		return cmp.Or(cmp.Compare(a.Symbol, b.Symbol), cmp.Compare(a.Side, b.Side))
	})
	n.breaker = st.Breaker
	for i := range st.Positions {
		st.Positions[i].complete(set, active, &n)
	}
	if st.Positions == nil {
		st.Positions = []PositionStatus{}
	}
	return st
}

// finite reports whether f is a number JSON can carry and a reader can use.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
