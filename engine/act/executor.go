// Package act runs the guard's mutating calls to the exchange. Its Executor
// owns their concurrency: each key's (a symbol's) calls run one job at a
// time, in the background, at most a bounded number of jobs at once, so a
// call that hangs on one symbol holds neither another symbol nor the loop
// that reads the exchange. The tick decides what to send; the executor
// sends it; the job's outcome comes back to the tick's goroutine through
// Collect, so the state it changes has one writer.
package act

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// Call is one mutating exchange call of a job.
type Call struct {
	// Name says the call in what InFlight reports: "cancel XBTC".
	Name string
	// Hold, when set, runs just before the call would be sent; a non-nil
	// error holds it back (it is not sent, and its Result says why). It
	// runs in the job's goroutine: it must be safe for that.
	Hold func() error
	// Do sends the call; ctx carries the call's own deadline, but for an
	// inline executor's (New), whose calls are in process and cannot hang.
	Do func(ctx context.Context) (json.RawMessage, error)
}

// Result is what became of one call of a job.
type Result struct {
	Resp json.RawMessage
	Err  error
	// Sent is false when Hold held the call back.
	Sent bool
}

// Job is the calls of one key, sent in order, and what to do with their
// results: Done runs on the goroutine that calls Collect, once every call
// has ended.
type Job struct {
	Key   string
	Calls []Call
	Done  func(ctx context.Context, results []Result)
}

// Flight is a call in flight, for /healthz and the status page.
type Flight struct {
	Key   string    `json:"symbol"`
	Call  string    `json:"call"`
	Since time.Time `json:"since"`
	// ended: the job has ended but its outcome is not collected yet; its
	// key stays busy until it is, so that nothing is decided on a symbol
	// whose last outcome is not known.
	ended bool
}

// Executor runs jobs. Its methods are safe for concurrent use.
type Executor struct {
	timeout time.Duration
	// inline runs each job in Submit's goroutine: the exchange is in the
	// same process (a backtest), where nothing can hang, and the order of
	// the calls is then the order of the jobs.
	inline bool
	slots  *fifo
	now    func() time.Time

	mu       sync.Mutex
	inFlight map[string]Flight
	finished []finished
	// spare is the list of finished jobs the last Collect emptied, kept
	// for the next one to fill.
	spare []finished
	// changed is closed when a job ends, and made again by the next
	// waiter (waitUntil): nil while none waits, so that a job nobody
	// waits for makes no channel.
	changed chan struct{}
	running int // jobs not ended
	wg      sync.WaitGroup
}

type finished struct {
	job     *Job
	results []Result
}

// New returns an executor that runs at most concurrency jobs at once, each
// call bounded by timeout. inline runs every job in Submit's goroutine,
// its calls without a deadline: they are in process (a backtest's
// simulated exchange), where nothing can hang, and a deadline would cost
// a timer a call to bound nothing. A nil clock is time.Now: it only dates
// InFlight.
func New(concurrency int, timeout time.Duration, inline bool, now func() time.Time) *Executor {
	if now == nil {
		now = time.Now
	}
	return &Executor{timeout: timeout, inline: inline, slots: newFIFO(concurrency), now: now,
		inFlight: make(map[string]Flight)}
}

// SetLimits changes the concurrency and the calls' timeout for the jobs
// submitted from now on (a reload).
func (x *Executor) SetLimits(concurrency int, timeout time.Duration) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.timeout = timeout
	x.slots.resize(concurrency)
}

// Busy reports whether a job of key is in flight, or has ended without
// being collected yet, and since when.
func (x *Executor) Busy(key string) (Flight, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	f, ok := x.inFlight[key]
	if !ok {
		return Flight{}, false
	}
	return f, true
}

// InFlight lists the calls in flight, oldest first.
func (x *Executor) InFlight() []Flight {
	x.mu.Lock()
	out := make([]Flight, 0, len(x.inFlight))
	for _, f := range x.inFlight {
		if !f.ended {
			out = append(out, f)
		}
	}
	x.mu.Unlock()
	slices.SortFunc(out, func(a, b Flight) int { return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Key, b.Key)) })
	return out
}

// Idle reports whether the executor holds no job: none running, none
// ended and not collected. Asked where Collect is called (never beside
// it), it says that the Done of every job submitted has returned.
func (x *Executor) Idle() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.inFlight) == 0
}

// Submit starts job and reports true, or reports false when a job of the
// same key is still in flight (the caller holds its actions back). The
// calls run with ctx's values but not its cancellation: a call in flight
// finishes, bounded by its timeout, even when the daemon is stopping.
func (x *Executor) Submit(ctx context.Context, job *Job) bool {
	x.mu.Lock()
	if _, busy := x.inFlight[job.Key]; busy {
		x.mu.Unlock()
		return false
	}
	f := Flight{Key: job.Key, Since: x.now()}
	if len(job.Calls) > 0 {
		f.Call = job.Calls[0].Name
	}
	x.inFlight[job.Key] = f
	timeout := x.timeout
	x.running++
	x.wg.Add(1)
	x.mu.Unlock()
	if _, dl := ctx.Deadline(); ctx.Done() != nil || dl {
		ctx = context.WithoutCancel(ctx) // one that never ends is kept as it is
	}
	turn := x.slots.enqueue() // in the order of Submit
	if x.inline {
		x.run(ctx, job, turn, timeout)
	} else {
		go x.run(ctx, job, turn, timeout)
	}
	return true
}

