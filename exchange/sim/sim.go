// Package sim is a simulated exchange: a real exchange held in memory and
// served over HTTP with the paths, envelope and signing of the exchange
// specification. Tests, `riskguard demo` and backtests run against it.
//
// It verifies the key, the timestamp and the signature of every private
// call; keeps symbols, risk limits, balances, positions, open and closed
// orders; moves index prices along scripted or seeded random paths;
// recomputes margin and liquidation price on settings changes (see
// LiquidationPrice for the formula) and liquidates positions whose
// liquidation price the index crosses. Everything is deterministic for a
// seed and a clock: a backtest passes its own clock in Config.Now and moves
// time with Step.
package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// Default credentials of a simulated exchange started by `riskguard sim`
// or `riskguard demo` when RISKGUARD_API_KEY / RISKGUARD_API_SECRET are
// unset.
const (
	DefaultKey    = "demo-key"
	DefaultSecret = "demo-secret"
	// DefaultSeed is the seed of `riskguard sim` without --seed.
	DefaultSeed int64 = 1
)

// maxCalls bounds the request log; older calls are dropped.
const maxCalls = 10_000

// Config configures a simulated exchange.
type Config struct {
	// Key and Secret are the one accepted key pair; both are required.
	Key, Secret string
	// Seed seeds the random walks and the generated closed orders.
	Seed int64
	// Now is the exchange's clock; default time.Now. Backtests pass a
	// simulated clock.
	Now func() time.Time
	// MaxSkew is the accepted |API-TIMESTAMP − server time|; default 60s.
	MaxSkew time.Duration
	// Scenario is the starting state; nil means DefaultScenario().
	Scenario *Scenario
	// Logger gets one line per request at Info; nil discards.
	Logger *slog.Logger
	// UserID is the account's user id; default 1.
	UserID int64
	// HistoryLimit bounds the samples each index keeps for the history
	// and bars endpoints; default 65,536 (18 hours at one a second). An
	// in-process backtest, which serves no history, sets it low so that its
	// memory stays flat however long the data.
	HistoryLimit int
	// ClientOrderIDField, when set, is the name of an order's client order
	// id field, which the order endpoint then takes (a string of 1 to 64
	// characters, optional): an order whose id an earlier order used is
	// refused with DUPLICATE_CLIENT_ORDER_ID and nothing filled, as
	// exchanges that take such an id do. Empty: the field is unknown and
	// refused, like any other.
	ClientOrderIDField string
	// Forbidden lists the private routes, as Routes names them
	// ("/v1/contracts/orders/{symbol}/create"), the key may not call: a
	// key without that permission. A signed request to one is answered
	// 403 FORBIDDEN once its signature is checked, before anything of it
	// is looked at; the in-process calls (SetSettings, PlaceOrder, …)
	// are not refused.
	Forbidden []string
}

// Exchange is a simulated exchange. It is an http.Handler; its methods
// are safe for concurrent use, also while it serves requests.
type Exchange struct {
	key, secret string
	clock       func() time.Time
	maxSkew     time.Duration
	log         *slog.Logger
	userID      int64
	histLimit   int
	routes      []route

	mu           sync.Mutex
	offset       time.Duration
	start        time.Time
	currencies   []exchange.Currency
	spots        []exchange.SpotSymbol
	contracts    []exchange.ContractSymbol // in scenario order
	contractByID map[int64]int             // symbol id → index in contracts
	symbolByName map[string]symbolRef
	indexes      map[string]*index
	// ixOf is indexes by contract index, built when first asked (every
	// contract's base has an index, Scenario's check; an index added later
	// drops it all the same).
	ixOf []*index
	// ixList holds the same indexes in the order added, for the loops of
	// every step over them (Step, IndexPricesInto).
	ixList       []*index
	balance      decimal.Decimal
	spotBalances map[string]decimal.Decimal
	positions    map[string]*exchange.Position // by contract symbol name
	// slots holds the same positions by contract index (nil: none), for
	// the loops of every step over the contracts; putPosition sets both.
	slots   []*exchange.Position
	measure measureScratch // Together's buffers, reused under mu
	levels  []levelMemo    // by contract index (riskLevelAt), under mu
	// uncrossed is, by contract index, the last position figures the
	// liquidation check found not crossed (nextLiquidation), under mu.
	uncrossed []uncrossedMemo
	// terms are, by contract index, the figures of the position Equity
	// last summed, converted (margin.PositionTerms), under mu.
	terms       []margin.PositionTerms
	openOrders  map[string]int
	closed      []closedOrder // ascending id
	nextOrderID int64
	orderRand   *rand.Rand
	faults      map[string]*Fault
	answers     map[string]answer
	// lagging, when set, answers the positions listing's next reads with
	// the listing from before an order (Fault.ListingLags).
	lagging      *lagged
	calls        []Call
	liquidations []Liquidation
	// cross is the last cross pool computed (crossPool).
	cross *crossMemo
	skew  ModelSkew // how its arithmetic differs from the model's (skew.go)
	// clientIDField is Config.ClientOrderIDField; clientIDs the order id
	// each client order id was filled as.
	clientIDField string
	clientIDs     map[string]int64
	// forbidden are the private routes the key may not call
	// (Config.Forbidden).
	forbidden map[string]bool
}

