package backtest

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// The unguarded run does not depend on the guarded one: on a machine with
// more than one core it runs on its own goroutine, a batch of its ticks
// behind the guarded run, and what the report compares between the two
// (the equity and liquidation price points, and the order of the
// warnings) is put together as each batch comes back, in tick order. The
// result is the same, byte for byte, as running the two one after the
// other at every tick (TestConcurrentRunsMatchSerial). A step is only
// 20–40 µs of work, so the runs hand over batches, not ticks: a handover
// per tick cost more than it saved. With a baseline run (three runs and a
// comparison of decisions at every tick) or a single core, the runs take
// turns at every tick as before.

// batchOps is how many of the unguarded run's ticks and position changes
// make one batch.
const batchOps = 256

// laneOp is one thing the unguarded run does, in order: a position put or
// a tick. The driver fills the inputs and what the guarded run gave at the
// same point; the run's goroutine fills the rest.
type laneOp struct {
	t time.Time
	// A tick: the step's prices (nil: unchanged); sample: the report
	// samples both runs' equity and liquidation prices at this tick.
	tick   bool
	moved  bool // the step has prices (prices holds them; it may be empty)
	prices map[string]decimal.Decimal
	sample bool
	// A put: the position and whether it keeps the run's settings.
	put          *putOp
	pre, guarded []string // warnings before the op, and the guarded run's at it
	// Filled by the guarded run at a sample: its equity, the index prices
	// and its liquidation prices.
	// (of the series' indexes and symbols, in order: addSample).
	gEquity    float64
	ixPrices   []decimal.Decimal
	gLiq, uLiq []decimal.Decimal
	// Filled by the unguarded run.
	uEquity   float64
	unguarded []string // its warnings at this op
}

type putOp struct {
	name         string
	spec         sim.PositionSpec
	keepSettings bool
}

// runner runs one lane on its own goroutine over batches of ops.
type runner struct {
	lane *lane
	// syms are the series' symbols, whose liquidation prices a sample
	// reads.
	syms   []string
	todo   chan []laneOp
	done   chan []laneOp
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// concurrent reports whether the unguarded run gets its own goroutine.
func (r *replay) concurrent() bool {
	return !r.opt.serial && r.opt.Baseline == nil && runtime.GOMAXPROCS(0) > 1
}

// startRunner starts the unguarded run's goroutine.
func (r *replay) startRunner(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	w := &runner{lane: r.unguarded, syms: r.sampleSymbols, todo: make(chan []laneOp, 2), done: make(chan []laneOp, 1), cancel: cancel}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer close(w.done)
		for batch := range w.todo {
			for i := range batch {
				if ctx.Err() != nil {
					break // stopping: the rest is not merged
				}
				w.apply(ctx, &batch[i])
			}
			w.done <- batch
		}
	}()
	r.w = w
	r.batch = r.newBatch()
}

// apply does one op on the unguarded run.
func (w *runner) apply(ctx context.Context, op *laneOp) {
	l := w.lane
	if op.put != nil {
		l.clock.t = op.t
		if err := l.putPosition(op.put.name, op.put.spec, op.put.keepSettings); err != nil {
			op.unguarded = append(op.unguarded, fmt.Sprintf("%s: %v", op.t.Format(time.RFC3339), err))
		}
		return
	}
	var prices map[string]decimal.Decimal
	if op.moved {
		prices = op.prices
	}
	if s := l.tick(ctx, op.t, prices); s != "" {
		op.unguarded = append(op.unguarded, s)
	}
	if op.sample {
		op.uEquity = equityOf(l.ex)
		op.uLiq = l.ex.LiquidationPricesOf(w.syms, nil)
	}
}

// newBatch is an empty batch, from a merged one when there is one (its
// price maps reused).
func (r *replay) newBatch() []laneOp {
	if n := len(r.spare); n > 0 {
		b := r.spare[n-1]
		r.spare = r.spare[:n-1]
		return b[:0]
	}
	return make([]laneOp, 0, batchOps)
}

