package act

import (
	"context"
	"encoding/json"
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

// reducePosition cuts the position's exposure: a reduce-only,
// immediate-or-cancel market order on the side that shrinks it, for the
// largest quantity its rules ask (a fraction of the position, or a
// quantity expression). It is sent after the cancel and before the
// settings call: the settings call then moves the margin of a smaller
// position. An order is not idempotent: a second one is a second loss.
//
// It keeps two states of its own, written on the goroutine that collects
// the calls (the tick's): after a reduce-only order the exchange read back
// a larger position or the other side (what such an order can never do),
// it is stopped until the daemon restarts (ErrReduceGrew,
// ErrReduceStopped); and an order whose outcome is unknown (its answer was
// lost, or the read-back did not list the position) holds its symbol's
// orders until a read of the account settles it (ErrUnknownOutcome):
// an order is never sent again because its answer did not come.
type reducePosition struct {
	// stopped is why no more orders go out; nil while they may.
	stopped error
	// open are the orders whose outcome is unknown, by symbol.
	open map[string]*openOrder
	// last is each isolated position's last reduce sent (repeatedReduce).
	last map[string]lastReduce
}

// lastReduce is a reduce sent on an isolated position: how far it was from
// its liquidation price, and its quantity before.
type lastReduce struct {
	distance float64
	before   decimal.Decimal
}

// reduceCloser is how much closer to its liquidation price (a fraction of
// the distance at the last reduce) an isolated position must come before
// it is reduced again: reducing it does not move its liquidation price,
// so a second reduce at the same distance realises a second loss for
// nothing the first did not (a 2% tier halving it every cooldown took
// 0.25 BTC to 0.001). A tenth is more than a quiet minute's noise there.
const reduceCloser = 0.10

// repeatedReduce says why a reduce of the isolated position pos (at
// distance from its liquidation price) is not sent again ("" when it may
// be): the last one on it filled and the price has not come closer by
// reduceCloser since. The memory is let go when the position is not
// smaller than before the last reduce (it did not fill, or grew), is
// cross (a reduce moves the pool's price), or moved away to twice the
// distance.
func (k *reducePosition) repeatedReduce(sym string, pos *exchange.Position, distance float64) string {
	l, ok := k.last[sym]
	if !ok {
		return ""
	}
	if pos.Cross || !pos.Quantity.LessThan(l.before) || distance > 2*l.distance {
		delete(k.last, sym)
		return ""
	}
	if again := l.distance * (1 - reduceCloser); distance > again {
		return fmt.Sprintf("%s was reduced %.2f%% from its liquidation price and is %.2f%% from it now: a reduce does not move an isolated position's liquidation price, so it is reduced again once %.2f%% away (a tenth closer), not at the same distance",
			sym, l.distance*100, distance*100, again*100)
	}
	return ""
}

// openOrder is an order whose outcome is unknown: what the position was
// when it went out, and what it asked.
type openOrder struct {
	id        string // the intent's id: symbol and the time it was decided
	at        time.Time
	direction string
	before    decimal.Decimal
	qty       decimal.Decimal
	rules     []string
	// filled is what the order's answer said filled, when the positions
	// listing still disagreed after engine.listing_lag (reduce_listing.go):
	// the fill is known, only the listing is waited for.
	filled decimal.Decimal
	// counted: the order was settled by its answer, and its rules'
	// cooldown counts from it (the listing still disagreed).
	counted bool
}

// settleAfter is how long after an order of unknown outcome a read that
// still shows the position unchanged settles it as not filled. The order
// is immediate-or-cancel: it fills at once or never; a read this much
// later has the fill if there was one.
const settleAfter = 5 * time.Second

// ErrUnknownOutcome is the error of an order whose outcome is unknown:
// its answer did not come (a timeout, a closed connection, a 5xx) and the
// account read back does not show it either way. It is never sent again;
// the symbol's orders wait until a read settles it (ErrHeld).
var ErrUnknownOutcome error = &marked{"outcome unknown", ErrHeld}

// errSettled is what settle returns for an order of unknown outcome that a
// read shows filled: the decision is done, never a refusal.
var errSettled = errors.New("settled: the order filled")

// ErrReduceGrew is the error of a reduce-only order after which the
// exchange read back a larger position: what a reduce-only order can never
// do. It stops reduce_position until a restart (ErrReduceStopped).
var ErrReduceGrew = errors.New("the position grew after a reduce-only order")

// ErrReduceStopped is the error of a reduce_position not sent because an
// earlier one grew its position (ErrReduceGrew): no reduce order goes out
// until the daemon restarts. The cooldown spaces its rules out (Refused).
var ErrReduceStopped error = &marked{"reduce_position stopped", ErrRefused}

// errNoOrders is the error of a reduce_position whose exchange adapter
// cannot place orders.
var errNoOrders error = &marked{"the exchange adapter cannot place orders", ErrRefused}

// Name is the kind's name in the rules.
func (*reducePosition) Name() rules.ActionKind { return rules.ReducePosition }

// Spec is the kind's row of the rules' table.
func (*reducePosition) Spec() rules.KindSpec { return shipped(rules.ReducePosition) }

// Merge evaluates the rule's quantity: fraction × the position's quantity,
// or its quantity expression on env.
func (k *reducePosition) Merge(pl *Plan, d *Due, a *rules.Action, ev *rules.Evaluator, env *rules.Env) {
	var qty decimal.Decimal
	if a.Fraction > 0 {
		qty = pl.Pos.Quantity.Mul(decimal.NewFromFloat(a.Fraction))
	} else {
		f, err := ev.ReduceQuantity(a, env)
		if err != nil {
			d.Err = fmt.Errorf("reduce quantity: %w", err)
			return
		}
		qty = decimal.NewFromFloat(f)
	}
	c := pl.Step(string(rules.ReducePosition), func() Step { return &ReduceStep{kind: k} }).(*ReduceStep)
	if qty.GreaterThan(c.Asked) {
		c.Asked = qty
	}
	c.Rules = pl.named(c.Rules, d)
	d.Ask(c)
}

// ReduceStep is a plan's reduce order: the largest quantity its rules
// asked to take off the position, before rounding (DecideReduce), and
// what became of it.
type ReduceStep struct {
	Asked decimal.Decimal
	Rules []string
	kind  *reducePosition

	dec    ReduceDecision
	p      *Pending
	err    error
	before decimal.Decimal // the position's quantity when decided
	// Read back by the call (on the executor's goroutine; read once the
	// call has ended): the position after, nil when it is gone or not
	// listed; unknown: the outcome could not be told.
	after   *exchange.Position
	unknown bool
	// lag says a listing that lagged the answer's fill (reduce_listing.go);
	// inconsistent: it still disagreed after engine.listing_lag.
	lag          string
	inconsistent bool
	order        *exchange.Order // the answer, when one came
	direction    string
	note         string // Note
	skipped      bool   // Skipped
}

// Note says why the last Prepare placed no order when no error does (a
// bound left no room, the quantity rounds to nothing).
func (c *ReduceStep) Note() string { return c.note }

// Skipped reports whether the last Prepare left the order out as bounded
// (Skipper): what it would take is under the minimum, or nothing.
func (c *ReduceStep) Skipped() bool { return c.skipped }

// readBackTimeout bounds the read of the account after an order.
const readBackTimeout = 5 * time.Second

// unknownOutcome reports whether an order's error leaves its outcome
// unknown: anything but an answer of the exchange that refused it (an
// envelope's error, a status under 500) or a check before it was sent.
// A timeout, a closed connection, an answer that could not be read or a
// 5xx may come after the exchange acted.
func unknownOutcome(err error) bool {
	var ae *exchange.APIError
	if errors.As(err, &ae) {
		return ae.Status >= 500
	}
	var rl *exchange.RateLimitError
	if errors.As(err, &rl) || errors.Is(err, exchange.ErrNotReduceOnly) || errors.Is(err, ErrWouldGrow) {
		return false
	}
	return true
}

// listedEmpty reports whether ps lists the position of key as empty (a
// close the exchange says), as opposed to not listing it.
func listedEmpty(ps []exchange.Position, key market.Key) bool {
	for i := range ps {
		if ps[i].Empty && ps[i].ID == key.ID {
			return true
		}
	}
	return false
}

// Order sends the reduce order after the cancel, before the settings.
func (*ReduceStep) Order() int { return 20 }

// Prepare decides the order and readies it (the pause, the snapshot's age
// and the breaker's budget, as every mutating call). An order that cannot
// go out is said (skipped, with why).
func (c *ReduceStep) Prepare(ctx context.Context, h Host, pl *Plan) ([]*Pending, error) {
	m := h.Model()
	now := h.Now()
	sym, pos := pl.Sym.Name, pl.Pos
	name := string(rules.ReducePosition)
	names := Dedupe(c.Rules)
	c.before = pos.Quantity
	c.note, c.skipped = "", false
	skip := func(outcome, why string, err error) ([]*Pending, error) {
		if err == nil {
			c.note = "skipped: " + why
		}
		c.skipped = outcome == "skipped_bounded"
		r := journal.Record{Time: now, Type: "action", Action: name, Symbol: sym, Position: pos.ID, Rules: names,
			Phase: "skipped", Reason: why}
		h.Emit(ctx, journal.Event{Audit: &r, Level: slog.LevelWarn, Msg: "skipped " + name + " " + sym + ": " + why,
			Attrs:  []any{"action", r.Action, "symbol", sym, "rule", strings.Join(names, ",")},
			Count:  func(m *journal.Metrics) { m.Action(r.Action, outcome) },
			Action: &journal.ActionEvent{Symbol: sym, Action: r.Action, Rules: names, Outcome: outcome, Effect: why}})
		c.err = err
		return nil, err
	}
	placer := h.Placer()
	canPlace := placer != nil
	if o := c.kind.open[sym]; o != nil && c.kind.stopped == nil {
		if wait, err := c.kind.settle(ctx, h, sym, o, pos, now); err == errSettled {
			// The order filled: its rules' cooldown starts (no error), and
			// nothing else goes out for the decision it settled.
			c.note, c.err = wait, nil
			return nil, nil
		} else if wait != "" {
			return skip("skipped_held", wait, err)
		}
	}
	switch {
	case c.kind.stopped != nil:
		return skip("skipped_stopped", fmt.Sprintf("stopped until restart: %v", c.kind.stopped), fmt.Errorf("%w: %w", ErrReduceStopped, c.kind.stopped))
	case !canPlace:
		return skip("skipped", errNoOrders.Error(), errNoOrders)
	}
	distance, hasDistance := 0.0, pl.Env != nil && pl.Env.IndexPrice > 0
	if hasDistance {
		distance = pl.Env.LiquidationDistance
		// A close of the whole position is never held back: it leaves
		// nothing to be reduced again (an isolated XETH reduced at 3%
		// was left to its liquidation when the 2% rule's close waited
		// for a tenth closer).
		if why := c.kind.repeatedReduce(sym, pos, distance); why != "" && c.Asked.LessThan(pos.Quantity) {
			return skip("skipped_bounded", why, nil)
		}
	}
	c.dec = DecideReduce(m, pl, c.Asked)
	d := c.dec
	if d.Order == nil {
		return skip("skipped_bounded", d.Skip, nil)
	}
	if hasDistance && !pos.Cross {
		if c.kind.last == nil {
			c.kind.last = map[string]lastReduce{}
		}
		c.kind.last[sym] = lastReduce{distance: distance, before: pos.Quantity}
	}
	o := *d.Order
	o.ClientOrderID = ClientOrderID(IntentID(sym, name, now))
	qty := o.Quantity
	desc := fmt.Sprintf("%s %s %s %s (reduce-only, IOC)", name, sym, o.Side, qty)
	effect := d.Note
	base := journal.Record{Time: now, Type: "action", Action: name, Symbol: sym, Position: pos.ID, Rules: names,
		Quantity: &qty, ClientOrderID: o.ClientOrderID, Reason: d.Note}
	if d.Pred != nil {
		effect = joinNonEmpty(d.Note, d.Pred.String())
		base.Prediction = d.Pred.Record()
	}
	actEv := &journal.ActionEvent{Symbol: sym, Action: name, Rules: names, Quantity: qty, Effect: effect}
	c.p, c.err = h.Prepare(ctx, base, desc, effect, actEv, c.send(h, placer, sym, o, *pos, d.Pred, base.Prediction, actEv))
	if c.err == nil && d.Pred != nil {
		pl.Next = &d.Pred.Next // the plan's later calls are decided on the fill
	}
	if c.p == nil {
		return nil, c.err
	}
	return []*Pending{c.p}, nil
}

// Done applies the order's outcome once it has ended: a position that grew
// stops the kind (critical: audited, logged, notified); a fill moves the
// tick's margin model on; the read-back's liquidation price is checked
// against the prediction.
func (c *ReduceStep) Done(ctx context.Context, h Host, pl *Plan) error {
	if c.p == nil {
		return c.err
	}
	c.err = h.Finish(c.p)
	sym := pl.Sym.Name
	at := c.p.Base.Time
	name := string(rules.ReducePosition)
	if c.unknown && errors.Is(c.err, ErrUnknownOutcome) {
		if c.kind.open == nil {
			c.kind.open = map[string]*openOrder{}
		}
		o := c.dec.Order
		filled, _ := answeredFill(c.order) // an answer that said filled, the listing leaving the position out
		c.kind.open[sym] = &openOrder{id: IntentID(sym, name, at), at: at, direction: pl.Pos.Direction, before: c.before, qty: o.Quantity, rules: Dedupe(c.Rules), filled: filled}
		return c.err // said by the call's error phase; no backoff: nothing is known to have failed
	}
	h.Outcome(ctx, sym, c.err)
	c.sayLag(ctx, h, sym, at)
	if errors.Is(c.err, ErrReduceGrew) && c.kind.stopped == nil {
		c.kind.stopped = c.err
		names := Dedupe(c.Rules)
		text := fmt.Sprintf("CRITICAL: %v; %s is stopped: no reduce order goes out until riskguard restarts. Check the exchange's position and the order endpoint (exchange.order_path).", c.err, name)
		h.Note(ctx, journal.Event{Level: slog.LevelError, Msg: text, Attrs: []any{"action", name, "symbol", sym, "err", c.err},
			Audit: &journal.Record{Time: at, Type: "stopped", Action: name, Symbol: sym, Rules: names, Reason: text},
			Note: &notify.Message{Time: at, Kind: notify.KindActionFailed, Severity: "critical", Symbol: sym, Action: name,
				Rule: strings.Join(names, ","), Text: text},
			Count: func(m *journal.Metrics) { m.Action(name, "stopped") }})
		return c.err
	}
	pred := c.dec.Pred
	if c.err != nil || pred == nil {
		return c.err
	}
	if c.after != nil && !c.after.Empty && !c.inconsistent {
		r := pred.Reduced()
		h.ReadBack(ctx, at, sym, r.After, c.after.LiquidationPrice, r.Index, false)
	}
	h.Moved(at, pred.Next) // later calls of the tick see the fill
	return c.err
}

// settle looks at an order of unknown outcome o on the position as this
// tick read it (pos, at now). It returns "" once the order is settled as
// not filled (the plan may decide anew), or why the symbol's orders wait,
// with the error its rules hear: held while still unknown, errSettled
// once the read shows the fill (the decision is done: its rules' cooldown
// starts, and it is no refusal), and a growth or a turn to the other side
// stops the kind. An order whose answer said it filled is never settled
// as not filled: the symbol's orders wait for a listing that shows it.
func (k *reducePosition) settle(ctx context.Context, h Host, sym string, o *openOrder, pos *exchange.Position, now time.Time) (string, error) {
	name := string(rules.ReducePosition)
	say := func(level slog.Level, text string) {
		h.Emit(ctx, journal.Event{Level: level, Msg: text, Attrs: []any{"action", name, "symbol", sym, "rule", strings.Join(o.rules, ",")},
			Audit: &journal.Record{Time: now, Type: "action", Phase: "settled", Action: name, Symbol: sym, Rules: o.rules, Reason: text}})
	}
	how := "answer lost"
	if o.filled.IsPositive() {
		how = "answered filled " + o.filled.String()
	}
	defer func() {
		if k.open[sym] == nil && !o.counted {
			h.Settled(o.id) // its intent kept until now (ha)
		}
	}()
	switch {
	case pos.Direction != o.direction || pos.Quantity.GreaterThan(o.before):
		delete(k.open, sym)
		k.stopped = fmt.Errorf("%w: %s %s %s → %s %s after order %s (%s)", ErrReduceGrew, sym, o.direction, o.before, pos.Direction, pos.Quantity, o.id, how)
		text := fmt.Sprintf("CRITICAL: %v; %s is stopped: no reduce order goes out until riskguard restarts", k.stopped, name)
		h.Emit(ctx, journal.Event{Level: slog.LevelError, Msg: text, Attrs: []any{"action", name, "symbol", sym, "err", k.stopped},
			Audit: &journal.Record{Time: now, Type: "stopped", Action: name, Symbol: sym, Rules: o.rules, Reason: text},
			Note:  &notify.Message{Time: now, Kind: notify.KindActionFailed, Severity: "critical", Symbol: sym, Action: name, Rule: strings.Join(o.rules, ","), Text: text},
			Count: func(m *journal.Metrics) { m.Action(name, "stopped") }})
		return "", nil // the stop is said; the caller skips as stopped
	case pos.Quantity.LessThan(o.before) && o.counted:
		// The order was settled by its answer (its cooldown counted from
		// it); only the listing was waited for.
		delete(k.open, sym)
		say(slog.LevelWarn, fmt.Sprintf("the positions listing agrees with order %s (%s) at last: quantity %s → %s", o.id, how, o.before, pos.Quantity))
		return "", nil
	case pos.Quantity.LessThan(o.before):
		delete(k.open, sym)
		text := fmt.Sprintf("order %s (%s %s, %s) filled: quantity %s → %s read back; the rules wait for their cooldown before another", o.id, name, o.qty, how, o.before, pos.Quantity)
		say(slog.LevelWarn, text)
		return text, errSettled
	case o.filled.IsPositive():
		// The answer said it filled: an unchanged listing lags, however
		// long; it is never taken as "not filled".
		text := fmt.Sprintf("waits: order %s (%s %s) was answered filled %s, and the positions listing still shows %s %s (since %s): no order on %s until a listing agrees",
			o.id, name, o.qty, o.filled, sym, pos.Quantity, o.at.UTC().Format(time.RFC3339), sym)
		return text, fmt.Errorf("%w: %s", ErrHeld, text)
	case now.Sub(o.at) >= settleAfter:
		delete(k.open, sym)
		say(slog.LevelWarn, fmt.Sprintf("order %s (%s %s, answer lost) did not fill: quantity still %s %s after; the rules decide afresh", o.id, name, o.qty, pos.Quantity, now.Sub(o.at).Round(time.Millisecond)))
		return "", nil
	}
	text := fmt.Sprintf("waits: order %s (%s %s) has an unknown outcome (its answer was lost); the account read at %s still shows %s, settled by the reads of the next %s", o.id, name, o.qty, now.UTC().Format(time.RFC3339), pos.Quantity, settleAfter-now.Sub(o.at))
	return text, fmt.Errorf("%w: %s", ErrHeld, text)
}

func joinNonEmpty(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// ErrWouldGrow is the error of a reduce order refused before it is sent
// because it would not shrink the position: the side that grows it, a
// quantity over the position's, no reduce-only flag, or a direction the
// guard cannot tell the closing side of.
var ErrWouldGrow = errors.New("the order would grow the position")

// CheckReduces refuses an order that could make pos grow. It is the last
// check before the order goes out.
func CheckReduces(pos *exchange.Position, o exchange.OrderRequest) error {
	switch {
	case pos.Direction != exchange.Long && pos.Direction != exchange.Short:
		return fmt.Errorf("%w: direction %q: which side reduces it is unknown", ErrWouldGrow, pos.Direction)
	case o.Side != exchange.CloseSide(pos.Direction):
		return fmt.Errorf("%w: a %s order on a %s position", ErrWouldGrow, o.Side, pos.Direction)
	case o.Flags&exchange.ReduceOnly == 0:
		return fmt.Errorf("%w: not reduce-only (flags %#x)", ErrWouldGrow, o.Flags)
	case pos.Empty || !o.Quantity.IsPositive() || o.Quantity.GreaterThan(pos.Quantity):
		return fmt.Errorf("%w: %s of a position of %s", ErrWouldGrow, o.Quantity, pos.Quantity)
	}
	return nil
}

// ReduceDecision is a plan's reduce order as decided: Order is set when
// one goes out, Skip says why none does.
type ReduceDecision struct {
	Order *exchange.OrderRequest
	// Asked is the quantity the rules asked, before rounding.
	Asked decimal.Decimal
	// Note says how the order's quantity differs from Asked ("" when it
	// does not).
	Note string
	Pred *ReducePrediction
	Skip string
}

// DecideReduce decides the plan's reduce order: the quantity asked,
// capped at the position's, rounded down to the symbol's
// baseMinimumIncrement; under the position's minQuantity it becomes
// minQuantity when the position holds that much (the smallest order the
// exchange takes, a little more than asked), and is skipped otherwise.
// A quantity that rounds to nothing is skipped, never sent as zero. The
// side is the one that shrinks the position; the margin model m (nil
// predicts nothing) predicts the fill at the index.
func DecideReduce(m *Model, pl *Plan, asked decimal.Decimal) ReduceDecision {
	pos, sym := pl.Pos, pl.Sym
	d := ReduceDecision{Asked: asked}
	qty := asked
	if !qty.IsPositive() {
		d.Skip = fmt.Sprintf("the rules asked to reduce by %s: nothing to send", qty)
		return d
	}
	if qty.GreaterThan(pos.Quantity) {
		qty = pos.Quantity
		d.Note = fmt.Sprintf("%s asked, capped at the position's %s", asked, pos.Quantity)
	}
	if inc := sym.BaseMinimumIncrement; inc.IsPositive() {
		if r := qty.Div(inc).Floor().Mul(inc); !r.Equal(qty) {
			qty = r
			d.Note = fmt.Sprintf("%s asked, rounded down to %s (increment %s)", asked, qty, inc)
		}
	}
	if minQ := pos.MinQuantity; qty.LessThan(minQ) {
		if minQ.GreaterThan(pos.Quantity) {
			d.Skip = fmt.Sprintf("%s asked; the position's %s is under the minimum order quantity %s", asked, pos.Quantity, minQ)
			return d
		}
		qty = minQ
		d.Note = fmt.Sprintf("%s asked, raised to the minimum order quantity %s", asked, minQ)
	}
	if !qty.IsPositive() {
		d.Skip = fmt.Sprintf("%s asked rounds down to 0 at the increment %s", asked, sym.BaseMinimumIncrement)
		return d
	}
	if m != nil {
		var skip string
		if qty, skip = m.judgeReduce(pl, qty, &d); skip != "" {
			d.Skip = skip
			return d
		}
	}
	o := exchange.ReduceOnlyIOC(exchange.CloseSide(pos.Direction), qty)
	if err := CheckReduces(pos, o); err != nil {
		d.Skip = err.Error()
		return d
	}
	d.Order = &o
	if m != nil {
		d.Pred = m.PredictReduce(pl, qty)
	}
	return d
}

// send is the call of Prepare's pending order o on the position posCopy
// (as it was decided on): the order, then the account read back, which,
// not the answer, says what it did (settleRead). dp is the order's
// prediction and pred the audit record's, nil without one; actEv the
// action's event, whose Actual it writes.
func (c *ReduceStep) send(h Host, placer OrderPlacer, sym string, o exchange.OrderRequest, posCopy exchange.Position, dp *ReducePrediction, pred *journal.Prediction, actEv *journal.ActionEvent) func(ctx context.Context) (json.RawMessage, error) {
	key := market.KeyOf(&posCopy)
	return func(ctx context.Context) (json.RawMessage, error) {
		if err := CheckReduces(&posCopy, o); err != nil {
			return nil, err
		}
		got, sendErr := placer.PlaceOrder(ctx, sym, o)
		if sendErr == nil {
			c.order = got
		}
		if sendErr != nil && !unknownOutcome(sendErr) {
			return nil, sendErr // refused: nothing was done
		}
		var raw json.RawMessage
		if got != nil {
			raw, _ = json.Marshal(got)
		}
		// The account is read back whatever the answer: it, not the
		// answer, says what the order did. A lost answer's context may be
		// spent; the read has its own.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readBackTimeout)
		ps, err := h.Positions(rctx)
		cancel()
		var partial *exchange.PartialError
		if err != nil && !errors.As(err, &partial) {
			if sendErr != nil {
				c.unknown = true
				return nil, fmt.Errorf("%w: %v; reading the position back failed too (%v): the account is read again before any other order on %s", ErrUnknownOutcome, sendErr, err, sym)
			}
			return raw, fmt.Errorf("order %d sent (%s filled %s); reading the position back failed: %w", got.ID, got.Status, got.FilledQuantity, err)
		}
		if filled, ok := answeredFill(got); ok && sendErr == nil && unchanged(ps, key, c.before) {
			// The answer says it filled: a listing that disagrees lags
			// (reduce_listing.go).
			lr := readUntilAgrees(ctx, h, h.ListingLag(), key, c.before)
			c.lag, c.direction = lagText(sym, key, got.ID, got.Status, filled, c.before, lr), posCopy.Direction
			if !lr.agreed {
				c.inconsistent = true
				actEv.Actual = fmt.Sprintf("filled %s by the answer; the positions listing still shows %s", filled, c.before)
				return raw, nil
			}
			ps = lr.ps
		}
		return c.settleRead(ps, sendErr, got, raw, sym, o, posCopy, dp, pred, actEv)
	}
}

// settleRead settles the order o by the positions read back after it (ps;
// sendErr the order's own error, got its answer, raw that answer as sent
// to the audit log): the position found, turned over, missing or
// unchanged, and what it says against the prediction.
func (c *ReduceStep) settleRead(ps []exchange.Position, sendErr error, got *exchange.Order, raw json.RawMessage, sym string, o exchange.OrderRequest, posCopy exchange.Position, dp *ReducePrediction, pred *journal.Prediction, actEv *journal.ActionEvent) (json.RawMessage, error) {
	key, qty := market.KeyOf(&posCopy), o.Quantity
	other := false
	for i := range ps {
		if ps[i].SymbolID != posCopy.SymbolID || ps[i].Empty {
			continue
		}
		if market.KeyOf(&ps[i]) == key {
			p := ps[i]
			c.after = &p
		} else if ps[i].Direction != posCopy.Direction {
			other = true
		}
	}
	switch {
	case c.after == nil && other:
		// A reduce-only order never turns a position over.
		return raw, fmt.Errorf("%w: %s %s %s turned to the other side after a reduce-only %s of %s", ErrReduceGrew, sym, posCopy.Direction, c.before, o.Side, qty)
	case c.after == nil && !listedEmpty(ps, key):
		// Missing from one answer is unknown, not closed.
		c.unknown = true
		why := "the read-back did not list the position"
		if sendErr != nil {
			why = fmt.Sprintf("%v, and %s", sendErr, why)
		}
		return raw, fmt.Errorf("%w: %s: the account is read again before any other order on %s", ErrUnknownOutcome, why, sym)
	}
	left := decimal.Zero
	if c.after != nil {
		left = c.after.Quantity
	}
	if sendErr != nil && !left.LessThan(c.before) && !left.GreaterThan(c.before) {
		c.unknown = true
		return raw, fmt.Errorf("%w: %v; the position read back is unchanged (%s): settled by the reads of the next %s", ErrUnknownOutcome, sendErr, left, settleAfter)
	}
	actual := fmt.Sprintf("quantity %s → %s read back", c.before, left)
	if sendErr != nil {
		actual = fmt.Sprintf("answer lost (%v); %s: the order filled", sendErr, actual)
		c.p.Base.Reason = joinNonEmpty(c.p.Base.Reason, "the answer was lost; settled by the read-back: "+actual)
	}
	if dp != nil {
		actual += fmt.Sprintf(" (%s predicted)", dp.QuantityAfter)
		pred.ActualQuantity = &left
		if c.after != nil {
			liq := c.after.LiquidationPrice
			pred.Actual = &liq
			actual += fmt.Sprintf(", liquidation %s (%s predicted)", liq, dp.Reduced().After)
		}
	}
	actEv.Actual = actual
	switch {
	case left.GreaterThan(c.before):
		return raw, fmt.Errorf("%w: %s %s → %s after a reduce-only %s of %s (order %d %s)", ErrReduceGrew, sym, c.before, left, o.Side, qty, got.ID, got.Status)
	case left.Equal(c.before):
		return raw, fmt.Errorf("%w: %s quantity still %s after a reduce-only %s of %s (order %d %s, filled %s)", ErrNotApplied, sym, left, o.Side, qty, got.ID, got.Status, got.FilledQuantity)
	}
	return raw, nil
}