// symbolRef finds a symbol by name among spots or contracts.
type symbolRef struct {
	contract bool
	i        int
}

// Liquidation records a position the exchange liquidated.
type Liquidation struct {
	Time   time.Time
	Symbol string
	// Price is the index price that crossed the liquidation price.
	Price decimal.Decimal
	// Position is the position as it was just before liquidation.
	Position exchange.Position
}

// New builds a simulated exchange from cfg, validating its scenario.
func New(cfg Config) (*Exchange, error) {
	if cfg.Key == "" || cfg.Secret == "" {
		return nil, errors.New("new sim: key and secret are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxSkew <= 0 {
		cfg.MaxSkew = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.UserID == 0 {
		cfg.UserID = 1
	}
	if cfg.HistoryLimit <= 0 {
		cfg.HistoryLimit = maxHistory
	}
	sc := cfg.Scenario
	if sc == nil {
		sc = DefaultScenario()
	}
	n, err := sc.normalize()
	if err != nil {
		return nil, fmt.Errorf("new sim: %w", err)
	}
	e := &Exchange{
		key:           cfg.Key,
		secret:        cfg.Secret,
		clock:         cfg.Now,
		maxSkew:       cfg.MaxSkew,
		log:           cfg.Logger,
		userID:        cfg.UserID,
		histLimit:     cfg.HistoryLimit,
		start:         cfg.Now(),
		contractByID:  map[int64]int{},
		symbolByName:  map[string]symbolRef{},
		indexes:       map[string]*index{},
		balance:       n.Balance,
		spotBalances:  map[string]decimal.Decimal{},
		positions:     map[string]*exchange.Position{},
		openOrders:    map[string]int{},
		nextOrderID:   1,
		orderRand:     rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed0fde75)),
		faults:        map[string]*Fault{},
		answers:       map[string]answer{},
		clientIDField: cfg.ClientOrderIDField,
		clientIDs:     map[string]int64{},
	}
	e.routes = e.table()
	for _, f := range cfg.Forbidden {
		if !slices.ContainsFunc(e.routes, func(r route) bool { return r.private && r.template == f }) {
			return nil, fmt.Errorf("new sim: forbidden route %q: not a private route the exchange serves; name one of Routes() that is signed, e.g. %s", f, orderRoute)
		}
		if e.forbidden == nil {
			e.forbidden = map[string]bool{}
		}
		e.forbidden[f] = true
	}
	e.load(n, cfg.Seed)
	return e, nil
}

// Fixed times of the listed symbols and risk limits, so responses do not
// depend on when the exchange started.
const (
	listedAt  int64 = 1_600_000_000_000 // 2020-09-13
	delistsAt int64 = 4_102_444_800_000 // 2100-01-01
)

