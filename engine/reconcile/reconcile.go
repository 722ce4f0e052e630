// Package reconcile names every change of a position the guard did not
// make: it keeps each open position's figures from one read to the next
// and compares, and says a position gone liquidated or closed. It is the
// engine's part for what happens on the exchange without the guard; the
// engine hands it each tick's view (engine/market), its own calls, and the
// positions the evaluator forgets, and emits what it returns.
package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/notify"
	"github.com/shopspring/decimal"
)

// Reconciler names every change of a position the guard did not make. It
// keeps each open position's figures from one read to the next and
// compares: a position that grew, shrank or turned to the other side
// without an order of the guard is said with before and after; a position
// gone (listed empty, or missing past its grace: forgetGone decides) with
// its index at, past or near its liquidation price was liquidated, said
// loudest; one gone far from it was closed. "Missing" is never "closed":
// only the evaluator's verdict (forgetGone), after the grace, makes a position gone.
type Reconciler struct {
	// near is how close to its liquidation price (a fraction of it) a
	// position must have been for its disappearance to count as a
	// liquidation (engine.liquidation_margin).
	near decimal.Decimal
	// confirm is how many reads in a row must leave out a position with
	// that evidence before it is said liquidated
	// (engine.liquidation_confirm_reads; leftOut).
	confirm int
	// ownFor is how long after an order of the guard a change of its
	// symbol's quantity is the guard's own.
	ownFor time.Duration
	last   map[market.Key]*lastSeen
	own    map[string]ownOrder     // symbol → the guard's last order on it
	turned map[market.Key]struct{} // positions that turned over: said, not closed
	// prices are the index prices of the last read (the snapshot's).
	prices map[string]decimal.Decimal
	// places are the figures of the position at each place of the last
	// answer, so that a steady account is compared without a lookup.
	places []*lastSeen
	// seen counts the entries of last the last Observe found listed open
	// (each once, at its time): when it is all of them, none is left out
	// and leftOut has nothing to walk.
	seen int
	// intents are orders taken over without a recorded outcome (a
	// restart, a takeover): the first read says what the account shows.
	intents []act.Intent
	// marked, when set, keeps each liquidation marked on the status
	// until acknowledged (the board's).
	marked func(Liquidation)
	// poolMoved is when the guard's last settings call was sent, and
	// poolCall what it was: a call on a cross position moves the cross
	// pool, so the cross positions' liquidation prices read before it are
	// no longer theirs.
	poolMoved time.Time
	poolCall  string
	// poolAt is the read poolWhy was worked out for (poolLiquidated).
	poolAt  time.Time
	poolWhy string
}

// Adopted takes an order whose outcome was never recorded: the next read
// says what the account shows of its symbol.
func (r *Reconciler) Adopted(in act.Intent) { r.intents = append(r.intents, in) }

// settleIntents says, for each order taken over, what read v shows of its
// symbol: the outcome the run that sent it never recorded.
func (r *Reconciler) settleIntents(now time.Time, v *market.View) []journal.Event {
	var evs []journal.Event
	for _, in := range r.intents {
		shows := "no open position"
		for i := range v.Rows {
			if row := &v.Rows[i]; row.Open && row.Sym != nil && row.Sym.Name == in.Symbol {
				shows = fmt.Sprintf("%s %s", row.P.Direction, row.P.Quantity)
			}
		}
		if in.Quantity != nil && !in.Quantity.IsZero() {
			// Its fill may show only in the reads that follow (a listing
			// that lags): a change of the symbol then is the guard's.
			r.own[in.Symbol] = ownOrder{at: now, qty: *in.Quantity}
		}
		text := fmt.Sprintf("order %s (%s %s of %s, by %s) left without a recorded outcome: taken as sent; the account now shows %s of %s, and its rules' cooldowns count from %s",
			in.ID, in.Action, in.Quantity, in.Symbol, strings.Join(in.Rules, ","), shows, in.Symbol, in.At.UTC().Format(time.RFC3339Nano))
		evs = append(evs, journal.Event{Level: slog.LevelWarn, Msg: text, Attrs: []any{"action", in.Action, "symbol", in.Symbol},
			Audit: &journal.Record{Time: now, Type: "action", Phase: "settled", Action: in.Action, Symbol: in.Symbol, Position: in.Position, Rules: in.Rules, Reason: text}})
	}
	r.intents = nil
	return evs
}

