package act

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// A fill is the order's truth. An answer that says the order filled
// (wholly or in part) settles it: its rules' cooldown counts from it and
// no second order goes out for the same decision, whatever the positions
// listing says meanwhile. A listing that still shows the position as it
// was before the order is a read model lagging the matching engine (real
// venues have one): it is read again, for at most engine.listing_lag, and
// the first listing that agrees is the read-back; one that still
// disagrees then is an inconsistency of the exchange, said critically,
// and the symbol's orders wait until a listing agrees. It is never
// retried as an order.

// listingReads is how many times a lagging listing is read again within
// engine.listing_lag (evenly spaced).
const listingReads = 5

// answeredFill is the quantity the order's answer says filled, and whether
// it says any filled: the filled quantity, or the order's whole quantity
// when it says FILLED without one.
func answeredFill(got *exchange.Order) (decimal.Decimal, bool) {
	switch {
	case got == nil:
		return decimal.Zero, false
	case got.FilledQuantity.IsPositive():
		return got.FilledQuantity, true
	case got.Status == "FILLED":
		return got.Quantity, got.Quantity.IsPositive()
	}
	return decimal.Zero, false
}

// unchanged reports whether the listing ps shows the position key as it
// was before the order: listed, not empty, its quantity before. Anything
// else (smaller, gone, left out, grown, turned over) is judged as the
// read-back always is; only this is a listing that may lag a fill.
func unchanged(ps []exchange.Position, key market.Key, before decimal.Decimal) bool {
	q, ok := listedQuantity(ps, key)
	return ok && q.Equal(before)
}

// lagRead is what reading a lagging listing again found.
type lagRead struct {
	ps    []exchange.Position
	reads int           // the reads after the read-back
	took  time.Duration // from the read-back to the listing taken
	// agreed: the last listing read no longer shows the position as
	// before the order.
	agreed bool
	err    error // the last read's, when it failed
}

// readUntilAgrees reads the positions again, evenly within lag, until a
// listing no longer shows the position key unchanged; it returns the last
// listing read. The reads have a context of their own: the order's may be
// spent, and its outcome is known.
func readUntilAgrees(ctx context.Context, h Host, lag time.Duration, key market.Key, before decimal.Decimal) lagRead {
	var out lagRead
	if lag <= 0 {
		return out
	}
	step := lag / listingReads
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lag+readBackTimeout)
	defer cancel()
	t := time.NewTimer(step)
	defer t.Stop()
	for out.reads < listingReads {
		select {
		case <-t.C:
		case <-rctx.Done():
			out.err = rctx.Err()
			return out
		}
		out.reads++
		out.took += step
		ps, err := h.Positions(rctx)
		var partial *exchange.PartialError
		if err != nil && !errors.As(err, &partial) {
			out.err = err
		} else {
			out.ps, out.err = ps, nil
			if !unchanged(ps, key, before) {
				out.agreed = true
				return out
			}
		}
		t.Reset(step)
	}
	return out
}

// lagText says a listing that lagged an order's fill, once: how long it
// showed the position as before, and what it then showed.
func lagText(sym string, key market.Key, id int64, status string, filled, before decimal.Decimal, r lagRead) string {
	if r.agreed {
		shows := "left it out"
		if q, ok := listedQuantity(r.ps, key); ok {
			shows = "showed " + q.String()
		}
		return fmt.Sprintf("the positions listing lagged order %d (%s, filled %s): it still showed %s %s at the read-back, and %s at the %s read after (%s later)",
			id, status, filled, sym, before, shows, ordinal(r.reads), r.took)
	}
	return fmt.Sprintf("INCONSISTENT EXCHANGE: order %d on %s was answered %s, filled %s, but the positions listing still shows %s after %d more reads over %s (engine.listing_lag); the fill is the order's outcome: no order goes out on %s until a listing agrees",
		id, sym, status, filled, before, r.reads, r.took, sym)
}

// listedQuantity is the quantity ps lists for the position key, and
// whether it lists it open.
func listedQuantity(ps []exchange.Position, key market.Key) (decimal.Decimal, bool) {
	for i := range ps {
		if !ps[i].Empty && market.KeyOf(&ps[i]) == key {
			return ps[i].Quantity, true
		}
	}
	return decimal.Zero, false
}

func ordinal(n int) string {
	switch n {
	case 1:
		return "1st"
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return fmt.Sprintf("%dth", n)
}

// sayLag says, once the order has ended, a listing that lagged its fill:
// a warning when a later listing agreed; critical (audited as an
// inconsistency of the exchange, notified) when none did within
// engine.listing_lag, and then the symbol's orders wait until a listing
// agrees (reducePosition.settle).
func (c *ReduceStep) sayLag(ctx context.Context, h Host, sym string, at time.Time) {
	if c.lag == "" {
		return
	}
	name := string(rules.ReducePosition)
	names := Dedupe(c.Rules)
	ev := journal.Event{Level: slog.LevelWarn, Msg: c.lag, Attrs: []any{"action", name, "symbol", sym, "rule", strings.Join(names, ",")},
		Audit: &journal.Record{Time: at, Type: "action", Phase: "lagged", Action: name, Symbol: sym, Rules: names, Reason: c.lag}}
	if c.inconsistent {
		ev.Level = slog.LevelError
		ev.Audit.Type, ev.Audit.Phase = "exchange", "inconsistent"
		ev.Note = &notify.Message{Time: at, Kind: notify.KindActionFailed, Severity: "critical", Symbol: sym, Action: name, Rule: strings.Join(names, ","), Text: c.lag}
		if c.kind.open == nil {
			c.kind.open = map[string]*openOrder{}
		}
		filled, _ := answeredFill(c.order)
		c.kind.open[sym] = &openOrder{id: IntentID(sym, name, at), at: at, direction: c.direction, before: c.before, qty: c.dec.Order.Quantity, rules: names, filled: filled, counted: true}
	}
	h.Emit(ctx, ev)
}