// addOp appends an op to the batch, taking the warnings said since the
// last one, and hands the batch over when it is full. The op is valid
// until the next addOp.
func (r *replay) addOp(ctx context.Context) *laneOp {
	if len(r.batch) == batchOps {
		r.handOver(ctx)
	}
	b := r.batch[:len(r.batch)+1]
	op := &b[len(b)-1]
	*op = laneOp{t: r.clock.t, prices: op.prices, pre: r.pending} // its map from an earlier batch, for tickAll to recycle
	r.pending = nil
	r.batch = b
	return op
}

// handOver sends the batch to the runner, merging what comes back while
// it waits.
func (r *replay) handOver(ctx context.Context) {
	for {
		select {
		case r.w.todo <- r.batch:
			r.batch = r.newBatch()
			return
		case b := <-r.w.done:
			r.merge(b)
		case <-ctx.Done():
			return // Run sees it at the next step
		}
	}
}

// drain hands over the last batch, waits for the runner to end and merges
// everything, then says the warnings left.
func (r *replay) drain(ctx context.Context) {
	if r.w == nil {
		return
	}
	if len(r.batch) > 0 {
		r.handOver(ctx)
	}
	close(r.w.todo)
	for b := range r.w.done {
		r.merge(b)
	}
	r.w.wg.Wait()
	r.w.cancel()
	r.w = nil
	for _, s := range r.pending {
		r.addWarning(s)
	}
	r.pending = nil
}

// stopRunner stops the runner without merging (Run failed or was
// cancelled); nothing when it was drained.
func (r *replay) stopRunner() {
	if r.w == nil {
		return
	}
	r.w.cancel()
	if r.batch != nil {
		r.batch = nil
	}
	close(r.w.todo)
	for range r.w.done {
	}
	r.w.wg.Wait()
	r.w = nil
}

// merge puts a batch the runner ran into the result, in order.
func (r *replay) merge(b []laneOp) {
	for i := range b {
		op := &b[i]
		for _, s := range op.pre {
			r.addWarning(s)
		}
		for _, s := range op.guarded {
			r.addWarning(s)
		}
		for _, s := range op.unguarded {
			r.addWarning(s)
		}
		if op.sample {
			r.addSample(op.t, op.gEquity, op.uEquity, op.ixPrices, op.gLiq, op.uLiq)
		}
		// Drop what the op holds but its price map, reused.
		*op = laneOp{prices: op.prices}
	}
	r.spare = append(r.spare, b)
}

// prefetcher reads a source ahead on its own goroutine, a batch of steps
// at a time, when the runs are concurrent: parsing the data (CSV) is then
// off the guarded run's goroutine. Source's steps are the caller's, so
// reading ahead changes nothing.
type prefetcher struct {
	src  Source
	ch   chan []stepResult
	stop chan struct{}
	wg   sync.WaitGroup
	cur  []stepResult
	i    int
	done bool
}

type stepResult struct {
	st  Step
	err error
}

// prefetchSteps is how many steps the prefetcher reads in one batch.
const prefetchSteps = 256

func newPrefetcher(src Source) *prefetcher {
	p := &prefetcher{src: src, ch: make(chan []stepResult, 2), stop: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(p.ch)
		for {
			batch := make([]stepResult, 0, prefetchSteps)
			var err error
			for len(batch) < prefetchSteps && err == nil {
				var st Step
				st, err = src.Next()
				batch = append(batch, stepResult{st, err})
			}
			select {
			case p.ch <- batch:
			case <-p.stop:
				return
			}
			if err != nil {
				return // io.EOF or the error, handed over last
			}
		}
	}()
	return p
}

// Next returns the next step, as the source gave it.
func (p *prefetcher) Next() (Step, error) {
	for p.i == len(p.cur) {
		if p.done {
			return Step{}, io.EOF
		}
		b, ok := <-p.ch
		if !ok {
			p.done = true
			return Step{}, io.EOF
		}
		p.cur, p.i = b, 0
	}
	r := p.cur[p.i]
	p.cur[p.i] = stepResult{}
	p.i++
	return r.st, r.err
}

// close stops the reading ahead and waits for it; the source is the
// caller's again.
func (p *prefetcher) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
}
