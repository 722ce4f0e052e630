package control

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/rules"
)

// fakeGuard knows one rule, one listed symbol and one firing alert, and
// records what the service says, saves and counts.
type fakeGuard struct {
	events  []journal.Event
	saves   int
	gauges  [2]int
	standby error
}

func (g *fakeGuard) Rules() *rules.Set {
	return &rules.Set{Rules: []*rules.Rule{{Name: "near-liquidation"}}}
}

func (g *fakeGuard) Active() []alert.Alert {
	return []alert.Alert{{Rule: "near-liquidation", Symbol: "XBTC"}}
}

func (g *fakeGuard) Emit(_ context.Context, _ *journal.Report, ev journal.Event) {
	g.events = append(g.events, ev)
}

func (g *fakeGuard) Control(silences, pauses int) { g.gauges = [2]int{silences, pauses} }

func (g *fakeGuard) OnStandby(time.Time) error { return g.standby }

func newService(t *testing.T) (*Service, *fakeGuard) {
	t.Helper()
	g := new(fakeGuard)
	c, err := NewService(Options{Guard: g, Symbols: func() []string { return []string{"XBTC"} }, Emitter: g,
		Save: func() { g.saves++ }, Gauges: g, Standby: g})
	if err != nil {
		t.Fatal(err)
	}
	return c, g
}

// A change is checked, spelt as the guard spells it, said once, counted and
// saved; a change on a standby is refused before anything is kept.
func TestServiceSaysCountsAndSaves(t *testing.T) {
	t.Parallel()
	ctx, now := context.Background(), time.Date(2025, 3, 14, 9, 0, 0, 0, time.UTC)
	c, g := newService(t)

	p, err := c.Pause(ctx, now, Pause{Symbol: "xbtc", CreatedBy: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Symbol != "XBTC" {
		t.Errorf("pause symbol %q, want XBTC (the guard's spelling)", p.Symbol)
	}
	if len(g.events) != 1 || g.events[0].Audit.Type != "pause" || g.events[0].Audit.To != "paused" || g.events[0].Note == nil {
		t.Errorf("events = %+v, want one pause audited and notified", g.events)
	}
	if got, want := g.gauges, [2]int{0, 1}; got != want || g.saves != 1 {
		t.Errorf("gauges %v saves %d, want %v and 1", got, g.saves, want)
	}

	if _, err := c.Ack(ctx, now, "near-liquidation", "XETH", "ops", "", time.Time{}); !errors.Is(err, ErrNotActive) {
		t.Errorf("ack of an inactive alert: %v, want ErrNotActive", err)
	}
	if _, err := c.Ack(ctx, now, "near-liquidaton", "XBTC", "ops", "", time.Time{}); !errors.Is(err, ErrUnknownName) ||
		!strings.Contains(err.Error(), "did you mean near-liquidation?") {
		t.Errorf("ack of a misspelt rule: %v, want ErrUnknownName with a did-you-mean", err)
	}
	if _, err := c.Ack(ctx, now, "near-liquidation", "XBTC", "ops", "", time.Time{}); err != nil {
		t.Errorf("ack of the firing alert: %v", err)
	}

	g.standby = errors.New("standby")
	if _, err := c.Resume(ctx, now, "", "", "ops"); err != g.standby {
		t.Errorf("resume on a standby: %v, want its refusal", err)
	}
	if len(c.Pauses(now)) != 1 {
		t.Error("a refused resume ended the pause")
	}
	g.standby = nil
	if _, err := c.Resume(ctx, now, "", "", "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, now, "", "", "ops"); !errors.Is(err, ErrNotFound) {
		t.Errorf("resume without a pause: %v, want ErrNotFound", err)
	}
}