// ClosedOrderReader is an exchange adapter that lists the closed orders
// (spec: GET /v1/contracts/orders/closed): a liquidation's evidence, kept
// raw in the audit log. The exchange client is one.
type ClosedOrderReader interface {
	ClosedOrders(ctx context.Context, rng string, offsetID int64, limit int) (*exchange.ClosedOrdersPage, error)
}

// Emitter says an event outside any tick's report (the journal).
type Emitter interface {
	Emit(ctx context.Context, rep *journal.Report, ev journal.Event)
}

// evidenceLimit is how many closed orders a liquidation's evidence keeps.
const evidenceLimit = 50

// Evidence reads the closed orders of the liquidation's month in the
// background and audits them raw beside the liquidated record (type
// liquidated, phase evidence): what the exchange itself says happened.
// wg is waited for before the journal closes.
func Evidence(wg *sync.WaitGroup, r ClosedOrderReader, jr Emitter, l Liquidation) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rec := journal.Record{Time: l.Time, Type: "liquidated", Phase: "evidence", Symbol: l.Symbol}
		page, err := r.ClosedOrders(ctx, l.Time.UTC().Format("200601"), 0, evidenceLimit)
		if err != nil {
			rec.Error = err.Error()
			rec.Reason = "the closed orders could not be read as evidence of the liquidation"
		} else {
			rec.Response, _ = json.Marshal(page)
			rec.Reason = evidenceText(page, l.Symbol)
		}
		jr.Emit(ctx, nil, journal.Event{Audit: &rec, Level: slog.LevelInfo, Msg: rec.Reason, Attrs: []any{"symbol", l.Symbol}})
	}()
}

// evidenceText says in words what a liquidation's evidence record holds:
// the month read, how many closed orders the exchange listed, and that
// they are kept in the record's response as the exchange wrote them.
func evidenceText(page *exchange.ClosedOrdersPage, symbol string) string {
	month := page.Range
	if t, err := time.Parse("200601", page.Range); err == nil {
		month = t.Format("January 2006")
	}
	switch n := len(page.Results); {
	case n == 0:
		return fmt.Sprintf("the exchange listed no closed order for %s when read as evidence of the liquidation of %s", month, symbol)
	case page.HasMore:
		return fmt.Sprintf("the exchange's first %d closed orders of %s (more not read), kept in this record's response as the exchange wrote them, as evidence of the liquidation of %s", n, month, symbol)
	case n == 1:
		return fmt.Sprintf("the exchange's one closed order of %s, kept in this record's response as the exchange wrote it, as evidence of the liquidation of %s", month, symbol)
	default:
		return fmt.Sprintf("the exchange's %d closed orders of %s, kept in this record's response as the exchange wrote them, as evidence of the liquidation of %s", n, month, symbol)
	}
}

// The reasons the rules of a position gone resolve with, beside "position
// closed" and "position not listed for …": a position liquidated or
// turned over ends its rules quietly (the reconciler said it).
const (
	ReasonLiquidated = "position liquidated"
	ReasonTurned     = "position turned to the other side"
)

// lastSeen is a position as the last read that listed it open saw it.
type lastSeen struct {
	symbol, id, dir string
	indexName       string
	qty, liq        decimal.Decimal
	index           decimal.Decimal // zero when the read had none
	margin          decimal.Decimal
	leverage        int
	cross           bool
	at              time.Time
	// missing counts the reads in a row that left the position out while
	// its index was at, past or near its liquidation price (leftOut);
	// said is what was said of it then: "probably" or "liquidated".
	missing int
	said    string
}

// New returns a reconciler that has seen no read yet, under settings s.
// marked, when not nil, is handed each liquidation said, to keep it
// marked until acknowledged (the status board's).
func New(s Settings, marked func(Liquidation)) *Reconciler {
	r := &Reconciler{
		last: map[market.Key]*lastSeen{}, own: map[string]ownOrder{}, turned: map[market.Key]struct{}{}, marked: marked,
	}
	r.SetConfig(s)
	return r
}

