package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/control"
)

// handingLead is a Leadership that can be handing its account over
// (package ha's Seat when the accounts are spread anew): MayAct is false
// then, HandingOver true, and the term is still its own.
type handingLead struct {
	fakeLead
	handing bool
}

func (h *handingLead) HandingOver() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.handing
}

func (h *handingLead) MayAct(now time.Time) (bool, string) {
	h.mu.Lock()
	handing := h.handing
	h.mu.Unlock()
	if handing {
		return false, "handing account default over"
	}
	return h.fakeLead.MayAct(now)
}

// A leader handing its account over (it starts no call: ha's
// TestHandOverStopsBeforeResign) still writes what changes in its state
// meanwhile (a pause made on it before the new leader is elected), so the
// next leader honours it; a leader whose lease lapsed writes nothing
// (etcd may be away).
func TestHandOverStillSavesState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		handing   bool
		wantSaved bool
	}{
		{"handing over", true, true},
		{"lease lapsed", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lead := &handingLead{fakeLead: fakeLead{term: 7}}
			shared := &fakeShared{}
			e, ex, _ := haEngine(t, lead, shared)
			ctx := context.Background()
			if _, err := e.Tick(ctx, time.Now()); err != nil {
				t.Fatal(err)
			}
			calls := settingsCalls(ex)
			if calls != 1 {
				t.Fatalf("%d settings calls as leader, want 1", calls)
			}
			lead.mu.Lock()
			if tc.handing {
				lead.handing = true
			} else {
				lead.failFrom = 1
			}
			lead.mu.Unlock()
			now := time.Now()
			if _, err := e.Control().Pause(ctx, now, control.Pause{Symbol: "XBTC", CreatedBy: "ops", AllowUnknown: true}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Tick(ctx, now.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			parts, _ := shared.LoadState(ctx)
			saved := strings.Contains(string(parts["pauses"]), "XBTC")
			if saved != tc.wantSaved {
				t.Errorf("the pause in the shared store: %v (%s), want %v", saved, parts["pauses"], tc.wantSaved)
			}
		})
	}
}
