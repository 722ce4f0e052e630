// Package notify carries what the guard saw and did to the trader. It
// delivers and decides nothing: the engine chooses what to say.
package notify

import (
	"reflect"
	"strings"
	"time"
)

// Kind is what a message is about.
type Kind string

// The kinds of message the engine sends.
const (
	KindTest         Kind = "test"          // a test message from `riskguard notify test`
	KindFiring       Kind = "firing"        // a rule entered firing
	KindResolved     Kind = "resolved"      // a firing rule resolved
	KindNoData       Kind = "nodata"        // a rule's inputs are missing or invalid
	KindRule         Kind = "rule"          // a rule's notify action
	KindAction       Kind = "action"        // an action was taken
	KindActionFailed Kind = "action_failed" // an action failed or was not applied
	KindBreaker      Kind = "breaker"       // the action budget's circuit breaker opened or closed
	KindExchange     Kind = "exchange"      // the exchange is unreachable or back
	KindReload       Kind = "reload"        // a configuration reload failed or succeeded
	KindLifecycle    Kind = "lifecycle"     // the daemon started or stopped
	KindAudit        Kind = "audit"         // the audit log failed to write, or writes again
	KindControl      Kind = "control"       // the Telegram control cannot read its commands, or reads them again
	KindLiquidation  Kind = "liquidation"   // a position was liquidated
	KindPosition     Kind = "position"      // a position changed without the guard: closed, grown, turned over
)

// Message is one notification. Text is a one-line summary fit for a phone;
// Values holds the figures the rule saw.
type Message struct {
	Time     time.Time `json:"time"`
	Kind     Kind      `json:"kind"`
	Severity string    `json:"severity"` // info, warning or critical
	Rule     string    `json:"rule,omitempty"`
	Symbol   string    `json:"symbol,omitempty"`
	Action   string    `json:"action,omitempty"`
	Text     string    `json:"text"`
	// Account names the guarded account when one guard watches several;
	// the rendered text then starts with it in brackets.
	Account string   `json:"account,omitempty"`
	Values  *Figures `json:"values,omitempty"`
	// Channels names where to send; empty means the configured defaults.
	Channels []string `json:"channels,omitempty"`
	// Template, when set, renders Text instead of the default (a rule's
	// message:); see Render for what it can use. A template that fails
	// falls back to the default rendering.
	Template string `json:"-"`
	// Count is how many messages this one stands for after grouping; the
	// dispatcher sets it, and 0 or 1 means one.
	Count int `json:"count,omitempty"`
}

// Figures are the numbers a rule saw on a position, as a message carries
// them to the channels and templates: typed, so that a renamed figure is a
// compile error rather than a silent 0. Fields are in the order of their
// JSON names; a zero figure is left out of the JSON, the e-mail lines and
// the template's .Values.
type Figures struct {
	Index            float64 `json:"indexPrice,omitempty"`
	Leverage         float64 `json:"leverage,omitempty"`
	Distance         float64 `json:"liquidationDistance,omitempty"` // a fraction of the index
	LiquidationPrice float64 `json:"liquidationPrice,omitempty"`
	MaxLeverage      float64 `json:"maxLeverage,omitempty"`
	Notional         float64 `json:"notional,omitempty"`
	// MarginRatio and Equity are the account's, for an account rule.
	MarginRatio float64 `json:"marginRatio,omitempty"`
	Equity      float64 `json:"equity,omitempty"`
}

// Map returns the non-zero figures by their JSON names, the one place
// the names are derived from the fields; nil for nil figures.
func (f *Figures) Map() map[string]float64 {
	if f == nil {
		return nil
	}
	out := map[string]float64{}
	v := reflect.ValueOf(*f)
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if x := v.Field(i).Float(); x != 0 {
			out[name] = x
		}
	}
	return out
}