// Settings are the engine's settings the reconciler reads.
type Settings struct {
	// LiquidationMargin is engine.liquidation_margin: how close to its
	// liquidation price (a fraction of it) a position must have been for
	// its disappearance to count as a liquidation.
	LiquidationMargin float64
	// ConfirmReads is engine.liquidation_confirm_reads (at least 1).
	ConfirmReads int
	// Interval is the engine's interval: a change within two of them
	// (and 5 s) of the guard's own order is the guard's.
	Interval time.Duration
}

// SetConfig takes in the settings it reads (at the start and at a
// reload): engine.liquidation_margin, and the interval that bounds how long
// after its own order a change is the guard's.
func (r *Reconciler) SetConfig(s Settings) {
	r.near = decimal.NewFromFloat(s.LiquidationMargin)
	r.confirm = max(s.ConfirmReads, 1)
	r.ownFor = 2*s.Interval + 5*time.Second
}

// Liquidation is a position the reconciler said liquidated, with the last
// figures the guard read of it: what the status keeps marked.
type Liquidation struct {
	Time             time.Time
	Symbol, Side     string
	Quantity         decimal.Decimal
	LiquidationPrice decimal.Decimal
	Index            decimal.Decimal
	// Margin is the position's margin at the last read before it was
	// gone (zero when not known); Cross says it was a cross position.
	Margin decimal.Decimal
	Cross  bool
	// Text is what the critical notification said.
	Text string
}

// Acted records the guard's own calls of a tick (its report's actions):
// an order sent changes its symbol's quantity, which is then not said as a
// change made by someone else.
func (r *Reconciler) Acted(now time.Time, actions []journal.ActionEvent) {
	for i := range actions {
		a := &actions[i]
		// An order whose answer was lost may have filled: a change that
		// a later read settles it by is the guard's too.
		order := a.Outcome == "sent" || a.Outcome == "error" && errors.Is(a.Err, act.ErrUnknownOutcome)
		if order && !a.Quantity.IsZero() {
			r.own[a.Symbol] = ownOrder{at: now, qty: a.Quantity}
		}
		if a.Outcome == "sent" && a.From != 0 { // a settings call: leverage from
			r.poolMoved, r.poolCall = now, a.Action+" "+a.Symbol
		}
	}
}

// ours reports whether a change of symbol seen at now follows an order of
// the guard.
func (r *Reconciler) ours(symbol string, now time.Time) bool {
	o, ok := r.own[symbol]
	return ok && (now.Sub(o.at) <= r.ownFor || o.reads <= ownReads)
}

// ownOrder is the guard's last order on a symbol: when, and how much.
type ownOrder struct {
	at  time.Time
	qty decimal.Decimal
	// reads counts the reads observed since the order.
	reads int
}

// ownReads is how many reads after an order of the guard a change of its
// symbol stays the guard's own, however long they take: a slow exchange
// whose reads come more than ownFor apart made the guard's own close near
// a liquidation price read as a liquidation.
const ownReads = 2

