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
