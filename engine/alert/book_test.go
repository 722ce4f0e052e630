package alert

import (
	"slices"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/market"
)

func TestBook(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	b := NewBook[int]()
	long := market.Key{ID: "1_1", Dir: "LONG"}
	// State saved under the id alone is adopted by the position's key.
	legacy := b.Ensure(market.Key{ID: "1_1"}, "XBTC", 1)
	legacy.Rules[0] = RuleState{State: Firing, FiredAt: t0}
	e := b.Ensure(long, "XBTC", 2)
	if e != legacy || e.Key != long || b.Get(market.Key{ID: "1_1"}) != nil || len(e.Rules) != 2 || e.Rules[0].State != Firing {
		t.Fatalf("legacy state not adopted: %+v", e)
	}
	short := b.Ensure(market.Key{ID: "1_1", Dir: "SHORT"}, "XBTC", 2)
	short.Rules[1] = RuleState{State: Pending, ActiveAt: t0}
	got := b.Alerts([]string{"r1", "r2"}, func(s State) bool { return s != Inactive })
	if len(got) != 2 || got[0].Rule != "r1" || got[0].Since != t0 || got[1].Rule != "r2" || got[1].State != Pending {
		t.Fatalf("Alerts = %+v", got)
	}
	if c := b.Counts([]string{"r1", "r2"}); c["r1"][Firing] != 1 || c["r1"][Inactive] != 1 || c["r2"][Pending] != 1 {
		t.Fatalf("Counts = r1 %v r2 %v", *c["r1"], *c["r2"])
	}
	// A reload: r2 is kept first, r1 dropped, a new rule added.
	b.Remap([]int{1, -1})
	if e.Rules[0] != (RuleState{}) || short.Rules[0].State != Pending || len(short.Rules) != 2 || short.Rules[1] != (RuleState{}) {
		t.Fatalf("after Remap: %+v / %+v", e.Rules, short.Rules)
	}
	b.Forget(long)
	if !e.Dropped || b.Get(long) != nil || b.Len() != 1 {
		t.Fatalf("after Forget: dropped %t, len %d", e.Dropped, b.Len())
	}
}

// A list Alerts returned is the caller's (Status shows it until the next
// one): later calls, on states changed meanwhile, leave it as it was.
func TestAlertsListIsTheCallers(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	names := []string{"r1", "r2"}
	b := NewBook[int]()
	a := b.Ensure(market.Key{ID: "1_1", Dir: "LONG"}, "XBTC", 2)
	c := b.Ensure(market.Key{ID: "1_2", Dir: "LONG"}, "XETH", 2)
	a.Rules[0] = RuleState{State: Firing, FiredAt: t0}
	c.Rules[1] = RuleState{State: Pending, ActiveAt: t0}
	active := func(s State) bool { return s != Inactive }
	first := b.Alerts(names, active)
	want := []Alert{{Symbol: "XBTC", Rule: "r1", State: Firing, Since: t0}, {Symbol: "XETH", Rule: "r2", State: Pending, Since: t0}}
	if !slices.Equal(first, want) {
		t.Fatalf("Alerts = %+v, want %+v", first, want)
	}
	a.Rules[0], a.Rules[1] = RuleState{}, RuleState{State: NoData}
	c.Rules[0] = RuleState{State: Pending, ActiveAt: t0.Add(time.Minute)}
	second := b.Alerts(names, active)
	if !slices.Equal(first, want) {
		t.Errorf("the first list changed under a second call: %+v, want %+v", first, want)
	}
	want2 := []Alert{{Symbol: "XBTC", Rule: "r2", State: NoData}, {Symbol: "XETH", Rule: "r1", State: Pending, Since: t0.Add(time.Minute)}, {Symbol: "XETH", Rule: "r2", State: Pending, Since: t0}}
	if !slices.Equal(second, want2) {
		t.Errorf("second Alerts = %+v, want %+v", second, want2)
	}
	if third := b.Alerts(names, func(s State) bool { return s == Firing }); third != nil || !slices.Equal(second, want2) {
		t.Errorf("third Alerts = %+v, and the second list became %+v", third, second)
	}
}
