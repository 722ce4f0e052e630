package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// keyRow is one line of check's key table: a call the guard makes on the
// exchange, the rules that make it, and whether the key may.
type keyRow struct {
	Call, UsedBy, May string
	// Problem, when set, is why check fails on this row, with the next
	// step: the key may not make the call, or the probe found something
	// to look at.
	Problem string
}

// keyProber is what the key's probes call: the account's reads and the
// two calls a probe makes (exchange.Client).
type keyProber interface {
	Positions(ctx context.Context) ([]exchange.Position, error)
	Trades(ctx context.Context) (*exchange.Trades, error)
	SetPositionSettings(ctx context.Context, symbol string, s exchange.Settings) (*exchange.Position, error)
	PlaceOrder(ctx context.Context, symbol string, o exchange.OrderRequest) (*exchange.Order, error)
}

// keyCheck is check's look at the API key: the calls the rules make
// (rules.Set.Calls, from the kinds' table) and, with --probe-key, a probe
// of each that changes nothing.
type keyCheck struct {
	cfg *config.Config
	// probe is nil without credentials; else the client the probes go
	// through, when --probe-key asked for them (probing), or not.
	probe   keyProber
	probing bool
}

// rows returns the key table: the positions read first (every tick makes
// it; check has just made it when credentials were given), then each
// call the rules make.
func (k keyCheck) rows(ctx context.Context) []keyRow {
	read := keyRow{Call: "GET " + k.cfg.Exchange.PositionsPath, UsedBy: "every tick (the account read)", May: "not probed: no credentials"}
	if k.probe != nil {
		read.May = "yes (check read the account above)"
	}
	out := []keyRow{read}
	for _, u := range k.cfg.Rules.Calls() {
		kinds := make([]string, len(u.Kinds))
		for i, kd := range u.Kinds {
			kinds[i] = string(kd)
		}
		row := keyRow{Call: k.route(u.Call) + " (" + strings.Join(kinds, ", ") + ")", UsedBy: strings.Join(u.Rules, ", ")}
		switch {
		case k.probe == nil:
			row.May = "not probed: no credentials"
		case u.Call == rules.CallCancel:
			// The spec shows no listing of open orders: no cancel can be
			// made sure to cancel nothing.
			row.May = "not probed: the exchange shows no open orders to read first, so a cancel could cancel some"
		case u.Call != rules.CallSettings && u.Call != rules.CallOrder:
			row.May = "not probed: check knows no probe of this call"
		case !k.probing:
			row.May = "not probed: --probe-key tries it, changing nothing (README: Credentials)"
		case u.Call == rules.CallSettings:
			k.probeSettings(ctx, &row)
		default:
			k.probeOrder(ctx, &row)
		}
		if row.Problem != "" {
			row.Problem = fmt.Sprintf("%s (%s %s): %s", k.route(u.Call), plural(len(u.Rules), "rule", "rules"), strings.Join(u.Rules, ", "), row.Problem)
		}
		out = append(out, row)
	}
	return out
}

// route is the method and path of a call.
func (k keyCheck) route(c rules.ExchangeCall) string {
	switch c {
	case rules.CallSettings:
		return "POST " + exchange.RouteSettings
	case rules.CallCancel:
		return "POST " + exchange.RouteCancel
	case rules.CallOrder:
		return "POST " + k.cfg.Exchange.OrderPath
	}
	return string(c)
}

// holdings reads the positions and symbols for a probe: the symbols by
// id, the positions readable, and the symbol ids of those that are not
// (0 for one whose symbol id could not be read either).
func (k keyCheck) holdings(ctx context.Context) ([]exchange.Position, []int64, *exchange.Trades, error) {
	tr, err := k.probe.Trades(ctx)
	var pe *exchange.PartialError
	if err != nil && !(errors.As(err, &pe) && tr != nil) {
		return nil, nil, nil, fmt.Errorf("read the symbols: %w", err)
	}
	ps, err := k.probe.Positions(ctx)
	var unreadable []int64
	if errors.As(err, &pe) {
		for _, it := range pe.Items {
			unreadable = append(unreadable, it.SymbolID)
		}
		err = nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read the positions: %w", err)
	}
	return ps, unreadable, tr, nil
}