// Observe compares the open positions of a read (the tick's view at now)
// with the last ones and returns what changed without the guard. A
// position at the same place of the answer as in the last read is found
// there, without a lookup; its quantity is compared on every read (the
// spec gives updatedAt no meaning for trades: it is no change marker).
func (r *Reconciler) Observe(now time.Time, v *market.View) []journal.Event {
	var evs []journal.Event
	for sym, o := range r.own {
		if o.reads <= ownReads {
			o.reads++
			r.own[sym] = o
		}
	}
	if len(r.intents) > 0 {
		evs = r.settleIntents(now, v)
	}
	r.prices = nil
	if v.Snap != nil {
		r.prices = v.Snap.IndexPrices
	}
	if len(r.places) < len(v.Rows) {
		r.places = append(r.places, make([]*lastSeen, len(v.Rows)-len(r.places))...)
	}
	r.seen = 0
	for i := range v.Rows {
		row := &v.Rows[i]
		if !row.Open || row.Sym == nil {
			continue
		}
		p := row.P
		prev := r.places[i]
		if prev == nil || prev.id != p.ID || prev.dir != p.Direction {
			prev = r.last[row.Key]
			r.places[i] = prev
		}
		if prev != nil && prev.said != "" {
			// Listed again after it was said (probably) liquidated.
			evs = append(evs, r.withdrawn(now, prev))
			prev = nil
		}
		if prev != nil && (prev.qty == p.Quantity || prev.qty.Equal(p.Quantity)) {
			if !prev.at.Equal(now) {
				r.seen++
			}
			prev.liq, prev.margin, prev.leverage, prev.cross, prev.at = p.LiquidationPrice, p.Margin, p.Leverage, p.Cross, now
			if row.HasIndex {
				prev.index = row.Index
			}
			continue // its quantity is the same
		}
		sym := row.Sym.Name
		switch {
		case prev == nil:
			if other := r.sameID(v, row.Key); other != nil && !r.ours(sym, now) {
				r.turned[market.Key{ID: other.id, Dir: other.dir}] = struct{}{}
				evs = append(evs, r.changeEvent(now, "turned", slog.LevelError, "critical", other, p,
					fmt.Sprintf("%s turned from %s %s to %s %s without an order of the guard: a trade by hand, another bot, or an exchange that did not keep reduce-only", sym, other.dir, other.qty, p.Direction, p.Quantity)))
			}
		case p.Quantity.GreaterThan(prev.qty) && !r.ours(sym, now):
			evs = append(evs, r.changeEvent(now, "grew", slog.LevelWarn, "warning", prev, p,
				fmt.Sprintf("%s %s grew %s → %s without an order of the guard (a trade by hand or another bot)", sym, p.Direction, prev.qty, p.Quantity)))
		case p.Quantity.LessThan(prev.qty) && !r.ours(sym, now):
			evs = append(evs, r.changeEvent(now, "reduced", slog.LevelInfo, "info", prev, p,
				fmt.Sprintf("%s %s reduced %s → %s without an order of the guard", sym, p.Direction, prev.qty, p.Quantity)))
		}
		if prev == nil {
			prev = &lastSeen{}
			r.last[row.Key] = prev
			r.places[i] = prev
		}
		if !prev.at.Equal(now) {
			r.seen++
		}
		*prev = lastSeen{symbol: sym, id: p.ID, dir: p.Direction, indexName: row.IndexName, qty: p.Quantity, liq: p.LiquidationPrice, margin: p.Margin,
			leverage: p.Leverage, cross: p.Cross, at: now}
		if row.HasIndex {
			prev.index = row.Index
		}
	}
	return r.leftOut(now, v, evs)
}

// leftOut says, for each position the last reads listed open and read v
// (at now) leaves out, whether it was liquidated, on the evidence alone:
// its index (now or at the last read) at, past or within
// engine.liquidation_margin of its liquidation price, or the cross pool
// lost. The first read that leaves it out says it probably was, at once;
// engine.liquidation_confirm_reads in a row say it was (the liquidation,
// marked on the status); a read that lists it again withdraws it
// (observe). A position listed empty is forgetGone's, at once, and one
// without that evidence waits for its grace there: missing is not closed.
// No rule's cooldown or for bounds how soon a liquidation is said.
func (r *Reconciler) leftOut(now time.Time, v *market.View, evs []journal.Event) []journal.Event {
	if r.seen == len(r.last) {
		return evs // every position last listed open is listed open now
	}
	var out []*lastSeen
	for _, s := range r.last {
		if !s.at.Equal(now) && s.said != "liquidated" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return evs
	}
	listed := map[string]bool{} // ids the read lists, open or not, or could not read
	for i := range v.Rows {
		listed[v.Rows[i].P.ID] = true
	}
	if v.Snap != nil {
		for _, pe := range v.Snap.Partial {
			for _, it := range pe.Items {
				if pe.What == "positions" {
					listed[it.ID] = true // "" when an item had no id: nothing can be told
				}
			}
		}
	}
	if listed[""] {
		return evs
	}
	slices.SortFunc(out, func(a, b *lastSeen) int { return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.dir, b.dir)) })
	for _, s := range out {
		if listed[s.id] {
			continue
		}
		if r.ours(s.symbol, now) && !r.own[s.symbol].qty.LessThan(s.qty) {
			continue // the guard's own order took it all
		}
		at := r.prices[s.indexName]
		if !at.IsPositive() {
			at = s.index
		}
		why := ""
		switch {
		case r.liquidated(s, at) || r.liquidated(s, s.index):
		case s.cross && r.poolLiquidated(now) != "":
			why = "; " + r.poolLiquidated(now)
		default:
			continue // no evidence: forgetGone's grace decides
		}
		s.missing++
		if s.missing >= r.confirm {
			s.said = "liquidated"
			ev := r.liquidationEvent(now, s, at, fmt.Sprintf("left out of the listing for %d reads in a row%s", s.missing, why))
			if r.marked != nil {
				r.marked(Liquidation{Time: now, Symbol: s.symbol, Side: s.dir, Quantity: s.qty, LiquidationPrice: s.liq, Index: at, Text: ev.Msg})
			}
			evs = append(evs, ev)
			continue
		}
		if s.said == "" {
			s.said = "probably"
			evs = append(evs, r.probableEvent(now, s, at, why))
		}
	}
	return evs
}

