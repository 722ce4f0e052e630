package engine

import (
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var b breakerState
	for i := range 3 {
		if v := b.take(at(i), 3, time.Minute); !v.allow {
			t.Fatalf("call %d denied", i)
		}
	}
	v := b.take(at(10), 3, time.Minute)
	if v.allow || !v.opened {
		t.Fatalf("fourth call in a minute: %+v, want denied and opened", v)
	}
	if !b.open(at(69)) || b.open(at(70)) {
		t.Fatalf("breaker open window wrong: open until %v", b.OpenUntil)
	}
	if v := b.take(at(30), 3, time.Minute); v.allow || v.opened {
		t.Fatalf("call while open: %+v", v)
	}
	v = b.take(at(70), 3, time.Minute)
	if !v.allow || !v.closed {
		t.Fatalf("call after reset: %+v, want allowed and closed", v)
	}
	// The window slides: calls older than a minute no longer count.
	var s breakerState
	for i := range 3 {
		s.take(at(i*20), 3, time.Minute)
	}
	if v := s.take(at(60), 3, time.Minute); !v.allow {
		t.Fatalf("call after the first left the window denied: %+v", v)
	}
}
