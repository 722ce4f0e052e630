package dispatch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/shopspring/decimal"
)

// stepHost is what a plan's steps get of the dispatcher (act.Host): one
// for the tick that decides them (rep its report, snap its snapshot, once
// what it did once per symbol), one for the goroutine that collects what
// they sent (rep the collecting tick's report).
type stepHost struct {
	d    *Dispatcher
	now  time.Time
	snap *market.Snapshot
	rep  *journal.Report
	once map[onceKey]bool
}

// onceKey is what a tick does once per symbol (stepHost.Once).
type onceKey struct{ what, symbol string }

var _ act.Host = (*stepHost)(nil)

// Now is the time of the tick that decided the plan.
func (h *stepHost) Now() time.Time { return h.now }

// Tally: a dry run whose actions are only counted (Options.Tally).
func (h *stepHost) Tally() bool { return h.d.tally }

// DryRun: nothing is sent (engine.dry_run).
func (h *stepHost) DryRun() bool { return h.d.cfg.DryRun }

// Logger is the dispatcher's.
func (h *stepHost) Logger() *slog.Logger { return h.d.log }

// Emit says ev in the report at hand.
func (h *stepHost) Emit(ctx context.Context, ev journal.Event) { h.d.emit(ctx, h.rep, ev) }

// Wants reports the outputs an event at level reaches beside the report
// and the audit log.
func (h *stepHost) Wants(ctx context.Context, level slog.Level) journal.Outputs {
	return h.d.jr.Wants(ctx, level)
}

// Note says ev outside any report.
func (h *stepHost) Note(ctx context.Context, ev journal.Event) { h.d.emit(ctx, nil, ev) }

// Prepare passes a call through the AtDecide stages.
func (h *stepHost) Prepare(ctx context.Context, base journal.Record, desc, effect string, ev *journal.ActionEvent, do func(context.Context) (json.RawMessage, error)) (*act.Pending, error) {
	return h.d.prepare(ctx, h.rep, base, desc, effect, ev, do)
}

// Finish takes in a call that ended.
func (h *stepHost) Finish(p *act.Pending) error { return h.d.finish(h.rep, p) }

// Outcome counts a call's outcome for its symbol's backoff, from when it
// is known: a call that ran past its tick is collected by a later one.
func (h *stepHost) Outcome(ctx context.Context, symbol string, err error) {
	h.d.symbolOutcome(ctx, h.d.at, symbol, err)
}

// Model is the tick's margin model.
func (h *stepHost) Model() *act.Model { return h.d.model.Model(h.snap) }

// Moved moves the tick's model on when the tick that decided at is the
// current one.
func (h *stepHost) Moved(at time.Time, next margin.Account) { h.d.model.Moved(at, next) }

// ReadBack says a liquidation price read back more than a basis point of
// the index from the model's; a settings call's also marks the model's fit
// with it.
func (h *stepHost) ReadBack(ctx context.Context, at time.Time, symbol string, predicted, got, index decimal.Decimal, settings bool) {
	d := h.d
	if got.Sub(predicted).Abs().GreaterThan(index.Mul(decimal.New(1, -4))) {
		d.emit(ctx, nil, mismatchEvent(at, symbol, predicted, got))
		if settings {
			d.model.ReadBack(symbol, fmt.Sprintf("read back liquidation %s, %s predicted", got, predicted))
		}
		return
	}
	if settings {
		d.model.ReadBack(symbol, "")
	}
}

// Changed marks the state to be saved.
func (h *stepHost) Changed() { h.d.out.Changed() }

// Exchange is the venue's idempotent calls.
func (h *stepHost) Exchange() act.Exchange { return h.d.act }

// Placer is the venue's orders, nil when it places none.
func (h *stepHost) Placer() act.OrderPlacer { return h.d.placer }

// Positions reads the account's positions through the dispatcher's reader.
func (h *stepHost) Positions(ctx context.Context) ([]exchange.Position, error) {
	return h.d.reader.Positions(ctx)
}

// Settled drops the intent of an order settled after its call ended,
// after the next save.
func (h *stepHost) Settled(id string) { h.d.lead.Ended(id) }

// ListingLag is engine.listing_lag.
func (h *stepHost) ListingLag() time.Duration { return h.d.cfg.ListingLag }

// FirstHarm reports whether no harmful action of the plan's rules was
// notified yet in their current firing, and marks it so.
func (h *stepHost) FirstHarm(pl *act.Plan) bool {
	first := false
	for _, d := range pl.Due {
		st := d.St
		if st.HarmNotedAt.Before(st.FiredAt) || st.HarmNotedAt.IsZero() {
			first = true
			st.HarmNotedAt = h.now
			h.d.out.Changed()
		}
	}
	return first
}

// Once reports whether what is asked on symbol for the first time in the
// tick.
func (h *stepHost) Once(what, symbol string) bool {
	k := onceKey{what, symbol}
	if h.once[k] {
		return false
	}
	h.once[k] = true
	return true
}
