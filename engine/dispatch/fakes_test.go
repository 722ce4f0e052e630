package dispatch

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// nopOutcomes takes the outcomes in and changes nothing: the stages' tests
// build a dispatcher only to read its list.
type nopOutcomes struct{}

func (nopOutcomes) Acted(time.Time, market.Key, int, *rules.Rule, *alert.RuleState, *rules.Set)   {}
func (nopOutcomes) Skipped(time.Time, market.Key, int, *rules.Rule, *alert.RuleState, *rules.Set) {}
func (nopOutcomes) AccountSettled(time.Time, *act.AccountDue, *rules.Set)                         {}
func (nopOutcomes) Noted(time.Time, string, string, string)                                       {}
func (nopOutcomes) Changed()                                                                      {}
func (nopOutcomes) Model(*market.Snapshot) *act.Model                                             { return nil }
func (nopOutcomes) Moved(time.Time, margin.Account)                                               {}
func (nopOutcomes) ReadBack(string, string)                                                       {}

// nopExchange is a venue the stages' tests never call.
type nopExchange struct{}

func (nopExchange) SetPositionSettings(context.Context, string, exchange.Settings) (*exchange.Position, error) {
	panic("not called")
}
func (nopExchange) CancelOrders(context.Context, string) (json.RawMessage, error) {
	panic("not called")
}
func (nopExchange) Positions(context.Context) ([]exchange.Position, error) { panic("not called") }
func (nopExchange) IndexPrices(context.Context) (map[string]decimal.Decimal, error) {
	panic("not called")
}
func (nopExchange) Trades(context.Context) (*exchange.Trades, error) { panic("not called") }
