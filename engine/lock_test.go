package engine

import (
	"context"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

// blockingReader holds every positions read until release is closed.
type blockingReader struct {
	*fakeExchange
	entered chan struct{}
	release chan struct{}
}

func (b *blockingReader) Positions(ctx context.Context) ([]exchange.Position, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	select {
	case <-b.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return b.fakeExchange.Positions(ctx)
}

// A tick held by a read holds no lock that a status query or a reload
// takes: LastSuccess, Active, Rules and Update answer at once, and the
// reload applies as the tick ends.
func TestStatusAndReloadDoNotWaitForAHeldRead(t *testing.T) {
	t.Parallel()
	fx := newFake()
	br := &blockingReader{fakeExchange: fx, entered: make(chan struct{}, 1), release: make(chan struct{})}
	set := &rules.Set{Rules: []*rules.Rule{rule(t, overMax)}}
	e, err := New(Config{}, set, Deps{Reader: br, Actuator: fx})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Tick(context.Background(), at(0))
		done <- err
	}()
	select {
	case <-br.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the tick did not start its read")
	}

	answered := make(chan struct{})
	changed := rules.Rule{Name: "any-leverage", When: "position.leverage >= 1"}
	newSet := &rules.Set{Rules: []*rules.Rule{rule(t, changed)}}
	go func() {
		e.LastSuccess()
		e.Active()
		e.Update(at(0), newSet)
		if got := e.Rules(); got != newSet {
			t.Errorf("Rules() during the tick = %p, want the set just loaded %p", got, newSet)
		}
		close(answered)
	}()
	select {
	case <-answered:
	case <-time.After(2 * time.Second):
		t.Fatal("LastSuccess, Active, Update or Rules waited for the tick's read")
	}

	close(br.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The tick that was running evaluated the old set; the reload applied
	// as it ended, so the next tick runs the new one.
	rep, err := e.Tick(context.Background(), at(1))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range rep.Transitions {
		got = append(got, tr.Rule)
	}
	if len(got) != 2 || got[0] != "any-leverage" || got[1] != "any-leverage" {
		t.Errorf("transitions after the reload: %v, want any-leverage firing on both positions", got)
	}
	if e.LastSuccess() != at(1) {
		t.Errorf("LastSuccess = %v, want %v", e.LastSuccess(), at(1))
	}
}