// load builds the state from a normalized scenario.
func (e *Exchange) load(n *Scenario, seed int64) {
	for i, c := range n.Currencies {
		e.currencies = append(e.currencies, exchange.Currency{ID: int64(i + 1), Name: c})
	}
	for i, s := range n.Spots {
		e.spots = append(e.spots, spotSymbol(s))
		e.symbolByName[s.Name] = symbolRef{i: i}
	}
	for i, c := range n.Contracts {
		rl := c.RiskLimit
		e.contracts = append(e.contracts, exchange.ContractSymbol{
			SpotSymbol: spotSymbol(c.SymbolSpec),
			Type:       c.Type,
			RiskLimit: exchange.RiskLimit{
				ID:                    c.ID,
				InitialMarginRate:     rl.InitialMarginRate,
				MaintenanceMarginRate: rl.MaintenanceMarginRate,
				MarginRateStep:        rl.MarginRateStep,
				MaxLeverage:           rl.MaxLeverage,
				RiskLimitBase:         rl.RiskLimitBase,
				RiskLimitStep:         rl.RiskLimitStep,
				MaxRiskLimitSteps:     rl.MaxRiskLimitSteps,
				MaxQuantity:           rl.MaxQuantity,
				CreatedAt:             listedAt,
			},
			SettlementFeeRate: c.SettlementFeeRate,
		})
		e.contractByID[c.ID] = i
		e.symbolByName[c.Name] = symbolRef{contract: true, i: i}
	}
	e.slots = make([]*exchange.Position, len(e.contracts))
	for _, ix := range n.Indexes {
		x := newIndex(ix, seed, e.start, e.histLimit)
		e.indexes[ix.Name] = x
		e.ixList = append(e.ixList, x)
	}
	for c, v := range n.SpotBalances {
		e.spotBalances[c] = v
	}
	for sym, k := range n.OpenOrders {
		e.openOrders[sym] = k
	}
	for _, p := range n.Positions {
		e.putPosition(p.Symbol, e.newPosition(p, e.start))
	}
	// The cross positions share one pool: each one's liquidation price
	// counts the others, which exist only now.
	for _, p := range e.positions {
		if p.Cross && !p.Empty {
			p.LiquidationPrice = e.liquidationPrice(p, e.balance)
		}
	}
	e.generateClosed(n.ClosedOrders, time.Duration(n.ClosedOrderSpacing))
}

func spotSymbol(s SymbolSpec) exchange.SpotSymbol {
	return exchange.SpotSymbol{
		ID:                    s.ID,
		Name:                  s.Name,
		StartTime:             listedAt,
		EndTime:               delistsAt,
		BaseName:              s.Base,
		BaseMinimumIncrement:  s.BaseIncrement,
		BaseScale:             s.BaseScale,
		BaseMaximumQuantity:   s.BaseMaxQuantity,
		QuoteName:             s.Quote,
		QuoteMinimumIncrement: s.QuoteIncrement,
		QuoteScale:            s.QuoteScale,
	}
}

// putPosition sets the position held on contract symbol sym, in the map
// and in its slot. Call with e.mu held.
func (e *Exchange) putPosition(sym string, p *exchange.Position) {
	e.positions[sym] = p
	if ref, ok := e.symbolByName[sym]; ok && ref.contract {
		e.slots[ref.i] = p
	}
}

// now is the server's clock: the configured clock plus the clock offset.
// Call with e.mu held.
func (e *Exchange) now() time.Time { return e.clock().Add(e.offset) }

// contract returns the contract symbol named sym. Call with e.mu held.
func (e *Exchange) contract(sym string) (*exchange.ContractSymbol, bool) {
	ref, ok := e.symbolByName[sym]
	if !ok || !ref.contract {
		return nil, false
	}
	return &e.contracts[ref.i], true
}

