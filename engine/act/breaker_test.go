package act

import (
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var b Breaker
	for i := range 3 {
		if v := b.Take(at(i), 3, time.Minute); !v.Allow {
			t.Fatalf("call %d denied", i)
		}
	}
	v := b.Take(at(10), 3, time.Minute)
	if v.Allow || !v.Opened {
		t.Fatalf("fourth call in a minute: %+v, want denied and opened", v)
	}
	if !b.Open(at(69)) || b.Open(at(70)) {
		t.Fatalf("breaker open window wrong: open until %v", b.OpenUntil)
	}
	if v := b.Take(at(30), 3, time.Minute); v.Allow || v.Opened {
		t.Fatalf("call while open: %+v", v)
	}
	v = b.Take(at(70), 3, time.Minute)
	if !v.Allow || !v.Closed {
		t.Fatalf("call after reset: %+v, want allowed and closed", v)
	}
	// The window slides: calls older than a minute no longer count.
	var s Breaker
	for i := range 3 {
		s.Take(at(i*20), 3, time.Minute)
	}
	if v := s.Take(at(60), 3, time.Minute); !v.Allow {
		t.Fatalf("call after the first left the window denied: %+v", v)
	}
}

func TestBreakerRestore(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(m int) time.Time { return now.Add(time.Duration(m) * time.Minute) }
	const reset = 5 * time.Minute
	cases := []struct {
		name        string
		in          Breaker
		wantOpen    time.Time // OpenUntil after
		wantFuture  time.Time
		wantSent    int
		wantDropped int
	}{
		{name: "closed", in: Breaker{Sent: []time.Time{at(-1)}}, wantSent: 1},
		{name: "open in the past", in: Breaker{OpenedAt: at(-2), OpenUntil: at(3)}, wantOpen: at(3)},
		{name: "opened after now", in: Breaker{OpenedAt: at(20), OpenUntil: at(25), Sent: []time.Time{at(-1), at(19)}},
			wantFuture: at(20), wantSent: 1, wantDropped: 1},
		{name: "older file, opened after now", in: Breaker{OpenUntil: at(25)}, wantFuture: at(20)},
		{name: "older file, credible", in: Breaker{OpenUntil: at(4)}, wantOpen: at(4)},
		{name: "longer reset than today's", in: Breaker{OpenedAt: at(-1), OpenUntil: at(59)}, wantOpen: at(5)},
		{name: "opened exactly now", in: Breaker{OpenedAt: now, OpenUntil: at(5)}, wantOpen: at(5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.in
			future, dropped := b.Restore(now, reset)
			if !future.Equal(c.wantFuture) || dropped != c.wantDropped {
				t.Errorf("Restore = %s, %d; want %s, %d", future, dropped, c.wantFuture, c.wantDropped)
			}
			if !b.OpenUntil.Equal(c.wantOpen) || len(b.Sent) != c.wantSent {
				t.Errorf("after: open until %s, %d sent; want %s, %d", b.OpenUntil, len(b.Sent), c.wantOpen, c.wantSent)
			}
			if b.Open(now) != !c.wantOpen.IsZero() {
				t.Errorf("Open(now) = %v", b.Open(now))
			}
		})
	}
}

// Same is true of a breaker and its clone, and false once either took a
// call, opened or dropped a call.
func TestBreakerSame(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	base := Breaker{Sent: []time.Time{at(-2), at(-1)}}
	tests := []struct {
		name string
		edit func(*Breaker)
		want bool
	}{
		{"clone", func(*Breaker) {}, true},
		{"took a call", func(b *Breaker) { b.Sent = append(b.Sent, at(0)) }, false},
		{"dropped one", func(b *Breaker) { b.Sent = b.Sent[1:] }, false},
		{"another time", func(b *Breaker) { b.Sent[1] = at(0) }, false},
		{"opened", func(b *Breaker) { b.OpenedAt, b.OpenUntil = at(0), at(60) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base.Clone()
			tt.edit(&c)
			if got := base.Same(&c); got != tt.want {
				t.Errorf("Same = %t, want %t", got, tt.want)
			}
			if got := c.Same(&base); got != tt.want {
				t.Errorf("the other way, Same = %t, want %t", got, tt.want)
			}
		})
	}
}
