package act

import "time"

// Backoff spaces out the calls of a symbol whose calls keep failing, on
// that symbol alone: after n failures in a row its next attempt waits
// interval×2^(n-1) minus half an interval (so the first failure is retried
// at the next tick), at most max; a success ends it. It is owned by the
// tick.
type Backoff struct {
	interval, max time.Duration
	symbols       map[string]*backoff
}

// backoff is what is remembered of one symbol.
type backoff struct {
	failures int
	last     time.Time // the tick of the last failure counted
	until    time.Time
}

// NewBackoff returns a backoff for ticks every interval, capped at max.
func NewBackoff(interval, max time.Duration) *Backoff {
	return &Backoff{interval: interval, max: max, symbols: make(map[string]*backoff)}
}

// SetLimits changes the cap (a reload).
func (b *Backoff) SetLimits(interval, max time.Duration) { b.interval, b.max = interval, max }

// Held reports whether symbol's calls wait at now: after how many failures,
// and until when.
func (b *Backoff) Held(symbol string, now time.Time) (failures int, until time.Time, held bool) {
	s := b.symbols[symbol]
	if s == nil || !now.Before(s.until) {
		return 0, time.Time{}, false
	}
	return s.failures, s.until, true
}

// Succeeded ends symbol's backoff; it reports the failures it ended, 0
// when there was none.
func (b *Backoff) Succeeded(symbol string) int {
	s := b.symbols[symbol]
	if s == nil {
		return 0
	}
	delete(b.symbols, symbol)
	return s.failures
}

// Failed counts a failure of symbol's calls at now (one per tick) and
// returns the failures in a row and until when its calls wait; counted is
// false for a second failure in the same tick.
func (b *Backoff) Failed(symbol string, now time.Time) (failures int, until time.Time, counted bool) {
	s := b.symbols[symbol]
	if s == nil {
		s = &backoff{}
		b.symbols[symbol] = s
	}
	if s.last.Equal(now) {
		return s.failures, s.until, false // one tick's calls count once
	}
	s.failures++
	s.last = now
	wait := b.max
	if s.failures <= 20 {
		wait = min(b.interval<<(s.failures-1)-b.interval/2, wait)
	}
	s.until = now.Add(wait)
	return s.failures, s.until, true
}