// newPosition builds a position from a normalized spec, its margin taken
// at EV/leverage and its liquidation price computed. The balance is not
// touched. Call with e.mu held.
func (e *Exchange) newPosition(p PositionSpec, at time.Time) *exchange.Position {
	c, _ := e.contract(p.Symbol)
	ms := at.UnixMilli()
	pos := &exchange.Position{
		ID:                           fmt.Sprintf("%d_%d", e.userID, c.ID),
		UserID:                       e.userID,
		SymbolID:                     c.ID,
		RiskLimit:                    c.RiskLimit,
		Cross:                        p.Cross,
		CreatedAt:                    ms,
		UpdatedAt:                    ms,
		Leverage:                     p.Leverage,
		Direction:                    p.Direction,
		RealizedPNL:                  p.RealizedPNL,
		MinimumMaintenanceMarginRate: c.RiskLimit.MaintenanceMarginRate,
		MinQuantity:                  c.BaseMinimumIncrement,
		MaxQuantity:                  c.RiskLimit.MaxQuantity,
		Version:                      1,
		Empty:                        p.Empty,
	}
	if !p.Empty {
		pos.Quantity = p.Quantity
		pos.EntryPrice = p.EntryPrice
		pos.EntryValue = p.Quantity.Mul(p.EntryPrice)
		pos.Margin = margin.Margin(pos.EntryValue, p.Leverage)
	}
	pos.LiquidationPrice = e.liquidationPrice(pos, e.balance)
	return pos
}

// liquidationPrice is the margin model's liquidation price of p with the
// free balance given: an isolated position's from its margin, a cross
// one's from the account's cross pool (margin.Account), in which p stands
// for the position held on its symbol. Call with e.mu held.
func (e *Exchange) liquidationPrice(p *exchange.Position, balance decimal.Decimal) decimal.Decimal {
	if p.Empty {
		return decimal.Zero
	}
	acct, i, _ := e.account(balance, p)
	return acct.LiquidationPrice(i)
}

// account is the account as the margin model sees it, with the free
// balance given and p (when not nil) in place of the position on its
// symbol; at is p's index in it, byContract every position's by contract
// index (−1 for a contract not in it). Only the cross positions (and p) are
// in it: an isolated position moves no other's liquidation price. Index
// prices are the current ones. Call with e.mu held.
func (e *Exchange) account(balance decimal.Decimal, p *exchange.Position) (acct margin.Account, at int, byContract []int) {
	acct = margin.Account{Free: balance}
	at = -1
	byContract = make([]int, len(e.contracts))
	n := 0
	for ci := range e.contracts {
		byContract[ci] = -1
		if q, ok := e.inAccount(ci, p); ok {
			byContract[ci] = n
			if q == p {
				at = n
			}
			n++
		}
	}
	acct.Positions = make([]margin.Position, 0, n)
	for ci := range e.contracts {
		if byContract[ci] < 0 {
			continue
		}
		q, _ := e.inAccount(ci, p)
		acct.Positions = append(acct.Positions, e.modelPosition(ci, q))
	}
	return acct, at, byContract
}

// modelPosition is position q of contract ci as the margin model sees it,
// at the current index price. The entry value is the position's own (q·P,
// as newPosition set it): the model would multiply it out again at every
// use. Call with e.mu held.
func (e *Exchange) modelPosition(ci int, q *exchange.Position) margin.Position {
	c := &e.contracts[ci]
	mp := margin.PositionOf(q, c.Name, int32(c.QuoteScale))
	if ix, ok := e.indexOf(ci); ok {
		mp.Index = ix.price
	}
	return e.skewed(mp)
}

// indexOf is the index of contract ci's base, ok false when it has none.
// Call with e.mu held.
func (e *Exchange) indexOf(ci int) (*index, bool) {
	if e.ixOf == nil {
		e.ixOf = make([]*index, len(e.contracts))
		for i := range e.contracts {
			e.ixOf[i] = e.indexes[e.contracts[i].BaseName]
		}
	}
	ix := e.ixOf[ci]
	return ix, ix != nil
}

// addIndex adds an index. Call with e.mu held.
func (e *Exchange) addIndex(ix *index) {
	e.indexes[ix.name] = ix
	e.ixOf = nil
	e.ixList = append(e.ixList, ix)
}

