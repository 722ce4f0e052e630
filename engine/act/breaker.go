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
	// OpenedAt is when the breaker opened: a restart judges by it whether
	// the saved breaker is credible (it cannot have opened after now).
	OpenedAt  time.Time   `json:"openedAt,omitzero"`
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
		b.OpenedAt, b.OpenUntil = time.Time{}, time.Time{}
		b.Sent = nil
		v.Closed = true
	}
	b.Prune(now)
	if len(b.Sent) >= max {
		b.OpenedAt, b.OpenUntil = now, now.Add(reset)
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

// Same reports whether b and o hold the same times, as a Clone of either
// holds them.
func (b *Breaker) Same(o *Breaker) bool {
	return b.OpenedAt == o.OpenedAt && b.OpenUntil == o.OpenUntil && slices.Equal(b.Sent, o.Sent)
}

// Clone is a copy that shares nothing with b.
func (b *Breaker) Clone() Breaker {
	return Breaker{OpenedAt: b.OpenedAt, OpenUntil: b.OpenUntil, Sent: slices.Clone(b.Sent)}
}

// Restore makes a breaker read from a state file credible at now: a
// breaker that opened after now (a host clock that ran ahead wrote it, or
// the file was edited) is closed, since holding the guard's actions for
// another reset on a time that has not happened protects nothing; the
// calls after now are dropped for the same reason. An older file has no
// OpenedAt: it is taken as OpenUntil − reset. A credible open breaker is
// held at most reset from now (the reset may have been shortened since).
// It returns what it did, for the audit log: the time the dropped breaker
// claimed to have opened (zero when it was kept) and the number of calls
// dropped.
func (b *Breaker) Restore(now time.Time, reset time.Duration) (droppedOpenedAt time.Time, droppedSent int) {
	kept := b.Sent[:0]
	for _, t := range b.Sent {
		if t.After(now) {
			droppedSent++
			continue
		}
		kept = append(kept, t)
	}
	b.Sent = kept
	if b.OpenUntil.IsZero() {
		b.OpenedAt = time.Time{}
		return time.Time{}, droppedSent
	}
	opened := b.OpenedAt
	if opened.IsZero() {
		opened = b.OpenUntil.Add(-reset)
	}
	if opened.After(now) {
		b.OpenedAt, b.OpenUntil = time.Time{}, time.Time{}
		return opened, droppedSent
	}
	b.OpenedAt = opened
	if limit := now.Add(reset); b.OpenUntil.After(limit) {
		b.OpenUntil = limit
	}
	return time.Time{}, droppedSent
}
