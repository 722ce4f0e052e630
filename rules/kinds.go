package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ActionKind names what a firing rule does to the position.
type ActionKind string

// The action kinds every rule file may use: the rows of DefaultKinds.
// Every action only ever lowers risk.
const (
	// LowerLeverage sets the position's leverage to the value of the
	// action's leverage expression, if lower than the current one.
	LowerLeverage ActionKind = "lower_leverage"
	// SetIsolated switches the position to isolated margin.
	SetIsolated ActionKind = "set_isolated"
	// CancelOrders cancels the symbol's open orders.
	CancelOrders ActionKind = "cancel_orders"
	// Notify sends a notification.
	Notify ActionKind = "notify"
	// ReducePosition cuts the position's exposure with a reduce-only,
	// immediate-or-cancel market order for a fraction of its quantity or
	// the quantity an expression gives.
	ReducePosition ActionKind = "reduce_position"
)

// Param is a parameter an action kind takes besides `action`.
type Param uint8

// The parameters an action may take.
const (
	// ParamLeverage: `leverage`, an expression giving a leverage
	// (required).
	ParamLeverage Param = 1 << iota
	// ParamAmount: `fraction` (of the position's quantity, in (0, 1]) or
	// `quantity` (an expression), exactly one of them.
	ParamAmount
	// ParamChannels: `channels`, a list of notification channels
	// (optional).
	ParamChannels
)

// KindSpec is what the rules' loader, `check` and the backtest's report
// know of an action kind: its one row of a Kinds table.
type KindSpec struct {
	Name ActionKind
	// Params are the parameters the kind takes.
	Params Param
	// Missing completes the error of a required parameter left out, after
	// "NAME: missing parameter ".
	Missing string
	// Check describes one action of the kind in `check`'s summary; nil
	// says its name.
	Check func(a *Action) string
	// Harm, when set, says in `check`'s summary what the kind may do to
	// a rule's position that is not only a lower risk.
	Harm func(r *Rule) string
	// Noun and Nouns name one and several of its actions in the
	// backtest's verdict ("" says the kind's name).
	Noun, Nouns string
	// Marker is the shape of its actions on the report's charts: "cancel"
	// (a square), "notify" (a diamond) or "" (a triangle, as a settings
	// change).
	Marker string
	// Repeatable is false for a kind whose call is not idempotent (an
	// order): a second one is a second effect.
	Repeatable bool
	// Call is the exchange call the kind's actions make, which the API
	// key must be allowed: `check --exchange` lists the calls of the
	// rules in force and probes the key for them. "" for a kind that
	// calls nothing on the exchange (notify).
	Call ExchangeCall
	// Needs are the calls of the venue contract the kind's steps make,
	// named as package exchange names them (exchange.Call: "PlaceOrder"):
	// the configuration is refused at load when a rule's kind needs a
	// call its venue does not offer, naming the rule and the call. Empty
	// for a kind that calls nothing on the venue (notify).
	Needs []string
}

// ExchangeCall names a mutating call on the exchange, as far as the API
// key's permissions go; the exchange package owns its route and body.
type ExchangeCall string

// The calls the shipped kinds make.
const (
	// CallSettings is the position settings call (margin mode and
	// leverage, POST /v1/contracts/positions/{symbol}/settings).
	CallSettings ExchangeCall = "settings"
	// CallCancel cancels a symbol's contract orders (POST
	// /v1/contracts/orders/{symbol}/cancel).
	CallCancel ExchangeCall = "cancel"
	// CallOrder places an order: the guard's are reduce-only and
	// immediate-or-cancel (the assumed order path, exchange.order_path).
	CallOrder ExchangeCall = "order"
)

// CallUse is an exchange call a rule set makes: the kinds that make it
// and the rules that use those kinds, in the file's order.
type CallUse struct {
	Call  ExchangeCall
	Kinds []ActionKind
	Rules []string
}

// Calls lists the exchange calls the set's rules make, in the order of
// the kinds' table, each once: what the API key must be allowed.
func (s *Set) Calls() []CallUse {
	var out []CallUse
	for _, k := range s.Table() {
		if k.Call == "" || !slices.ContainsFunc(s.Rules, func(r *Rule) bool { return r.HasAction(k.Name) }) {
			continue
		}
		i := slices.IndexFunc(out, func(u CallUse) bool { return u.Call == k.Call })
		if i < 0 {
			out = append(out, CallUse{Call: k.Call})
			i = len(out) - 1
		}
		out[i].Kinds = append(out[i].Kinds, k.Name)
	}
	for i := range out {
		u := &out[i]
		for _, r := range s.Rules {
			if slices.ContainsFunc(u.Kinds, r.HasAction) {
				u.Rules = append(u.Rules, r.Name)
			}
		}
	}
	return out
}