// inAccount is the position of contract ci that account puts in the
// model's account, with p in place of the position on its symbol.
func (e *Exchange) inAccount(ci int, p *exchange.Position) (*exchange.Position, bool) {
	c := &e.contracts[ci]
	q := e.slots[ci]
	ok := q != nil
	if p != nil && c.ID == p.SymbolID {
		q, ok = p, true
	}
	if !ok || q.Empty || (!q.Cross && q != p) {
		return nil, false
	}
	return q, true
}

// crossMemo is the last cross pool computed — the model's account of the
// cross positions and their collaterals, and their liquidation prices once
// asked — for the state it was computed from: refreshCross (every Step)
// and positionList (every Positions read) of one state compute it once.
// The state is the account itself (balance, and every field the model
// reads of each cross position and its index price), compared value and
// exponent alike, so any change of it computes the pool again.
type crossMemo struct {
	acct       margin.Account
	byContract []int
	colls      []decimal.Decimal
	liqs       []decimal.Decimal // nil until refreshCross asks
}

// crossPool returns the account of the cross positions, by contract
// index, and their collaterals, from the memo when the state is the one
// it holds. Call with e.mu held.
func (e *Exchange) crossPool() *crossMemo {
	if m := e.cross; m != nil && e.crossUnchanged(m) {
		return m
	}
	acct, _, byContract := e.account(e.balance, nil)
	e.cross = &crossMemo{acct: acct, byContract: byContract, colls: acct.Collaterals()}
	return e.cross
}

// crossUnchanged reports whether account(e.balance, nil) would build m's
// account again — the same positions, each equal field for field — without
// building it. Call with e.mu held.
func (e *Exchange) crossUnchanged(m *crossMemo) bool {
	if !margin.SameDec(m.acct.Free, e.balance) {
		return false
	}
	for ci := range e.contracts {
		q, in := e.inAccount(ci, nil)
		switch k := m.byContract[ci]; {
		case !in && k < 0:
		case !in || k < 0:
			return false
		default:
			mp := e.modelPosition(ci, q)
			if !samePosition(&m.acct.Positions[k], &mp) {
				return false
			}
		}
	}
	return true
}

// samePosition reports whether p and q are the same position for the
// model: equal numbers with equal exponents (an exponent shows in the
// results' digits), so that either gives the very same results.
func samePosition(p, q *margin.Position) bool {
	return margin.SameButIndex(p, q) && margin.SameDec(p.Index, q.Index) && margin.SameDec(p.Held, q.Held) && margin.SameDec(p.MM, q.MM)
}

// crossOpen counts the open cross positions. Call with e.mu held.
func (e *Exchange) crossOpen() int {
	n := 0
	for _, p := range e.slots {
		if p != nil && p.Cross && !p.Empty {
			n++
		}
	}
	return n
}

// refreshCross recomputes the liquidation price of every cross position
// after the free balance, or another cross position's PNL, changed,
// bumping version and updatedAt of those that moved. Call with e.mu held.
func (e *Exchange) refreshCross(at time.Time) {
	if e.crossOpen() == 0 {
		return
	}
	m := e.crossPool()
	if m.liqs == nil {
		m.liqs = m.acct.CrossLiquidationPricesWith(m.colls)
	}
	for ci, p := range e.slots {
		if p == nil || !p.Cross || p.Empty {
			continue
		}
		if liq := m.liqs[m.byContract[ci]]; !liq.Equal(p.LiquidationPrice) {
			p.LiquidationPrice = liq
			p.Version++
			p.UpdatedAt = at.UnixMilli()
		}
	}
}

// riskLevel is the position's RiskLevel at the current index price (the
// entry price when the index is unknown): an isolated position's margin
// ratio, or a cross position's share of the cross pool's (100 when the
// pool is at the cross positions' total maintenance margin). Call with
// e.mu held.
func (e *Exchange) riskLevel(p *exchange.Position) int {
	if p.Empty {
		return 0
	}
	collateral := p.Margin
	if p.Cross {
		acct, i, _ := e.account(e.balance, p)
		collateral = acct.Collateral(i)
	}
	return e.riskLevelAt(e.contractByID[p.SymbolID], p, collateral)
}