// probableEvent says a position left out of one read at, past or near its
// liquidation price: probably liquidated, confirmed or withdrawn by the
// next reads.
func (r *Reconciler) probableEvent(now time.Time, s *lastSeen, index decimal.Decimal, why string) journal.Event {
	text := fmt.Sprintf("PROBABLY LIQUIDATED: %s %s %s at %dx is left out of the positions listing with its index %s at or near its liquidation price %s%s; said liquidated if %d reads in a row leave it out (engine.liquidation_confirm_reads), withdrawn if one lists it",
		s.symbol, s.dir, s.qty, s.leverage, index, s.liq, why, r.confirm)
	qty := s.qty
	return journal.Event{Level: slog.LevelError, Msg: text, Attrs: []any{"symbol", s.symbol, "position", s.id, "liquidationPrice", s.liq.String(), "index", index.String()},
		Audit: &journal.Record{Time: now, Type: "liquidated", Phase: "probable", Symbol: s.symbol, Position: s.id, Quantity: &qty, Leverage: s.leverage, Reason: text},
		Note:  &notify.Message{Time: now, Kind: notify.KindLiquidation, Severity: "critical", Symbol: s.symbol, Text: text}}
}

// withdrawn says a position listed again after a read left it out and it
// was said (probably) liquidated.
func (r *Reconciler) withdrawn(now time.Time, s *lastSeen) journal.Event {
	text := fmt.Sprintf("%s %s %s is listed again after %d reads left it out: not liquidated; the %s said before is withdrawn",
		s.symbol, s.dir, s.qty, s.missing, map[string]string{"probably": "\"probably liquidated\"", "liquidated": "liquidation (acknowledge its mark)"}[s.said])
	return journal.Event{Level: slog.LevelWarn, Msg: text, Attrs: []any{"symbol", s.symbol, "position", s.id},
		Audit: &journal.Record{Time: now, Type: "liquidated", Phase: "withdrawn", Symbol: s.symbol, Position: s.id, Reason: text},
		Note:  &notify.Message{Time: now, Kind: notify.KindLiquidation, Severity: "warning", Symbol: s.symbol, Text: text}}
}

// sameID is the last figures of the position with key's id on the other
// side that read v no longer lists open (a one-way position turned over;
// a hedge-mode long and short are both listed), nil when none. It runs
// only for a position new to the guard.
func (r *Reconciler) sameID(v *market.View, key market.Key) *lastSeen {
	other := market.Key{ID: key.ID, Dir: exchange.Long}
	if key.Dir == exchange.Long {
		other.Dir = exchange.Short
	}
	s := r.last[other]
	if s == nil {
		return nil
	}
	if _, said := r.turned[other]; said {
		return nil
	}
	for i := range v.Rows {
		if v.Rows[i].Open && v.Rows[i].Key == other {
			return nil // both sides listed: hedge mode
		}
	}
	return s
}

