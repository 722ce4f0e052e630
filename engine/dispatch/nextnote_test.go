package dispatch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/rules"
)

// What a due rule's attempt says in the status's next text, by what
// became of it.
func TestNextNote(t *testing.T) {
	t.Parallel()
	notify := []rules.Action{{Kind: rules.Notify}}
	for _, tc := range []struct {
		name    string
		due     act.Due
		refused []error
		want    string
	}{
		{"sent", act.Due{Asked: []act.Step{&act.SettingsStep{}}}, nil, ""},
		{"notify only", act.Due{Notify: notify}, nil, "notified"},
		{"refused", act.Due{}, []error{fmt.Errorf("%w: leverage 3 not allowed", act.ErrRefused)}, "refused: leverage 3 not allowed"},
		{"outcome unknown", act.Due{Err: act.ErrUnknownOutcome}, nil, "held: outcome unknown"},
		{"held with its text", act.Due{Err: fmt.Errorf("%w: waits: order 7 has an unknown outcome", act.ErrHeld)}, nil, "held: waits: order 7 has an unknown outcome"},
		{"paused", act.Due{Err: fmt.Errorf("%w by ops", control.ErrPaused)}, nil, "paused: nothing sent"},
		{"in flight", act.Due{Err: errInFlight}, nil, "waits: a call on the symbol is still in flight"},
		{"backing off", act.Due{Err: errBackingOff}, nil, "held: the symbol backs off after failed calls"},
		{"breaker", act.Due{Err: ErrBreakerOpen}, nil, "skipped: circuit breaker open: action budget exceeded"},
		{"failed", act.Due{Err: errors.Join(errors.New("status 503"), errors.New("timeout"))}, nil, "failed: status 503; timeout; tried again at the next tick"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextNote(&tc.due, tc.refused); got != tc.want {
				t.Errorf("nextNote = %q, want %q", got, tc.want)
			}
		})
	}
}
