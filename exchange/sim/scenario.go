package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
	"gopkg.in/yaml.v3"
)

// Scenario is the starting state of a simulated exchange: what it lists, what
// the account holds, and how the index prices move. It is read from YAML or
// JSON (LoadScenario) with the field names of the tags below; zero values take
// the defaults named in each comment.
type Scenario struct {
	// Currencies are the currency names; ids are assigned 1, 2, … in order.
	Currencies []string `yaml:"currencies" json:"currencies"`
	// Spots are the spot symbols.
	Spots []SymbolSpec `yaml:"spots" json:"spots"`
	// Contracts are the contract symbols, each with its risk limit. At least
	// one is required.
	Contracts []ContractSpec `yaml:"contracts" json:"contracts"`
	// Balance is the free collateral of the contract account, in the
	// contracts' quote currency, after the margins of Positions are taken.
	Balance decimal.Decimal `yaml:"balance" json:"balance"`
	// SpotBalances maps a currency name to the available spot amount.
	SpotBalances map[string]decimal.Decimal `yaml:"spotBalances" json:"spotBalances"`
	// Positions are the open (or empty) contract positions, at most one per
	// contract symbol.
	Positions []PositionSpec `yaml:"positions" json:"positions"`
	// OpenOrders maps a contract symbol to its number of open orders.
	OpenOrders map[string]int `yaml:"openOrders" json:"openOrders"`
	// Indexes are the index price paths. Every contract's base currency
	// needs one: the index of XBTC (base BTC) is named BTC.
	Indexes []IndexSpec `yaml:"indexes" json:"indexes"`
	// ClosedOrders is how many closed orders to generate, spaced
	// ClosedOrderSpacing apart and ending at the exchange's start.
	ClosedOrders int `yaml:"closedOrders" json:"closedOrders"`
	// ClosedOrderSpacing is the time between two generated closed orders;
	// default 1h.
	ClosedOrderSpacing Duration `yaml:"closedOrderSpacing" json:"closedOrderSpacing"`
}

// SymbolSpec describes a spot symbol, and the common part of a contract
// symbol.
type SymbolSpec struct {
	// ID is the symbol id; default: spot symbols 1, 2, …, contract symbols
	// 101, 102, ….
	ID    int64  `yaml:"id" json:"id"`
	Name  string `yaml:"name" json:"name"`
	Base  string `yaml:"base" json:"base"`
	Quote string `yaml:"quote" json:"quote"`
	// BaseScale and QuoteScale are decimal places; defaults 4 and 2.
	BaseScale  int `yaml:"baseScale" json:"baseScale"`
	QuoteScale int `yaml:"quoteScale" json:"quoteScale"`
	// BaseIncrement and QuoteIncrement default to one unit of the last
	// decimal place of their scale.
	BaseIncrement  decimal.Decimal `yaml:"baseIncrement" json:"baseIncrement"`
	QuoteIncrement decimal.Decimal `yaml:"quoteIncrement" json:"quoteIncrement"`
	// BaseMaxQuantity defaults to 1,000,000.
	BaseMaxQuantity decimal.Decimal `yaml:"baseMaxQuantity" json:"baseMaxQuantity"`
}

// ContractSpec describes a contract symbol. Contracts are linear: one
// contract is one unit of the base, margined in the quote currency.
type ContractSpec struct {
	SymbolSpec `yaml:",inline"`
	// Type defaults to FUTURES.
	Type              string          `yaml:"type" json:"type"`
	SettlementFeeRate decimal.Decimal `yaml:"settlementFeeRate" json:"settlementFeeRate"`
	RiskLimit         RiskLimitSpec   `yaml:"riskLimit" json:"riskLimit"`
}

// RiskLimitSpec describes a risk limit (spec 2.5).
type RiskLimitSpec struct {
	// MaxLeverage is required, at least 1.
	MaxLeverage int `yaml:"maxLeverage" json:"maxLeverage"`
	// MaintenanceMarginRate is required, in (0, 1).
	MaintenanceMarginRate decimal.Decimal `yaml:"maintenanceMarginRate" json:"maintenanceMarginRate"`
	// InitialMarginRate defaults to 1/MaxLeverage.
	InitialMarginRate decimal.Decimal `yaml:"initialMarginRate" json:"initialMarginRate"`
	// MarginRateStep is added to the maintenance margin rate per risk-limit
	// step a position's entry value exceeds RiskLimitBase by (see
	// MaintenanceRate); 0 disables the ladder.
	MarginRateStep    decimal.Decimal `yaml:"marginRateStep" json:"marginRateStep"`
	RiskLimitBase     decimal.Decimal `yaml:"riskLimitBase" json:"riskLimitBase"`
	RiskLimitStep     decimal.Decimal `yaml:"riskLimitStep" json:"riskLimitStep"`
	MaxRiskLimitSteps int             `yaml:"maxRiskLimitSteps" json:"maxRiskLimitSteps"`
	// MaxQuantity defaults to the symbol's BaseMaxQuantity.
	MaxQuantity decimal.Decimal `yaml:"maxQuantity" json:"maxQuantity"`
}