// probeSettings sends a settings call that changes nothing: a listed
// position's own margin mode and leverage, on a symbol whose every
// position (a hedge-mode long and short share the symbol's settings)
// has the same ones. A symbol without an open position goes first.
func (k keyCheck) probeSettings(ctx context.Context, row *keyRow) {
	ps, unreadable, tr, err := k.holdings(ctx)
	if err != nil {
		row.May = "unknown: " + err.Error()
		return
	}
	if slices.Contains(unreadable, 0) {
		row.May = "not probed: a position whose symbol could not be read might share its settings with any symbol's"
		return
	}
	var sym string
	var want exchange.Settings
	emptyFound := false
	for i := range ps {
		p := &ps[i]
		c, ok := tr.ContractByID(p.SymbolID)
		if !ok || slices.Contains(unreadable, p.SymbolID) {
			continue
		}
		s, same := exchange.Settings{Cross: p.Cross, Leverage: p.Leverage}, p.Leverage >= 1
		empty := true
		for j := range ps {
			if q := &ps[j]; q.SymbolID == p.SymbolID {
				same = same && q.Cross == s.Cross && q.Leverage == s.Leverage
				empty = empty && (q.Empty || !q.Quantity.IsPositive())
			}
		}
		if same && (sym == "" || empty && !emptyFound) {
			sym, want, emptyFound = c.Name, s, empty
		}
	}
	if sym == "" {
		row.May = "not probed: no listed position whose own settings can be sent back unchanged"
		return
	}
	mode := "isolated"
	if want.Cross {
		mode = "cross"
	}
	what := fmt.Sprintf("%s at its own %dx %s", sym, want.Leverage, mode)
	got, err := k.probe.SetPositionSettings(ctx, sym, want)
	if err == nil {
		row.May = "yes (" + what + ": accepted)"
		if got.Cross != want.Cross || got.Leverage != want.Leverage {
			row.May = fmt.Sprintf("yes (%s: answered %dx cross=%t)", what, got.Leverage, got.Cross)
			row.Problem = fmt.Sprintf("the probe sent %s and the exchange answered %dx cross=%t: look at %s on the exchange", what, got.Leverage, got.Cross, sym)
		}
		return
	}
	judgeAnswer(row, what, err)
}

// probeOrder sends a reduce-only, immediate-or-cancel order of one
// increment on a symbol the account holds no position on: there is
// nothing it could reduce, so it cannot fill and the exchange refuses it
// (REDUCE_ONLY_REJECTED on the simulated exchange), which proves the key
// may place orders; a 401 or 403 proves it may not. Only a position
// opened on that symbol between the read and the order could be reduced,
// by that one increment.
func (k keyCheck) probeOrder(ctx context.Context, row *keyRow) {
	ps, unreadable, tr, err := k.holdings(ctx)
	if err != nil {
		row.May = "unknown: " + err.Error()
		return
	}
	if slices.Contains(unreadable, 0) {
		row.May = "not probed: a position whose symbol could not be read might be on any symbol"
		return
	}
	var c *exchange.ContractSymbol
	for i := range tr.ContractsSymbols {
		s := &tr.ContractsSymbols[i]
		held := slices.Contains(unreadable, s.ID) || slices.ContainsFunc(ps, func(p exchange.Position) bool {
			return p.SymbolID == s.ID && !p.Empty && !p.Quantity.IsZero()
		})
		if !held {
			c = s
			break
		}
	}
	if c == nil {
		row.May = "not probed: the account holds a position on every symbol, so a reduce-only order could fill"
		return
	}
	qty := c.BaseMinimumIncrement
	if !qty.IsPositive() {
		qty = decimal.New(1, -int32(max(c.BaseScale, 0)))
	}
	what := fmt.Sprintf("a reduce-only IOC SELL %s on %s, where the account holds nothing", qty, c.Name)
	o, err := k.probe.PlaceOrder(ctx, c.Name, exchange.ReduceOnlyIOC(exchange.Sell, qty))
	if err == nil {
		row.May = fmt.Sprintf("yes (%s: answered %s, filled %s)", what, o.Status, o.FilledQuantity)
		if !o.FilledQuantity.IsZero() {
			row.Problem = fmt.Sprintf("the probe order (%s) filled %s: a position was opened on %s meanwhile; look at it on the exchange", what, o.FilledQuantity, c.Name)
		}
		return
	}
	judgeAnswer(row, what, err)
}

// judgeAnswer says what a probe's refusal err tells of the key: a 401 or
// 403 that it may not make the call; a 404 or 405 nothing (no such
// endpoint there); another refusal of the request itself that it may,
// the exchange having checked the key's permission before it judged the
// request (README: Assumptions); anything else nothing.
func judgeAnswer(row *keyRow, what string, err error) {
	var ae *exchange.APIError
	if !errors.As(err, &ae) {
		row.May = "unknown: " + err.Error()
		row.Problem = "the probe got no answer (" + err.Error() + "): run check again"
		return
	}
	answer := strings.TrimSpace(fmt.Sprintf("%d %s", ae.Status, ae.Code))
	if ae.Message != "" {
		answer += ": " + ae.Message
	}
	switch {
	case ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden:
		row.May = "NO: " + answer
		row.Problem = "the exchange refuses the key (" + answer + "): allow the call in the key's settings on the exchange (README: Credentials), or take those actions out of the rules"
	case ae.Status == http.StatusNotFound || ae.Status == http.StatusMethodNotAllowed:
		row.May = "unknown: " + answer
		row.Problem = "the exchange has no such endpoint (" + answer + "): set its path in the configuration (exchange.order_path for orders)"
	case ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusTooManyRequests:
		row.May = "yes (" + what + ": refused on its merits, " + answer + ")"
	default:
		row.May = "unknown: " + answer
		row.Problem = "the probe got no usable answer (" + answer + "): run check again"
	}
}

// printKeys prints the key table and returns the problems it found.
func printKeys(w io.Writer, rows []keyRow) []string {
	fmt.Fprintln(w, "\nAPI key: the calls the guard makes")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  CALL\tUSED BY\tKEY MAY")
	var problems []string
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Call, r.UsedBy, r.May)
		if r.Problem != "" {
			problems = append(problems, r.Problem)
		}
	}
	tw.Flush()
	if len(rows) == 1 {
		fmt.Fprintln(w, "  (the rules make no call on the exchange: the key needs only to read the account)")
	}
	return problems
}
