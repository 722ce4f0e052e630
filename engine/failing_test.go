package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/rules"
)

// A rule marked failing at run time is evaluated the slow way at the next
// tick, whose success clears the mark and says so once; the count of
// failing rules the position loop reads follows the marks.
func TestFailingRuleEvaluatesAgain(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h := newHarnessWith(t, Config{}, Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		rules.Rule{Name: "quiet", When: "liquidationDistance < 0.001", Cooldown: time.Minute, Actions: []rules.Action{{Kind: rules.CancelOrders}}},
		rules.Rule{Name: "other", When: "position.leverage > 1000", Cooldown: time.Minute, Actions: []rules.Action{{Kind: rules.CancelOrders}}})
	h.tick(0)
	r := h.e.eval.set.Rules[0]
	var env rules.Env
	for range 2 { // a second failure does not count twice
		if c, _ := h.e.eval.outcome(0, r, &env, "", false, errors.New("boom")); c != unhealthy {
			t.Fatalf("a run-time error: condition %v", c)
		}
	}
	if !h.e.eval.failing[0] || h.e.eval.nFailing != 1 {
		t.Fatalf("after a failure: failing %v, count %d", h.e.eval.failing, h.e.eval.nFailing)
	}
	h.tick(1)
	if h.e.eval.failing[0] || h.e.eval.nFailing != 0 {
		t.Fatalf("after a tick that evaluated it: failing %v, count %d", h.e.eval.failing, h.e.eval.nFailing)
	}
	if n := strings.Count(logs.String(), "rule evaluates again"); n != 1 {
		t.Errorf("said %d times that the rule evaluates again:\n%s", n, logs.String())
	}
}
