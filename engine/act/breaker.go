package act

import (
	"slices"
	"time"
)

// budgetWindow is the span over which mutating calls are counted.
const budgetWindow = time.Minute

// Breaker is the global action budget: the times of the mutating calls
// of the last minute and, when the budget was exceeded, until when the
// circuit breaker stays open.
type Breaker struct {
	OpenUntil time.Time   `json:"openUntil,omitzero"`
	Sent      []time.Time `json:"sent,omitempty"`
}

// Verdict is what the breaker decided for one mutating call.
type Verdict struct {
	Allow  bool
	Opened bool // this call opened the breaker
	Closed bool // the breaker had been open and reset before this call
}

// Take asks the budget for one mutating call at now. max calls are allowed
// per minute; the call past the budget opens the breaker for reset.
func (b *Breaker) Take(now time.Time, max int, reset time.Duration) Verdict {
	var v Verdict
	if !b.OpenUntil.IsZero() {
		if now.Before(b.OpenUntil) {
			return v
		}
		b.OpenUntil = time.Time{}
		b.Sent = nil
		v.Closed = true
	}
	b.Prune(now)
	if len(b.Sent) >= max {
		b.OpenUntil = now.Add(reset)
		v.Opened = true
		return v
	}
	b.Sent = append(b.Sent, now)
	v.Allow = true
	return v
}

// Open reports whether the breaker is open at now.
func (b *Breaker) Open(now time.Time) bool {
	return !b.OpenUntil.IsZero() && now.Before(b.OpenUntil)
}

// Prune forgets the calls older than the budget's window.
func (b *Breaker) Prune(now time.Time) {
	i := 0
	for i < len(b.Sent) && now.Sub(b.Sent[i]) >= budgetWindow {
		i++
	}
	b.Sent = append(b.Sent[:0], b.Sent[i:]...)
}

// Refund gives back the budget a call taken at t did not use: it failed,
// so it changed nothing on the exchange.
func (b *Breaker) Refund(t time.Time) {
	for i := len(b.Sent) - 1; i >= 0; i-- {
		if b.Sent[i].Equal(t) {
			b.Sent = append(b.Sent[:i], b.Sent[i+1:]...)
			return
		}
	}
}

// Clone is a copy that shares nothing with b.
func (b *Breaker) Clone() Breaker { return Breaker{OpenUntil: b.OpenUntil, Sent: slices.Clone(b.Sent)} }