// PositionSpec describes a contract position. A position may carry a
// leverage above its risk limit's maxLeverage: risk limits can be lowered
// after a position was opened.
type PositionSpec struct {
	Symbol string `yaml:"symbol" json:"symbol"`
	// Direction is LONG or SHORT; default LONG.
	Direction  string          `yaml:"direction" json:"direction"`
	Quantity   decimal.Decimal `yaml:"quantity" json:"quantity"`
	EntryPrice decimal.Decimal `yaml:"entryPrice" json:"entryPrice"`
	// Leverage defaults to 1.
	Leverage    int             `yaml:"leverage" json:"leverage"`
	Cross       bool            `yaml:"cross" json:"cross"`
	Empty       bool            `yaml:"empty" json:"empty"`
	RealizedPNL decimal.Decimal `yaml:"realizedPNL" json:"realizedPNL"`
}

// IndexSpec is an index price path: either scripted Points or a seeded
// random Walk, sampled every Interval from the exchange's start.
type IndexSpec struct {
	Name   string       `yaml:"name" json:"name"`
	Points []PricePoint `yaml:"points" json:"points"`
	Walk   *WalkSpec    `yaml:"walk" json:"walk"`
	// Interval is the sampling period of the path; default 1s.
	Interval Duration `yaml:"interval" json:"interval"`
	// Scale is the number of decimal places of the published price;
	// default the quote scale of the first contract on this index, else 2.
	Scale *int `yaml:"scale" json:"scale"`
}

// PricePoint is a point of a scripted path: the price At an offset from the
// exchange's start. Between points the price is interpolated linearly;
// before the first and after the last it holds.
type PricePoint struct {
	At    Duration        `yaml:"at" json:"at"`
	Price decimal.Decimal `yaml:"price" json:"price"`
}

// WalkSpec is a geometric random walk: each sample multiplies the price by
// exp((Drift - Volatility²/2)·Δ + Volatility·√Δ·Z), Δ the interval in
// seconds and Z a standard normal draw from a generator seeded with the
// exchange's seed and the index name.
type WalkSpec struct {
	Start decimal.Decimal `yaml:"start" json:"start"`
	// Volatility is the standard deviation of the log price per √second
	// (0.001 ≈ 1% over 100 s).
	Volatility float64 `yaml:"volatility" json:"volatility"`
	// Drift is the expected log return per second.
	Drift float64 `yaml:"drift" json:"drift"`
}

// Duration is a time.Duration written as text ("1s", "2m30s") in scenario
// files.
type Duration time.Duration

// UnmarshalText parses a Go duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: want a duration like 1s or 2m30s", b)
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes the duration as text.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// Limits on scenario sizes, so that a typo cannot allocate the machine away.
const (
	maxClosedOrders = 100_000
	maxOpenOrders   = 10_000
)

// reserved index names, which would collide with market routes.
const indexValueName = "indexValue"

// LoadScenario reads a scenario from a YAML or JSON file (JSON when the
// name ends in .json or the content starts with '{'), rejecting unknown
// fields, and validates it. Every problem of the file is reported at once.
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scenario: %w", err)
	}
	var s Scenario
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("load scenario %s: file is empty", path)
	}
	if strings.EqualFold(filepath.Ext(path), ".json") || trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("load scenario %s: %w", path, jsonError(b, err))
		}
		if dec.More() {
			return nil, fmt.Errorf("load scenario %s: trailing data after the JSON object", path)
		}
	} else {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&s); err != nil {
			return nil, fmt.Errorf("load scenario %s: %w", path, err)
		}
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("load scenario %s: %w", path, err)
	}
	return &s, nil
}

