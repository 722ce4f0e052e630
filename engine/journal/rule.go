package journal

import (
	"fmt"
	"time"

	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// RuleNotifyEvent is a rule's notify action on sym (the account's rules:
// their own symbol name): audited, notified, reported. env holds what the
// rule saw.
func RuleNotifyEvent(now time.Time, r *rules.Rule, sym string, channels []string, env *rules.Env) Event {
	text := fmt.Sprintf("[%s] %s on %s: %s", r.Severity, r.Name, sym, Describe(r, env))
	return Event{
		Audit: &Record{Time: now, Type: "action", Action: string(rules.Notify), Symbol: sym, Rules: []string{r.Name}, Phase: "result", Reason: text},
		Note: &notify.Message{Time: now, Kind: notify.KindRule, Severity: string(r.Severity), Rule: r.Name, Symbol: sym,
			Action: string(rules.Notify), Text: text, Values: Values(env), Channels: channels, Template: r.Message},
		Action: &ActionEvent{Symbol: sym, Action: string(rules.Notify), Rules: []string{r.Name}, Outcome: "sent"},
	}
}

// Describe is the default one-line account of what a rule saw.
func Describe(r *rules.Rule, env *rules.Env) string {
	s := r.Description
	if s == "" {
		s = r.When
	}
	if r.Account() {
		a := &env.Account
		return fmt.Sprintf("%s (margin ratio %.3f, equity %s, %d positions, the riskiest %s at %.2f%%)", s,
			a.MarginRatio, fmtFloat(a.Equity), a.Positions, a.RiskiestSymbol, a.MinLiquidationDistance*100)
	}
	return fmt.Sprintf("%s (index %s, liquidation %s, distance %.2f%%, leverage %gx of max %gx)", s,
		fmtFloat(env.IndexPrice), fmtFloat(env.Position.LiquidationPrice), env.LiquidationDistance*100,
		float64(env.Position.Leverage), float64(env.RiskLimit.MaxLeverage))
}

func fmtFloat(f float64) string { return decimal.NewFromFloat(f).String() }

// Values are the figures a rule's message carries: the position's, or
// the account's for an account rule.
func Values(env *rules.Env) *notify.Figures {
	if env.Position.ID == "" {
		// An account rule's environment: the account's figures.
		return &notify.Figures{MarginRatio: env.Account.MarginRatio, Equity: env.Account.Equity, Distance: env.Account.MinLiquidationDistance}
	}
	return &notify.Figures{
		Index:            env.IndexPrice,
		LiquidationPrice: env.Position.LiquidationPrice,
		Distance:         env.LiquidationDistance,
		Leverage:         float64(env.Position.Leverage),
		MaxLeverage:      float64(env.RiskLimit.MaxLeverage),
		Notional:         env.Notional,
	}
}