// riskLevelAt is riskLevel of the position of contract ci with its
// collateral known. Call with e.mu held.
func (e *Exchange) riskLevelAt(ci int, p *exchange.Position, collateral decimal.Decimal) int {
	mark := p.EntryPrice
	if ix, ok := e.indexOf(ci); ok {
		mark = ix.price
	}
	if !p.Quantity.IsPositive() {
		return 0
	}
	if ci >= len(e.levels) {
		e.levels = append(e.levels, make([]levelMemo, ci+1-len(e.levels))...)
	}
	m := &e.levels[ci]
	rl := &p.RiskLimit
	// Compared as copies (the same coefficient and exponent): a decimal
	// the exchange did not touch is the same copy, and the memo holds the
	// old one, so an equal copy is the same value. A new decimal of the
	// same value is converted again, to the same float64.
	if !m.set || m.q != p.Quantity || m.entry != p.EntryPrice || m.ev != p.EntryValue || m.rate != rl.MaintenanceMarginRate ||
		m.step != rl.MarginRateStep || m.base != rl.RiskLimitBase || m.limitStep != rl.RiskLimitStep || m.maxSteps != rl.MaxRiskLimitSteps {
		mmr := margin.MaintenanceRate(p.RiskLimit, p.EntryValue)
		*m = levelMemo{set: true, q: p.Quantity, entry: p.EntryPrice, ev: p.EntryValue, mmr: mmr,
			rate: rl.MaintenanceMarginRate, step: rl.MarginRateStep, base: rl.RiskLimitBase, limitStep: rl.RiskLimitStep, maxSteps: rl.MaxRiskLimitSteps,
			qf: p.Quantity.InexactFloat64(), ef: p.EntryPrice.InexactFloat64(), mf: mmr.InexactFloat64(),
			coll: collateral, cf: collateral.InexactFloat64(), index: mark, xf: mark.InexactFloat64()}
	}
	if m.coll != collateral {
		m.coll, m.cf = collateral, collateral.InexactFloat64()
	}
	if m.index != mark {
		m.index, m.xf = mark, mark.InexactFloat64()
	}
	if level, ok := margin.RiskLevelOfFloats(p.Direction, m.qf, m.ef, m.cf, m.mf, m.xf); ok {
		return level
	}
	return margin.RiskLevel(p.Direction, p.Quantity, p.EntryPrice, collateral, m.mmr, mark)
}

// levelMemo is what the risk level of the position on one contract is
// worked out from (the figures margin.MaintenanceRate reads with it), with
// the float64 of each decimal (margin.RiskLevelOfFloats), kept while the
// decimals stay the same copies: a step moves the index, rarely the
// position's own figures, and every read works out every level.
type levelMemo struct {
	set                         bool
	q, entry, ev, mmr           decimal.Decimal
	rate, step, base, limitStep decimal.Decimal
	maxSteps                    int
	coll, index                 decimal.Decimal
	qf, ef, mf, cf, xf          float64
}

// snapshot copies a position with its current risk level. Call with e.mu
// held.
func (e *Exchange) snapshot(p *exchange.Position) exchange.Position {
	out := e.reported(*p)
	out.RiskLevel = e.riskLevel(p)
	return out
}

// Step advances every index path to now and then liquidates the positions
// whose liquidation price the index crossed. Time that goes backwards
// moves nothing.
func (e *Exchange) Step(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ix := range e.ixList {
		ix.advance(now)
	}
	e.pricesMoved(now)
}

// pricesMoved follows the index prices: with several cross positions each
// one's liquidation price depends on the others' PNL, so they are computed
// again; then what the index crossed is liquidated. Call with e.mu held.
func (e *Exchange) pricesMoved(now time.Time) {
	if e.crossOpen() > 1 {
		e.refreshCross(now)
	}
	e.liquidate(now)
}

// Run steps the exchange with its clock every interval until ctx is done,
// and returns ctx's error. `riskguard sim` and the demo use it; a backtest
// calls Step itself.
func (e *Exchange) Run(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		return fmt.Errorf("run sim: step interval must be positive, got %s", every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			e.Step(e.clock())
		}
	}
}

