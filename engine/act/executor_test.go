package act

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// gate is a call that waits until released (or its deadline).
type gate struct {
	release chan struct{}
	started chan struct{}
}

func newGate() *gate { return &gate{release: make(chan struct{}), started: make(chan struct{}, 10)} }

func (g *gate) do(ctx context.Context) (json.RawMessage, error) {
	g.started <- struct{}{}
	select {
	case <-g.release:
		return json.RawMessage(`"ok"`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func waitStarted(t *testing.T, g *gate) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the call never started")
	}
}

// A job that hangs on one key holds neither another key's job nor the
// caller: Submit returns at once, the other job ends and is collected, and
// the hanging key refuses a second job until its first has ended.
func TestExecutorHangingKeyHoldsNothingElse(t *testing.T) {
	x := New(4, time.Minute, false, nil)
	hang, quick := newGate(), newGate()
	close(quick.release)
	var done []string
	var mu sync.Mutex
	job := func(key string, g *gate) *Job {
		return &Job{Key: key, Calls: []Call{{Name: "settings " + key, Do: g.do}}, Done: func(_ context.Context, rs []Result) {
			mu.Lock()
			defer mu.Unlock()
			if !rs[0].Sent {
				t.Errorf("%s not sent", key)
			}
			done = append(done, key)
		}}
	}
	ctx := context.Background()
	if !x.Submit(ctx, job("XBTC", hang)) {
		t.Fatal("first XBTC job refused")
	}
	waitStarted(t, hang)
	if !x.Submit(ctx, job("XETH", quick)) {
		t.Fatal("XETH job refused while XBTC hangs")
	}
	if x.Submit(ctx, job("XBTC", quick)) {
		t.Fatal("a second XBTC job was accepted while the first is in flight")
	}
	// A tick waits for its own jobs: XETH's ends while XBTC hangs.
	if !x.WaitKeys(5*time.Second, []string{"XETH"}) {
		t.Fatal("WaitKeys(XETH) waited for XBTC's hanging job")
	}
	if x.WaitKeys(50*time.Millisecond, []string{"XETH", "XBTC"}) {
		t.Fatal("WaitKeys(XETH, XBTC) reported idle with XBTC hanging")
	}
	if x.Wait(2 * time.Second) {
		t.Fatal("Wait reported idle with XBTC hanging")
	}
	if n := x.Collect(ctx); n != 1 || !slices.Equal(done, []string{"XETH"}) {
		t.Fatalf("collected %d: %v, want XETH alone", n, done)
	}
	f, busy := x.Busy("XBTC")
	if !busy || f.Call != "settings XBTC" {
		t.Fatalf("Busy(XBTC) = %+v, %t", f, busy)
	}
	if got := x.InFlight(); len(got) != 1 || got[0].Key != "XBTC" {
		t.Fatalf("InFlight = %+v", got)
	}
	close(hang.release)
	x.Drain(ctx)
	if !slices.Equal(done, []string{"XETH", "XBTC"}) {
		t.Fatalf("done = %v", done)
	}
	if _, busy := x.Busy("XBTC"); busy {
		t.Fatal("XBTC still busy after it ended")
	}
}

// A held call is not sent, and a job's calls run in order, each with its
// own deadline.
func TestExecutorHoldOrderAndTimeout(t *testing.T) {
	x := New(1, 50*time.Millisecond, false, nil)
	var order []string
	hold := errors.New("paused")
	var results []Result
	hang := newGate()
	job := &Job{Key: "XSOL", Calls: []Call{
		{Name: "cancel", Do: func(ctx context.Context) (json.RawMessage, error) { order = append(order, "cancel"); return nil, nil }},
		{Name: "settings", Hold: func() error { return hold }, Do: func(ctx context.Context) (json.RawMessage, error) {
			order = append(order, "settings")
			return nil, nil
		}},
		{Name: "slow", Do: hang.do},
	}, Done: func(_ context.Context, rs []Result) { results = rs }}
	x.Submit(context.Background(), job)
	if !x.Wait(5 * time.Second) {
		t.Fatal("the job did not end within its calls' deadlines")
	}
	x.Collect(context.Background())
	if !slices.Equal(order, []string{"cancel"}) {
		t.Fatalf("calls sent: %v, want cancel alone", order)
	}
	if len(results) != 3 || !results[0].Sent || results[1].Sent || !errors.Is(results[1].Err, hold) ||
		!results[2].Sent || !errors.Is(results[2].Err, context.DeadlineExceeded) {
		t.Fatalf("results = %+v", results)
	}
}

// Inline jobs run in Submit, in order, with the caller's values but
// neither its cancellation nor a deadline (nothing in process can hang);
// each job's Done runs once, at the Collect after it, with its own
// results.
func TestExecutorInline(t *testing.T) {
	x := New(4, time.Second, true, nil)
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	cancel()
	var got []string
	for i, name := range []string{"a", "b", "c"} {
		call := func(ctx context.Context) (json.RawMessage, error) {
			if _, ok := ctx.Deadline(); ok || ctx.Err() != nil || ctx.Value(key{}) != "v" {
				t.Errorf("call %s: deadline %v, err %v, value %v; want none, none, v", name, ok, ctx.Err(), ctx.Value(key{}))
			}
			return json.RawMessage(name), nil
		}
		done := func(_ context.Context, rs []Result) { got = append(got, name+"="+string(rs[0].Resp)) }
		if !x.Submit(parent, &Job{Key: name, Calls: []Call{{Name: name, Do: call}}, Done: done}) {
			t.Fatalf("job %s not submitted", name)
		}
		if len(x.InFlight()) != 0 {
			t.Fatal("an inline job is still in flight after Submit")
		}
		if _, busy := x.Busy(name); !busy {
			t.Fatalf("job %s is not busy before it is collected", name)
		}
		if i != 1 { // b is collected with c
			x.Collect(context.Background())
		}
	}
	if want := []string{"a=a", "b=b", "c=c"}; !slices.Equal(got, want) {
		t.Fatalf("collected %v, want %v", got, want)
	}
	if n := x.Collect(context.Background()); n != 0 {
		t.Fatalf("collected %d again", n)
	}
}

// With one slot, jobs start in the order they were submitted.
func TestExecutorFIFO(t *testing.T) {
	x := New(1, time.Minute, false, nil)
	first := newGate()
	var mu sync.Mutex
	var order []string
	rec := func(key string) *Job {
		return &Job{Key: key, Calls: []Call{{Name: key, Do: func(context.Context) (json.RawMessage, error) {
			mu.Lock()
			order = append(order, key)
			mu.Unlock()
			return nil, nil
		}}}}
	}
	ctx := context.Background()
	x.Submit(ctx, &Job{Key: "A", Calls: []Call{{Name: "A", Do: first.do}}})
	waitStarted(t, first)
	for _, k := range []string{"B", "C", "D", "E"} {
		x.Submit(ctx, rec(k))
	}
	close(first.release)
	if !x.Wait(5 * time.Second) {
		t.Fatal("jobs did not end")
	}
	if !slices.Equal(order, []string{"B", "C", "D", "E"}) {
		t.Fatalf("order = %v, want B C D E", order)
	}
}