// run runs job, in flight under its key, once turn is granted: each call
// bounded by timeout, but an inline executor's (New).
func (x *Executor) run(ctx context.Context, job *Job, turn <-chan struct{}, timeout time.Duration) {
	defer x.wg.Done()
	<-turn
	results := make([]Result, len(job.Calls))
	for i, c := range job.Calls {
		x.mu.Lock()
		f := x.inFlight[job.Key]
		f.Call = c.Name
		x.inFlight[job.Key] = f
		x.mu.Unlock()
		if c.Hold != nil {
			if err := c.Hold(); err != nil {
				results[i].Err = err
				continue
			}
		}
		if x.inline {
			results[i].Resp, results[i].Err = c.Do(ctx)
		} else {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			results[i].Resp, results[i].Err = c.Do(cctx)
			cancel()
		}
		results[i].Sent = true
	}
	x.slots.release()
	x.mu.Lock()
	f := x.inFlight[job.Key]
	f.ended = true
	x.inFlight[job.Key] = f
	x.running--
	x.finished = append(x.finished, finished{job: job, results: results})
	if x.changed != nil {
		close(x.changed)
		x.changed = nil
	}
	x.mu.Unlock()
}

// Wait waits until no job is in flight, or for d at most, and reports
// whether none is.
func (x *Executor) Wait(d time.Duration) bool {
	return x.waitUntil(d, func() bool { return x.running == 0 })
}

// WaitKeys waits until none of keys' jobs is running, or for d at most,
// and reports whether none is. A tick waits for the jobs it submitted, not
// for an older job that hangs on another key: that one would make every
// tick wait its whole budget for as long as it hangs.
func (x *Executor) WaitKeys(d time.Duration, keys []string) bool {
	return x.waitUntil(d, func() bool {
		for _, k := range keys {
			if f, ok := x.inFlight[k]; ok && !f.ended {
				return false
			}
		}
		return true
	})
}

// waitUntil waits until idle, read under x.mu, holds, or for d at most,
// and reports whether it holds; it looks again whenever a job changes.
func (x *Executor) waitUntil(d time.Duration, idle func() bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		x.mu.Lock()
		ok := idle()
		if !ok && x.changed == nil {
			x.changed = make(chan struct{})
		}
		changed := x.changed
		x.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-t.C:
			return false
		}
	}
}

// Collect runs the Done of every job that ended since the last Collect, in
// the order they ended, on the caller's goroutine.
func (x *Executor) Collect(ctx context.Context) int {
	x.mu.Lock()
	done := x.finished
	if len(done) == 0 {
		x.mu.Unlock()
		return 0
	}
	x.finished, x.spare = x.spare, nil
	for _, f := range done {
		delete(x.inFlight, f.job.Key)
	}
	x.mu.Unlock()
	for _, f := range done {
		if f.job.Done != nil {
			f.job.Done(ctx, f.results)
		}
	}
	n := len(done)
	clear(done) // holds no job past its Done
	x.mu.Lock()
	if x.spare == nil {
		x.spare = done[:0]
	}
	x.mu.Unlock()
	return n
}

// Drain waits for every job in flight (each call is bounded by its
// timeout) and collects them: shutdown.
func (x *Executor) Drain(ctx context.Context) {
	x.wg.Wait()
	x.Collect(ctx)
}

// fifo is a counting semaphore that hands its slots out in the order they
// were asked for: with one slot, jobs run in the order they were submitted.
type fifo struct {
	mu      sync.Mutex
	size    int
	used    int
	waiters []chan struct{}
	// granted is closed: the answer to every ask granted at once.
	granted chan struct{}
}

func newFIFO(n int) *fifo {
	f := &fifo{size: max(n, 1), granted: make(chan struct{})}
	close(f.granted)
	return f
}

// enqueue asks for a slot; the channel is closed when it is granted.
func (f *fifo) enqueue() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.used < f.size && len(f.waiters) == 0 {
		f.used++
		return f.granted
	}
	c := make(chan struct{})
	f.waiters = append(f.waiters, c)
	return c
}

// release gives a slot back, to the first waiter if any.
func (f *fifo) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used--
	f.grant()
}

func (f *fifo) resize(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.size = max(n, 1)
	f.grant()
}

func (f *fifo) grant() {
	for f.used < f.size && len(f.waiters) > 0 {
		close(f.waiters[0])
		f.waiters = f.waiters[1:]
		f.used++
	}
}
