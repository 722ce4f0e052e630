package model

import (
	"slices"
	"testing"
	"time"
)

// keepReference is volIndex.keep as it was before the list slid along its
// buffer: the samples within volRecentSpan and not after now, at most
// volRecentCap of them, the oldest first.
func keepReference(recent []volPrice, now time.Time, price float64) []volPrice {
	drop := 0
	for drop < len(recent) && (now.Sub(recent[drop].at) > volRecentSpan || recent[drop].at.After(now)) {
		drop++
	}
	if drop == 0 && len(recent) == volRecentCap {
		drop = 1
	}
	return append(slices.Clone(recent[drop:]), volPrice{now, price})
}

// TestKeepMatchesReference holds keep's samples, slid along a buffer it
// reuses, to the list kept afresh, over steps of a minute, of volSample,
// of a clock that runs back and of a gap longer than volRecentSpan.
func TestKeepMatchesReference(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		step func(i int) time.Duration // the time of sample i after t0
	}{
		{"a minute", func(i int) time.Duration { return time.Duration(i) * time.Minute }},
		{"volSample", func(i int) time.Duration { return time.Duration(i) * volSample }},
		{"faster than volSample", func(i int) time.Duration { return time.Duration(i) * time.Second }},
		{"back every 97", func(i int) time.Duration { return time.Duration(i%97) * volSample * 3 }},
		{"gaps", func(i int) time.Duration {
			return time.Duration(i/50)*2*volRecentSpan + time.Duration(i%50)*time.Minute
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := &volIndex{buf: make([]volPrice, volRecentCap)}
			x.recent = x.buf[:0]
			var want []volPrice
			for i := range 3000 {
				now, price := t0.Add(tt.step(i)), float64(100+i%17)
				x.keep(now, now.Add(-volRecentSpan), price)
				want = keepReference(want, now, price)
				if !slices.Equal(x.recent, want) {
					t.Fatalf("sample %d: %d samples kept, want %d (first %v, want %v)", i, len(x.recent), len(want), x.recent[:min(1, len(x.recent))], want[:1])
				}
			}
		})
	}
}