// jsonError adds a line and column to a JSON syntax or type error.
func jsonError(b []byte, err error) error {
	var off int64
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return err
	}
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line := 1 + bytes.Count(b[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(b[:off], '\n')
	return fmt.Errorf("line %d col %d: %w", line, col, err)
}

// Validate checks a scenario and reports every problem at once.
func (s *Scenario) Validate() error {
	_, err := s.normalize()
	return err
}

// normalize returns a copy of the scenario with defaults filled in, or every
// validation error joined. Each section is checked in the file's order by
// a step of its own; the errors come in that order.
func (s *Scenario) normalize() (*Scenario, error) {
	v := &normalizer{currencies: map[string]bool{}, names: map[string]bool{}, ids: map[int64]string{}, contracts: map[string]*ContractSpec{}}
	n := *s
	v.currencyNames(s.Currencies)
	n.Spots = append([]SymbolSpec(nil), s.Spots...)
	for i := range n.Spots {
		v.symbol(fmt.Sprintf("spots[%d]", i), &n.Spots[i], int64(i+1))
	}
	if len(s.Contracts) == 0 {
		v.bad("contracts: at least one contract symbol is required")
	}
	n.Contracts = append([]ContractSpec(nil), s.Contracts...)
	for i := range n.Contracts {
		v.contract(i, &n.Contracts[i])
	}
	v.balances(s.Balance, s.SpotBalances)
	n.Positions = append([]PositionSpec(nil), s.Positions...)
	v.positions(n.Positions)
	v.openOrders(s.OpenOrders)
	n.Indexes = append([]IndexSpec(nil), s.Indexes...)
	indexes := map[string]bool{}
	for i := range n.Indexes {
		v.index(i, &n.Indexes[i], indexes, n.Contracts)
	}
	for _, c := range n.Contracts {
		if c.Base != "" && !indexes[c.Base] {
			v.bad("contract %q: no index named %q (its base) in indexes", c.Name, c.Base)
		}
	}
	v.closedOrders(&n)
	if err := errors.Join(v.errs...); err != nil {
		return nil, fmt.Errorf("invalid scenario:\n%w", err)
	}
	return &n, nil
}

// normalizer is one normalize's state: the errors so far and what the
// sections checked before know (the currencies, the symbols' names and
// ids, the contracts by name).
type normalizer struct {
	errs       []error
	currencies map[string]bool
	names      map[string]bool
	ids        map[int64]string
	contracts  map[string]*ContractSpec
}

func (v *normalizer) bad(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

// currencyNames checks currencies: named, each once.
func (v *normalizer) currencyNames(currencies []string) {
	for i, c := range currencies {
		switch {
		case strings.TrimSpace(c) == "":
			v.bad("currencies[%d]: name is empty", i)
		case v.currencies[c]:
			v.bad("currencies[%d]: duplicate currency %q", i, c)
		}
		v.currencies[c] = true
	}
}

// symbol checks a spot or contract symbol at where and fills its
// defaults: defaultID, scales 4 and 2, increments of one unit of the
// scale, a maximum quantity of a million.
func (v *normalizer) symbol(where string, sp *SymbolSpec, defaultID int64) {
	if sp.Name == "" {
		v.bad("%s: name is required", where)
	} else if v.names[sp.Name] {
		v.bad("%s: duplicate symbol name %q", where, sp.Name)
	}
	v.names[sp.Name] = true
	if sp.ID == 0 {
		sp.ID = defaultID
	}
	if sp.ID < 0 {
		v.bad("%s: id must be positive, got %d", where, sp.ID)
	} else if other, ok := v.ids[sp.ID]; ok {
		v.bad("%s: id %d is already used by %q", where, sp.ID, other)
	}
	v.ids[sp.ID] = sp.Name
	for _, c := range []struct{ field, name string }{{"base", sp.Base}, {"quote", sp.Quote}} {
		if c.name == "" {
			v.bad("%s: %s is required", where, c.field)
		} else if !v.currencies[c.name] {
			v.bad("%s: %s %q is not in currencies", where, c.field, c.name)
		}
	}
	if sp.BaseScale == 0 {
		sp.BaseScale = 4
	}
	if sp.QuoteScale == 0 {
		sp.QuoteScale = 2
	}
	if sp.BaseScale < 0 || sp.BaseScale > 18 {
		v.bad("%s: baseScale must be in 0..18, got %d", where, sp.BaseScale)
	}
	if sp.QuoteScale < 0 || sp.QuoteScale > 18 {
		v.bad("%s: quoteScale must be in 0..18, got %d", where, sp.QuoteScale)
	}
	if sp.BaseIncrement.IsZero() {
		sp.BaseIncrement = decimal.New(1, -int32(sp.BaseScale))
	}
	if sp.QuoteIncrement.IsZero() {
		sp.QuoteIncrement = decimal.New(1, -int32(sp.QuoteScale))
	}
	if sp.BaseMaxQuantity.IsZero() {
		sp.BaseMaxQuantity = decimal.NewFromInt(1_000_000)
	}
	if !sp.BaseIncrement.IsPositive() {
		v.bad("%s: baseIncrement must be positive", where)
	}
	if !sp.QuoteIncrement.IsPositive() {
		v.bad("%s: quoteIncrement must be positive", where)
	}
	if !sp.BaseMaxQuantity.IsPositive() {
		v.bad("%s: baseMaxQuantity must be positive", where)
	}
}

// contract checks contracts[i] (its symbol, then its risk limit) and
// fills its defaults: id 101+i, type FUTURES, the initial margin rate of
// its maximum leverage, the symbol's maximum quantity.
func (v *normalizer) contract(i int, c *ContractSpec) {
	where := fmt.Sprintf("contracts[%d]", i)
	if c.Name != "" {
		where += fmt.Sprintf(" (%s)", c.Name)
	}
	v.symbol(where, &c.SymbolSpec, int64(101+i))
	v.contracts[c.Name] = c
	if c.Type == "" {
		c.Type = "FUTURES"
	}
	if c.SettlementFeeRate.IsNegative() {
		v.bad("%s: settlementFeeRate must not be negative", where)
	}
	rl := &c.RiskLimit
	if rl.MaxLeverage < 1 {
		v.bad("%s: riskLimit.maxLeverage must be at least 1, got %d", where, rl.MaxLeverage)
	}
	if !rl.MaintenanceMarginRate.IsPositive() || rl.MaintenanceMarginRate.GreaterThanOrEqual(decimal.NewFromInt(1)) {
		v.bad("%s: riskLimit.maintenanceMarginRate must be in (0, 1), got %s", where, rl.MaintenanceMarginRate)
	}
	if rl.InitialMarginRate.IsZero() && rl.MaxLeverage >= 1 {
		rl.InitialMarginRate = decimal.NewFromInt(1).DivRound(decimal.NewFromInt(int64(rl.MaxLeverage)), 8)
	}
	if rl.InitialMarginRate.LessThan(rl.MaintenanceMarginRate) || rl.InitialMarginRate.GreaterThan(decimal.NewFromInt(1)) {
		v.bad("%s: riskLimit.initialMarginRate must be between maintenanceMarginRate and 1, got %s", where, rl.InitialMarginRate)
	}
	for _, f := range []struct {
		name string
		v    decimal.Decimal
	}{{"marginRateStep", rl.MarginRateStep}, {"riskLimitBase", rl.RiskLimitBase}, {"riskLimitStep", rl.RiskLimitStep}} {
		if f.v.IsNegative() {
			v.bad("%s: riskLimit.%s must not be negative", where, f.name)
		}
	}
	if rl.MaxRiskLimitSteps < 0 {
		v.bad("%s: riskLimit.maxRiskLimitSteps must not be negative", where)
	}
	if rl.MaxQuantity.IsZero() {
		rl.MaxQuantity = c.BaseMaxQuantity
	}
	if !rl.MaxQuantity.IsPositive() {
		v.bad("%s: riskLimit.maxQuantity must be positive", where)
	}
}

// balances checks the futures balance and the spot balances.
func (v *normalizer) balances(balance decimal.Decimal, spot map[string]decimal.Decimal) {
	if balance.IsNegative() {
		v.bad("balance must not be negative, got %s", balance)
	}
	for c, b := range spot {
		if !v.currencies[c] {
			v.bad("spotBalances: currency %q is not in currencies", c)
		}
		if b.IsNegative() {
			v.bad("spotBalances[%s]: must not be negative", c)
		}
	}
}

// positions checks each position, on a contract, at most one per symbol.
func (v *normalizer) positions(positions []PositionSpec) {
	held := map[string]bool{}
	for i := range positions {
		p := &positions[i]
		where := fmt.Sprintf("positions[%d]", i)
		if p.Symbol != "" {
			where += fmt.Sprintf(" (%s)", p.Symbol)
		}
		for _, err := range p.check() {
			v.bad("%s: %w", where, err)
		}
		if _, ok := v.contracts[p.Symbol]; !ok && p.Symbol != "" {
			v.bad("%s: symbol %q is not a contract symbol", where, p.Symbol)
		}
		if held[p.Symbol] {
			v.bad("%s: a position on %q is already listed", where, p.Symbol)
		}
		held[p.Symbol] = true
	}
}

// openOrders checks the open orders' counts, each on a contract.
func (v *normalizer) openOrders(orders map[string]int) {
	for sym, k := range orders {
		if _, ok := v.contracts[sym]; !ok {
			v.bad("openOrders: symbol %q is not a contract symbol", sym)
		}
		if k < 0 || k > maxOpenOrders {
			v.bad("openOrders[%s]: must be in 0..%d, got %d", sym, maxOpenOrders, k)
		}
	}
}

// index checks indexes[i], records its name in seen, and fills its
// defaults: a second's interval, the scale of the quote of the contract
// whose base it is (else 2).
func (v *normalizer) index(i int, ix *IndexSpec, seen map[string]bool, contracts []ContractSpec) {
	where := fmt.Sprintf("indexes[%d]", i)
	if ix.Name != "" {
		where += fmt.Sprintf(" (%s)", ix.Name)
	}
	switch {
	case ix.Name == "":
		v.bad("%s: name is required", where)
	case ix.Name == indexValueName || strings.Contains(ix.Name, "/"):
		v.bad("%s: name %q is reserved or not a path segment", where, ix.Name)
	case seen[ix.Name]:
		v.bad("%s: duplicate index name", where)
	}
	seen[ix.Name] = true
	if ix.Interval == 0 {
		ix.Interval = Duration(time.Second)
	}
	if time.Duration(ix.Interval) < time.Millisecond {
		v.bad("%s: interval must be at least 1ms, got %s", where, time.Duration(ix.Interval))
	}
	if ix.Scale == nil {
		scale := 2
		for _, c := range contracts {
			if c.Base == ix.Name {
				scale = c.QuoteScale
				break
			}
		}
		ix.Scale = &scale
	} else if *ix.Scale < 0 || *ix.Scale > 18 {
		v.bad("%s: scale must be in 0..18, got %d", where, *ix.Scale)
	}
	v.path(where, ix)
}

// path checks an index's price path: points or a walk, not both.
func (v *normalizer) path(where string, ix *IndexSpec) {
	switch {
	case len(ix.Points) > 0 && ix.Walk != nil:
		v.bad("%s: give either points or walk, not both", where)
	case len(ix.Points) == 0 && ix.Walk == nil:
		v.bad("%s: a path is required: points or walk", where)
	case ix.Walk != nil:
		w := ix.Walk
		if !w.Start.IsPositive() {
			v.bad("%s: walk.start must be positive", where)
		}
		if w.Volatility < 0 || w.Volatility > 1 || w.Volatility != w.Volatility {
			v.bad("%s: walk.volatility must be in 0..1 (per √second), got %v", where, w.Volatility)
		}
		if w.Drift < -1 || w.Drift > 1 || w.Drift != w.Drift {
			v.bad("%s: walk.drift must be in -1..1 (per second), got %v", where, w.Drift)
		}
	default:
		for j, pt := range ix.Points {
			if !pt.Price.IsPositive() {
				v.bad("%s: points[%d].price must be positive", where, j)
			}
			if pt.At < 0 {
				v.bad("%s: points[%d].at must not be negative", where, j)
			}
			if j > 0 && pt.At <= ix.Points[j-1].At {
				v.bad("%s: points[%d].at must be after points[%d].at", where, j, j-1)
			}
		}
	}
}

// closedOrders checks the closed orders' count and fills their spacing's
// default, an hour.
func (v *normalizer) closedOrders(n *Scenario) {
	if n.ClosedOrders < 0 || n.ClosedOrders > maxClosedOrders {
		v.bad("closedOrders must be in 0..%d, got %d", maxClosedOrders, n.ClosedOrders)
	}
	if n.ClosedOrderSpacing == 0 {
		n.ClosedOrderSpacing = Duration(time.Hour)
	}
	if n.ClosedOrderSpacing < 0 {
		v.bad("closedOrderSpacing must be positive")
	}
}

// check fills the defaults of a position and checks it on its own.
func (p *PositionSpec) check() []error {
	var errs []error
	if p.Symbol == "" {
		errs = append(errs, errors.New("symbol is required"))
	}
	if p.Direction == "" {
		p.Direction = exchange.Long
	}
	if p.Direction != exchange.Long && p.Direction != exchange.Short {
		errs = append(errs, fmt.Errorf("direction must be LONG or SHORT, got %q", p.Direction))
	}
	if p.Leverage == 0 {
		p.Leverage = 1
	}
	if p.Leverage < 1 {
		errs = append(errs, fmt.Errorf("leverage must be at least 1, got %d", p.Leverage))
	}
	if p.Empty {
		if !p.Quantity.IsZero() {
			errs = append(errs, errors.New("an empty position must have no quantity"))
		}
	} else {
		if !p.Quantity.IsPositive() {
			errs = append(errs, errors.New("quantity must be positive (or set empty: true)"))
		}
		if !p.EntryPrice.IsPositive() {
			errs = append(errs, errors.New("entryPrice must be positive"))
		}
	}
	return errs
}
