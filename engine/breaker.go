package engine

import "time"

// budgetWindow is the span over which mutating calls are counted.
const budgetWindow = time.Minute

// breakerState is the global action budget: the times of the mutating calls
// of the last minute and, when the budget was exceeded, until when the
// circuit breaker stays open.
type breakerState struct {
	OpenUntil time.Time   `json:"openUntil,omitzero"`
	Sent      []time.Time `json:"sent,omitempty"`
}

// breakerVerdict is what the breaker decided for one mutating call.
type breakerVerdict struct {
	allow  bool
	opened bool // this call opened the breaker
	closed bool // the breaker had been open and reset before this call
}

// take asks the budget for one mutating call at now. max calls are allowed
// per minute; the call past the budget opens the breaker for reset.
func (b *breakerState) take(now time.Time, max int, reset time.Duration) breakerVerdict {
	var v breakerVerdict
	if !b.OpenUntil.IsZero() {
		if now.Before(b.OpenUntil) {
			return v
		}
		b.OpenUntil = time.Time{}
		b.Sent = nil
		v.closed = true
	}
	b.prune(now)
	if len(b.Sent) >= max {
		b.OpenUntil = now.Add(reset)
		v.opened = true
		return v
	}
	b.Sent = append(b.Sent, now)
	v.allow = true
	return v
}

// open reports whether the breaker is open at now.
func (b *breakerState) open(now time.Time) bool {
	return !b.OpenUntil.IsZero() && now.Before(b.OpenUntil)
}

func (b *breakerState) prune(now time.Time) {
	i := 0
	for i < len(b.Sent) && now.Sub(b.Sent[i]) >= budgetWindow {
		i++
	}
	b.Sent = append(b.Sent[:0], b.Sent[i:]...)
}

// refund gives back the budget a call taken at t did not use: it failed,
// so it changed nothing on the exchange.
func (b *breakerState) refund(t time.Time) {
	for i := len(b.Sent) - 1; i >= 0; i-- {
		if b.Sent[i].Equal(t) {
			b.Sent = append(b.Sent[:i], b.Sent[i+1:]...)
			return
		}
	}
}
