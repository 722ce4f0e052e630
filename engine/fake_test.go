package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// fakeExchange is an in-memory Reader and Actuator for the engine's unit
// tests; the end-to-end tests use exchange/sim over HTTP instead.
type fakeExchange struct {
	mu        sync.Mutex
	positions []exchange.Position
	symbols   []exchange.ContractSymbol
	index     map[string]decimal.Decimal

	posErr, idxErr, tradesErr error
	settingsErr, cancelErr    error
	// ignoreSettings answers settings calls without applying them.
	ignoreSettings bool

	reads, trades int
	settings      []settingsCall
	cancels       []string
}

type settingsCall struct {
	symbol string
	s      exchange.Settings
}

func (f *fakeExchange) Positions(ctx context.Context) ([]exchange.Position, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.posErr != nil {
		return nil, f.posErr
	}
	out := make([]exchange.Position, len(f.positions))
	copy(out, f.positions)
	return out, nil
}

func (f *fakeExchange) IndexPrices(ctx context.Context) (map[string]decimal.Decimal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.idxErr != nil {
		return nil, f.idxErr
	}
	out := make(map[string]decimal.Decimal, len(f.index))
	for k, v := range f.index {
		out[k] = v
	}
	return out, nil
}

func (f *fakeExchange) Trades(ctx context.Context) (*exchange.Trades, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trades++
	if f.tradesErr != nil {
		return nil, f.tradesErr
	}
	return &exchange.Trades{ContractsSymbols: append([]exchange.ContractSymbol(nil), f.symbols...)}, nil
}

func (f *fakeExchange) SetPositionSettings(ctx context.Context, symbol string, s exchange.Settings) (*exchange.Position, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settings = append(f.settings, settingsCall{symbol, s})
	if f.settingsErr != nil {
		return nil, f.settingsErr
	}
	for i := range f.positions {
		p := &f.positions[i]
		if f.symbolName(p.SymbolID) != symbol {
			continue
		}
		if !f.ignoreSettings {
			p.Cross, p.Leverage = s.Cross, s.Leverage
		}
		cp := *p
		return &cp, nil
	}
	return nil, &exchange.APIError{Status: 404, Code: "SYMBOL_NOT_FOUND"}
}

func (f *fakeExchange) CancelOrders(ctx context.Context, symbol string) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancels = append(f.cancels, symbol)
	if f.cancelErr != nil {
		return nil, f.cancelErr
	}
	return json.RawMessage(`{"cancelled":1}`), nil
}

func (f *fakeExchange) symbolName(id int64) string {
	for _, s := range f.symbols {
		if s.ID == id {
			return s.Name
		}
	}
	return ""
}

func (f *fakeExchange) setIndex(name string, v string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index[name] = decimal.RequireFromString(v)
}

func (f *fakeExchange) position(symbol string) exchange.Position {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.positions {
		if f.symbolName(p.SymbolID) == symbol {
			return p
		}
	}
	return exchange.Position{}
}

func (f *fakeExchange) calls() (settings []settingsCall, cancels []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]settingsCall(nil), f.settings...), append([]string(nil), f.cancels...)
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func riskLimit(maxLev int) exchange.RiskLimit {
	return exchange.RiskLimit{ID: 1, InitialMarginRate: dec("0.01"), MaintenanceMarginRate: dec("0.005"), MaxLeverage: maxLev, MaxQuantity: dec("100")}
}

func symbol(id int64, name, base string, maxLev int) exchange.ContractSymbol {
	return exchange.ContractSymbol{
		SpotSymbol: exchange.SpotSymbol{ID: id, Name: name, BaseName: base, QuoteName: "USD"},
		Type:       "FUTURES", RiskLimit: riskLimit(maxLev),
	}
}

// position builds a long or short position with the given leverage and
// liquidation price.
func position(symID int64, dir string, lev int, cross bool, qty, entry, liq string) exchange.Position {
	return exchange.Position{
		ID: fmt.Sprintf("1_%d", symID), UserID: 1, SymbolID: symID, RiskLimit: riskLimit(20), Cross: cross,
		EntryPrice: dec(entry), EntryValue: dec(entry).Mul(dec(qty)), Margin: dec(entry).Mul(dec(qty)).Div(decimal.NewFromInt(int64(lev))),
		Leverage: lev, LiquidationPrice: dec(liq), Direction: dir, Quantity: dec(qty), Version: 1,
	}
}

// newFake returns an account with three symbols: XBTC long 25x (above its
// max of 20), XETH short 5x far from liquidation, XSOL empty.
func newFake() *fakeExchange {
	return &fakeExchange{
		symbols: []exchange.ContractSymbol{symbol(1, "XBTC", "BTC", 20), symbol(2, "XETH", "ETH", 20), symbol(3, "XSOL", "SOL", 10)},
		positions: []exchange.Position{
			position(1, exchange.Long, 25, true, "1", "100000", "95500"), // 4.5% away: a free balance of 1,000 behind it
			position(2, exchange.Short, 5, false, "10", "3000", "3585"),  // the margin model's: 3,000 + (6,000 − 150)/10
			{ID: "1_3", UserID: 1, SymbolID: 3, RiskLimit: riskLimit(10), Direction: exchange.Long, Leverage: 3, Empty: true},
		},
		index: map[string]decimal.Decimal{"BTC": dec("100000"), "ETH": dec("3000"), "SOL": dec("150")},
	}
}

// rule compiles a rule for a test.
func rule(t testing.TB, r rules.Rule) *rules.Rule {
	t.Helper()
	// The rule values are shared between parallel tests: compile a copy.
	r.Actions = slices.Clone(r.Actions)
	if r.Severity == "" {
		r.Severity = rules.Critical
	}
	if r.OnNoData == "" {
		r.OnNoData = rules.NoDataAlert
	}
	if err := r.Compile(); err != nil {
		t.Fatalf("compile %s: %v", r.Name, err)
	}
	return &r
}

// recorder keeps the notifications sent.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Send(ctx context.Context, m notify.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, string(m.Kind)+": "+m.Text)
	return nil
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

var errDown = errors.New("connection refused")

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