// SetIndexPrice sets an index price directly, creating the index if it is
// unknown, and runs the liquidation check. The index leaves its path: later
// Steps no longer move it.
func (e *Exchange) SetIndexPrice(name string, price decimal.Decimal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if ix, ok := e.indexes[name]; ok {
		ix.set(price, now)
	} else {
		e.addIndex(newManualIndex(name, price, now, e.histLimit))
	}
	e.pricesMoved(now)
}

// IndexPrice returns the current price of the named index.
func (e *Exchange) IndexPrice(name string) (decimal.Decimal, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ix, ok := e.indexes[name]
	if !ok {
		return decimal.Decimal{}, false
	}
	return ix.price, true
}

// liquidate liquidates every non-empty position whose liquidation price
// its index has crossed. An isolated position loses its margin. The cross
// positions share one pool: when one crosses, the pool has fallen to their
// maintenance margin and all of them are liquidated together, losing
// their margins and the whole free balance. Call with e.mu held.
func (e *Exchange) liquidate(at time.Time) {
	for range len(e.positions) + 1 {
		p, price := e.nextLiquidation()
		if p == nil {
			return
		}
		if !p.Cross {
			e.liquidateOne(p, price, p.Margin, at)
			continue
		}
		loss := e.balance
		e.balance = decimal.Zero
		for ci, q := range e.slots {
			if q == nil || q.Empty || !q.Cross {
				continue
			}
			mark := price
			if ix, ok := e.indexOf(ci); ok && q != p {
				mark = ix.price
			}
			e.liquidateOne(q, mark, q.Margin.Add(loss), at)
			loss = decimal.Zero // the free balance is counted once, on the first
		}
	}
}

// liquidateOne empties p, liquidated at price with the loss given. Call
// with e.mu held.
func (e *Exchange) liquidateOne(p *exchange.Position, price, loss decimal.Decimal, at time.Time) {
	before := e.snapshot(p)
	p.RealizedPNL = p.RealizedPNL.Sub(loss)
	p.Quantity = decimal.Zero
	p.EntryPrice = decimal.Zero
	p.EntryValue = decimal.Zero
	p.Margin = decimal.Zero
	p.LiquidationPrice = decimal.Zero
	p.Empty = true
	p.Version++
	p.UpdatedAt = at.UnixMilli()
	sym := e.contracts[e.contractByID[p.SymbolID]].Name
	e.liquidations = append(e.liquidations, Liquidation{Time: at, Symbol: sym, Price: price, Position: before})
	e.log.Info("liquidation", "symbol", sym, "price", price.String(), "loss", loss.String())
}

// nextLiquidation finds a position due for liquidation, in symbol-id order
// so that the outcome is deterministic. Call with e.mu held.
func (e *Exchange) nextLiquidation() (*exchange.Position, decimal.Decimal) {
	if len(e.uncrossed) < len(e.slots) {
		e.uncrossed = make([]uncrossedMemo, len(e.slots))
	}
	for ci, p := range e.slots {
		if p == nil || p.Empty {
			continue
		}
		ix, ok := e.indexOf(ci)
		if !ok {
			continue
		}
		// The same figures as a check that found them not crossed (the
		// same copies: a step's second check, after SetIndexPrices):
		// crossed would say so again.
		m := &e.uncrossed[ci]
		if m.set && m.index == ix.price && m.liq == p.LiquidationPrice && m.direction == p.Direction {
			continue
		}
		if crossed(p.Direction, ix.price, p.LiquidationPrice) {
			return p, ix.price
		}
		*m = uncrossedMemo{set: true, direction: p.Direction, index: ix.price, liq: p.LiquidationPrice}
	}
	return nil, decimal.Decimal{}
}

// uncrossedMemo is a position's direction, index price and liquidation
// price that crossed found not crossed.
type uncrossedMemo struct {
	set        bool
	direction  string
	index, liq decimal.Decimal
}

// Positions returns a copy of every position, empty ones included, in
// symbol order of the scenario.
func (e *Exchange) Positions() []exchange.Position {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.positionList(make([]exchange.Position, 0, len(e.positions)))
}

