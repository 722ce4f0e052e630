package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
)

// An answer that is empty every third tick does not make the positions
// "closed": their states and cooldowns stay, and no action repeats.
func TestEmptyAnswerNowAndThenKeepsCooldowns(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Interval: 2 * time.Second}, overMax) // cooldown 5m
	full := h.fx.positions
	var reports []*TickReport
	for i := range 16 {
		h.fx.mu.Lock()
		if i%3 == 2 {
			h.fx.positions = nil
		} else {
			h.fx.positions = full
		}
		h.fx.mu.Unlock()
		reports = append(reports, h.tick(2*i))
		h.fx.mu.Lock()
		if i%3 != 2 {
			full = h.fx.positions // keep what the exchange applied
		}
		h.fx.mu.Unlock()
	}
	if settings, _ := h.fx.calls(); len(settings) != 1 {
		t.Errorf("settings calls over 30 s with an empty answer every third tick = %v, want 1 (the cooldown holds)", settings)
	}
	for _, rep := range reports {
		for _, tr := range rep.Transitions {
			if strings.HasPrefix(tr.Reason, "position") {
				t.Errorf("a position missing from one answer was forgotten: %+v", tr)
			}
		}
	}
}

// A position missing longer than its grace (the longest cooldown of the
// rules that acted on it) is forgotten, saying so.
func TestMissingPositionForgottenAfterGrace(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Interval: 2 * time.Second}, overMax)
	h.tick(0) // fires and acts on XBTC
	h.fx.mu.Lock()
	h.fx.positions = h.fx.positions[1:]
	h.fx.mu.Unlock()
	h.tick(60)
	if h.e.eval.book.Get(market.Key{ID: "1_1", Dir: "LONG"}) == nil {
		t.Fatal("XBTC forgotten after a minute missing, within the 5 m cooldown")
	}
	if rep := h.tick(301); len(rep.Transitions) != 0 {
		t.Errorf("forgotten 4 m after it went missing: %+v", rep.Transitions)
	}
	rep := h.tick(361)
	if len(rep.Transitions) != 1 || rep.Transitions[0].Reason != "position not listed for 5m1s" {
		t.Errorf("transitions after the grace: %+v", rep.Transitions)
	}
}

// A hedge-mode long and short on one symbol share the spec's position id:
// each keeps its own rule state, so the short fires.
func TestHedgeModePositionsKeepApartStates(t *testing.T) {
	t.Parallel()
	shortOnly := rules.Rule{Name: "short-side", When: "position.side < 0", For: 2 * time.Second}
	h := newHarness(t, Config{}, shortOnly)
	h.fx.mu.Lock()
	short := position(1, exchange.Short, 25, true, "1", "100000", "104000")
	h.fx.positions = append(h.fx.positions, short) // same id "1_1" as the XBTC long
	h.fx.mu.Unlock()
	h.tick(0)
	rep := h.tick(2)
	var fired bool
	for _, tr := range rep.Transitions {
		fired = fired || (tr.Rule == "short-side" && tr.To == alert.Firing)
	}
	if !fired {
		t.Errorf("the short did not fire beside the long of the same id: %+v", rep.Transitions)
	}
	if h.e.eval.book.Get(market.Key{ID: "1_1", Dir: "SHORT"}) == nil {
		t.Errorf("no state for the short: %v", h.e.eval.book.Alerts(h.e.eval.names, func(alert.State) bool { return true }))
	}
}