// Gone classifies a position forgetGone dropped at now: listed empty, or
// missing past its grace (why says which). It returns the reason its rules
// resolve with and the event that says it; "" and no event for a position
// it never saw open.
func (r *Reconciler) Gone(now time.Time, key market.Key, why string) (string, []journal.Event) {
	prev := r.last[key]
	pool := ""
	if prev != nil && prev.cross {
		pool = r.poolLiquidated(now) // over every cross position gone, this one still among them
	}
	delete(r.last, key)
	for i, s := range r.places {
		if s == prev {
			r.places[i] = nil
		}
	}
	if _, ok := r.turned[key]; ok {
		delete(r.turned, key)
		return ReasonTurned, nil
	}
	if prev == nil {
		return "", nil
	}
	if prev.said == "liquidated" {
		return ReasonLiquidated, nil // said by leftOut, reads ago
	}
	at := r.prices[prev.indexName]
	if !at.IsPositive() {
		at = prev.index
	}
	if r.ours(prev.symbol, now) && !r.own[prev.symbol].qty.LessThan(prev.qty) {
		// The guard's own order took all that was last seen: closed by it,
		// however near its liquidation price.
		return "position closed by the guard's order", nil
	}
	pooled := false
	if pool != "" && !r.liquidated(prev, at) && !r.liquidated(prev, prev.index) {
		why, pooled = why+"; "+pool, true
	}
	if pooled || r.liquidated(prev, at) || r.liquidated(prev, prev.index) {
		ev := r.liquidationEvent(now, prev, at, why)
		if r.marked != nil {
			r.marked(Liquidation{Time: now, Symbol: prev.symbol, Side: prev.dir, Quantity: prev.qty, LiquidationPrice: prev.liq, Index: at, Margin: prev.margin, Cross: prev.cross, Text: ev.Msg})
		}
		return ReasonLiquidated, []journal.Event{ev}
	}
	if r.ours(prev.symbol, now) {
		return "position closed by the guard's order", nil
	}
	if prev.cross && !r.poolMoved.IsZero() && !r.poolMoved.Before(prev.at) && now.Sub(prev.at) <= r.ownFor {
		// The guard's own call moved the pool after the last read (at
		// its tick or later), and the position is gone at the reads
		// that followed: the liquidation price read is stale, and the
		// call may well have liquidated it. Said as one: a liquidation
		// is never passed off as a close.
		why += fmt.Sprintf("; the guard's %s at %s moved the cross pool after the last read, so its liquidation price since is not known", r.poolCall, r.poolMoved.UTC().Format(time.TimeOnly))
		ev := r.liquidationEvent(now, prev, at, why)
		if r.marked != nil {
			r.marked(Liquidation{Time: now, Symbol: prev.symbol, Side: prev.dir, Quantity: prev.qty, LiquidationPrice: prev.liq, Index: at, Margin: prev.margin, Cross: prev.cross, Text: ev.Msg})
		}
		return ReasonLiquidated, []journal.Event{ev}
	}
	text := fmt.Sprintf("%s %s %s closed without an order of the guard (%s)%s", prev.symbol, prev.dir, prev.qty, why, distanceText(prev, at))
	return "position closed", []journal.Event{r.changeEvent(now, "closed", slog.LevelInfo, "info", prev, nil, text)}
}

// poolLiquidated says why the cross pool was liquidated by the moves of
// every index since the last read ("" when it was not, or cannot be
// told), worked out once per read (now) over the cross positions the read
// no longer lists open. A cross position's liquidation price is where
// the pool falls to its maintenance with the other indexes held, so the
// pool's slack is q·|index − liquidation| of any one of them; the pool
// is gone when the moves of all of them together lost that much (within
// engine.liquidation_margin). Indexes falling together liquidate a pool
// far from each position's own liquidation price.
func (r *Reconciler) poolLiquidated(now time.Time) string {
	if r.poolAt.Equal(now) {
		return r.poolWhy
	}
	r.poolAt, r.poolWhy = now, ""
	slack, lost := decimal.Decimal{}, decimal.Zero
	known := false
	for _, s := range r.last {
		if !s.cross || !s.at.Before(now) || !s.index.IsPositive() || !s.liq.IsPositive() {
			continue
		}
		ix := r.prices[s.indexName]
		if !ix.IsPositive() {
			return ""
		}
		sl := s.qty.Mul(s.index.Sub(s.liq).Abs())
		if !known || sl.LessThan(slack) {
			slack, known = sl, true
		}
		move := s.qty.Mul(ix.Sub(s.index))
		if s.dir == exchange.Short {
			move = move.Neg()
		}
		lost = lost.Sub(move)
	}
	if known && lost.GreaterThanOrEqual(slack.Mul(decimal.NewFromInt(1).Sub(r.near))) {
		r.poolWhy = fmt.Sprintf("the cross positions gone together lost %s on their indexes since the last read, and the pool had %s above its maintenance: the cross pool was liquidated", lost.Round(2), slack.Round(2))
	}
	return r.poolWhy
}