// Kinds is a table of action kinds, looked up by name.
type Kinds []KindSpec

// DefaultKinds is the table of the kinds the guard ships. A caller may
// append its own rows (an action kind is one file of engine/act and its row
// there, which brings this one).
func DefaultKinds() Kinds {
	return Kinds{
		{Name: LowerLeverage, Params: ParamLeverage, Repeatable: true, Call: CallSettings, Needs: []string{"SetPositionSettings"},
			Missing: "\"leverage\" (an expression giving the target leverage, e.g. riskLimit.maxLeverage / 2)",
			Check: func(a *Action) string {
				return string(a.Kind) + " to " + strings.Join(strings.Fields(a.Leverage), " ")
			},
			Noun: "leverage cut", Nouns: "leverage cuts"},
		{Name: SetIsolated, Repeatable: true, Call: CallSettings, Needs: []string{"SetPositionSettings"}, Noun: "isolation", Nouns: "isolations",
			Harm: func(r *Rule) string {
				if r.AllowCloserLiquidation {
					return fmt.Sprintf("%s may move the liquidation price closer, not under %g%% of the index, nor so that a likely move liquidates a position sooner (stress grid)", SetIsolated, r.MinLiquidationDistance*100)
				}
				return fmt.Sprintf("%s goes out where it lowers the expected cost to liquidations (first passage), never into the rules' cut zone or during a fast move; where the account cannot be scored, it is skipped where it would make a likely move fatal or raise the expected loss (stress grid), or move the liquidation price closer without ring-fencing a failing position (allow_closer_liquidation)", SetIsolated)
			}},
		{Name: CancelOrders, Repeatable: true, Call: CallCancel, Needs: []string{"CancelOrders"}, Marker: "cancel"},
		{Name: ReducePosition, Params: ParamAmount, Call: CallOrder, Needs: []string{"PlaceOrder", "Positions"}, // the order, then its read-back
			Missing: "fraction (of the position's quantity, in (0, 1], e.g. 0.5) or quantity (an expression in the base currency)",
			Check: func(a *Action) string {
				if a.Quantity != "" {
					return fmt.Sprintf("%s by %s (reduce-only, rounded down to the increment)", a.Kind, strings.Join(strings.Fields(a.Quantity), " "))
				}
				return fmt.Sprintf("%s by %s of the quantity (reduce-only, rounded down to the increment)", a.Kind, strconv.FormatFloat(a.Fraction, 'g', -1, 64))
			}},
		{Name: Notify, Params: ParamChannels, Repeatable: true, Marker: "notify",
			Check: func(a *Action) string {
				if len(a.Channels) > 0 {
					return fmt.Sprintf("%s %s", a.Kind, strings.Join(a.Channels, ", "))
				}
				return string(a.Kind)
			}},
	}
}

// Spec is the row of kind k; ok is false for a kind the table does not
// list.
func (ks Kinds) Spec(k ActionKind) (KindSpec, bool) {
	i := slices.IndexFunc(ks, func(s KindSpec) bool { return s.Name == k })
	if i < 0 {
		return KindSpec{}, false
	}
	return ks[i], true
}

// Names lists the kinds' names, in the table's order.
func (ks Kinds) Names() []string {
	out := make([]string, len(ks))
	for i, s := range ks {
		out[i] = string(s.Name)
	}
	return out
}

// taking names the kinds that take parameter p, for the error of an
// action of another kind given it: "lower_leverage", or several joined by
// " or ".
func (ks Kinds) taking(p Param) string {
	var names []string
	for _, s := range ks {
		if s.Params&p != 0 {
			names = append(names, string(s.Name))
		}
	}
	return strings.Join(names, " or ")
}

// Table is the set's table of action kinds, DefaultKinds when it has none (a set built by
// hand).
func (s *Set) Table() Kinds {
	if s == nil || s.Kinds == nil {
		return DefaultKinds()
	}
	return s.Kinds
}

// Spec is the row of kind k in the table the set was parsed with.
func (s *Set) Spec(k ActionKind) (KindSpec, bool) { return s.Table().Spec(k) }
