package act

import (
	"context"
	"encoding/json"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/rules"
)

// cancelOrders cancels the symbol's open orders: at most one call per
// symbol and tick, sent first (fewer open orders is never riskier). It is
// idempotent: a cancel repeated cancels nothing more.
type cancelOrders struct{}

// Name is the kind's name in the rules.
func (cancelOrders) Name() rules.ActionKind { return rules.CancelOrders }

// Spec is the kind's row of the rules' table.
func (cancelOrders) Spec() rules.KindSpec { return shipped(rules.CancelOrders) }

// Merge asks for the plan's cancel.
func (cancelOrders) Merge(pl *Plan, d *Due, _ *rules.Action, _ *rules.Evaluator, _ *rules.Env) {
	c := pl.Step(string(rules.CancelOrders), func() Step { return &cancelStep{} }).(*cancelStep)
	c.rules = pl.named(c.rules, d)
	d.Ask(c)
}

// cancelStep is a plan's cancel of its symbol's orders.
type cancelStep struct {
	rules []string
	tried bool
	p     *Pending
	err   error
	ev    journal.ActionEvent // the cancel as the tick's report shows it
	ps    [1]*Pending         // what Prepare returns
}

// recycle empties the cancel for its plan's next use (Plan.Reset).
func (c *cancelStep) recycle() { *c = cancelStep{} }

// Order sends the cancel first.
func (*cancelStep) Order() int { return 10 }

// Prepare readies the cancel, once per symbol and tick.
func (c *cancelStep) Prepare(ctx context.Context, h Host, pl *Plan) ([]*Pending, error) {
	sym, pos := pl.Sym.Name, pl.Pos
	if !h.Once(string(rules.CancelOrders), sym) {
		return nil, nil
	}
	c.tried = true
	name := string(rules.CancelOrders)
	base := journal.Record{Time: h.Now(), Type: "action", Action: name, Symbol: sym, Position: pos.ID, Rules: c.rules}
	c.ev = journal.ActionEvent{Symbol: sym, Action: name, Rules: c.rules}
	var desc string
	var do func(context.Context) (json.RawMessage, error)
	if !h.Tally() { // a tally counts the call (c.ev) and says or sends nothing of it
		x := h.Exchange()
		desc, do = name+" "+sym, func(ctx context.Context) (json.RawMessage, error) { return x.CancelOrders(ctx, sym) }
	}
	c.p, c.err = h.Prepare(ctx, base, desc, "", &c.ev, do)
	if c.p == nil {
		return nil, c.err
	}
	c.ps[0] = c.p
	return c.ps[:], nil
}

// Done counts the cancel's outcome on its symbol.
func (c *cancelStep) Done(ctx context.Context, h Host, pl *Plan) error {
	if c.p != nil {
		c.err = h.Finish(c.p)
	}
	// A failure counts from when it is known: a call that ran past its
	// tick is collected by a later one.
	if c.tried {
		h.Outcome(ctx, pl.Sym.Name, c.err)
	}
	return c.err
}