// liquidated reports whether an index at index put prev at, past or within
// near of its liquidation price.
func (r *Reconciler) liquidated(prev *lastSeen, index decimal.Decimal) bool {
	if !prev.liq.IsPositive() || !index.IsPositive() {
		return false
	}
	band := prev.liq.Mul(r.near)
	switch prev.dir {
	case exchange.Long:
		return index.LessThanOrEqual(prev.liq.Add(band))
	case exchange.Short:
		return index.GreaterThanOrEqual(prev.liq.Sub(band))
	}
	return false
}

// distanceText says how far from its liquidation price prev was at index.
func distanceText(prev *lastSeen, index decimal.Decimal) string {
	if !prev.liq.IsPositive() || !index.IsPositive() {
		return ""
	}
	d := index.Sub(prev.liq).Div(index).Abs().Shift(2).StringFixed(2)
	return fmt.Sprintf(", index %s, %s%% from its liquidation price %s", index, d, prev.liq)
}

// liquidationEvent is a position liquidated: critical everywhere, with the
// last figures the guard read and what it lost.
func (r *Reconciler) liquidationEvent(now time.Time, prev *lastSeen, index decimal.Decimal, why string) journal.Event {
	mode := "isolated: the loss is its margin"
	if prev.cross {
		mode = "cross: the loss is its margin and what the shared pool covered"
	}
	text := fmt.Sprintf("LIQUIDATED: %s %s %s at %dx (%s; its liquidation price %s, index %s); at the last read (%s) its margin was %s (%s)",
		prev.symbol, prev.dir, prev.qty, prev.leverage, why, prev.liq, index, prev.at.UTC().Format(time.RFC3339), prev.margin.Round(2), mode)
	qty := prev.qty
	cross := prev.cross
	rec := &journal.Record{Time: now, Type: "liquidated", Symbol: prev.symbol, Position: prev.id, Quantity: &qty, Leverage: prev.leverage,
		Cross: &cross, Reason: text}
	return journal.Event{Level: slog.LevelError, Msg: text, Attrs: []any{"symbol", prev.symbol, "position", prev.id, "liquidationPrice", prev.liq.String(), "index", index.String()},
		Audit: rec,
		Note:  &notify.Message{Time: now, Kind: notify.KindLiquidation, Severity: "critical", Symbol: prev.symbol, Text: text},
		Count: func(m *journal.Metrics) { m.Liquidation(prev.symbol) }}
}

// changeEvent is a change of a position the guard did not make: audited
// (type position, or closed), logged, counted and notified at severity.
func (r *Reconciler) changeEvent(now time.Time, change string, level slog.Level, severity string, prev *lastSeen, p *exchange.Position, text string) journal.Event {
	typ := "position"
	if change == "closed" {
		typ = "closed"
	}
	rec := &journal.Record{Time: now, Type: typ, To: change, Symbol: prev.symbol, Position: prev.id, Reason: text}
	if p != nil {
		q := p.Quantity
		rec.Quantity = &q
	}
	symbol := prev.symbol
	return journal.Event{Level: level, Msg: text, Attrs: []any{"symbol", symbol, "change", change},
		Audit: rec,
		Note:  &notify.Message{Time: now, Kind: notify.KindPosition, Severity: severity, Symbol: symbol, Text: text},
		Count: func(m *journal.Metrics) { m.PositionChange(symbol, change) }}
}