// AppendPositions appends what Positions returns to dst[:0] and returns
// the result: a caller that owns dst, and knows nothing else still reads
// it, reads the positions without allocating them again.
func (e *Exchange) AppendPositions(dst []exchange.Position) []exchange.Position {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.positionList(dst[:0])
}

// positionList appends copies of the positions in contract order to out.
// Call with e.mu held.
func (e *Exchange) positionList(out []exchange.Position) []exchange.Position {
	// The cross pool is summed once for every position's risk level (and
	// shared with the Step that computed it for the same state).
	var m *crossMemo
	if e.crossOpen() > 0 {
		m = e.crossPool()
	}
	for ci, p := range e.slots {
		if p == nil {
			continue
		}
		// Copied once, into its place, and completed there.
		out = append(out, *p)
		s := &out[len(out)-1]
		switch {
		case p.Empty:
		case p.Cross:
			s.RiskLevel = e.riskLevelAt(ci, p, m.colls[m.byContract[ci]])
		default:
			s.RiskLevel = e.riskLevelAt(ci, p, p.Margin)
		}
		e.report(s)
	}
	return out
}

// Position returns a copy of the position on the named contract symbol.
func (e *Exchange) Position(symbol string) (exchange.Position, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.positions[symbol]
	if !ok {
		return exchange.Position{}, false
	}
	return e.snapshot(p), true
}

// PutPosition adds or replaces the position on p.Symbol with margin
// EV/leverage and its liquidation price computed; the free balance is not
// touched (the margin is taken as already set aside). A replaced position
// keeps its createdAt and gets the next version. The liquidation check is
// not run: call Step or SetIndexPrice.
func (e *Exchange) PutPosition(p PositionSpec) error {
	if errs := p.check(); len(errs) > 0 {
		return fmt.Errorf("put position %s: %w", p.Symbol, errors.Join(errs...))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.contract(p.Symbol); !ok {
		return fmt.Errorf("put position: %q is not a contract symbol", p.Symbol)
	}
	now := e.now()
	pos := e.newPosition(p, now)
	old, had := e.positions[p.Symbol]
	if had {
		pos.CreatedAt = old.CreatedAt
		pos.Version = old.Version + 1
	}
	e.putPosition(p.Symbol, pos)
	if pos.Cross || (had && old.Cross) {
		e.refreshCross(now) // the pool changed for the other cross positions
	}
	return nil
}

// OpenOrders returns the number of open orders on a symbol.
func (e *Exchange) OpenOrders(symbol string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.openOrders[symbol]
}

// AddOrders adds n open orders on a symbol.
func (e *Exchange) AddOrders(symbol string, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.openOrders[symbol] += n
}

// Balance returns the free collateral of the contract account.
func (e *Exchange) Balance() decimal.Decimal {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.balance
}

// SetBalance sets the free collateral of the contract account, moving the
// cross positions' liquidation prices accordingly.
func (e *Exchange) SetBalance(b decimal.Decimal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.balance = b
	e.refreshCross(e.now())
}

// SetClockOffset makes the server's clock read Now()+d: timestamps in
// responses, /v1/market/timestamp and the API-TIMESTAMP check all use it.
func (e *Exchange) SetClockOffset(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.offset = d
}

// Now returns the server's clock (the configured clock plus the offset).
func (e *Exchange) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now()
}

// Call is one request the exchange answered.
type Call struct {
	Time   time.Time // server clock
	Method string
	Path   string
	Route  string // path template; empty for an unknown path
	Status int
	// Mutating is true for a POST, whether or not it succeeded.
	Mutating bool
	Body     string // request body
}

// Calls returns a copy of the request log (the last 10,000 calls).
func (e *Exchange) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// ResetCalls empties the request log.
func (e *Exchange) ResetCalls() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = nil
}

// Liquidations returns the liquidations so far, oldest first.
func (e *Exchange) Liquidations() []Liquidation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.liquidations)
}

// indexNames returns the index names sorted. Call with e.mu held.
func (e *Exchange) indexNames() []string {
	names := make([]string, 0, len(e.indexes))
	for n := range e.indexes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
