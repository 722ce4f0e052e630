package window

import (
	"context"
	"net/url"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// pagedHistory serves one index's history the way the exchange is assumed
// to: rows with from ≤ t ≤ to, the earliest limit of them, in its clock.
type pagedHistory struct {
	ms     []int64 // exchange time of each row
	offset time.Duration
	pages  int
	junk   bool // answer full pages of rows outside what was asked
}

func (h *pagedHistory) ClockOffset() time.Duration { return h.offset }

func (h *pagedHistory) IndexHistory(_ context.Context, _ string, q url.Values) ([][]decimal.Decimal, error) {
	h.pages++
	from, _ := strconv.ParseInt(q.Get("from"), 10, 64)
	to, _ := strconv.ParseInt(q.Get("to"), 10, 64)
	limit, _ := strconv.Atoi(q.Get("limit"))
	if h.junk {
		out := make([][]decimal.Decimal, limit)
		for i := range out {
			out[i] = []decimal.Decimal{decimal.NewFromInt(to + 1 + int64(i)), decimal.NewFromInt(1)}
		}
		return out, nil
	}
	lo := sort.Search(len(h.ms), func(i int) bool { return h.ms[i] >= from })
	hi := sort.Search(len(h.ms), func(i int) bool { return h.ms[i] > to })
	if hi-lo > limit {
		hi = lo + limit
	}
	var out [][]decimal.Decimal
	for _, ms := range h.ms[lo:hi] {
		out = append(out, []decimal.Decimal{decimal.NewFromInt(ms), decimal.NewFromInt(100 + ms%7)})
	}
	return out, nil
}

func TestReadHistoryPagesAndBounds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	series := func(offset time.Duration, span, step time.Duration) []int64 {
		var ms []int64
		for at := now.Add(offset - span - time.Minute); !at.After(now.Add(offset)); at = at.Add(step) {
			ms = append(ms, at.UnixMilli())
		}
		return ms
	}
	cases := []struct {
		name                 string
		h                    *pagedHistory
		span                 time.Duration
		wantPages, wantRows  int
		wantErr, wantCovered bool
	}{
		{name: "24h at 1s", h: &pagedHistory{ms: series(0, 24*time.Hour, time.Second)}, span: 24 * time.Hour,
			wantPages: 18, wantRows: 86401, wantCovered: true},
		{name: "6h at 1s, exchange 5m behind", h: &pagedHistory{ms: series(-5*time.Minute, 6*time.Hour, time.Second), offset: -5 * time.Minute},
			span: 6 * time.Hour, wantPages: 5, wantRows: 21601, wantCovered: true},
		{name: "1m, exchange 5m ahead", h: &pagedHistory{ms: series(5*time.Minute, time.Minute, time.Second), offset: 5 * time.Minute},
			span: time.Minute, wantPages: 1, wantRows: 61, wantCovered: true},
		// 864,000 rows: the 20 pages cover the window's most recent part.
		{name: "24h at 100ms, bounded", h: &pagedHistory{ms: series(0, 24*time.Hour, 100*time.Millisecond)}, span: 24 * time.Hour,
			wantPages: 20, wantRows: 99_982, wantErr: true},
		{name: "pages outside the window", h: &pagedHistory{junk: true}, span: time.Hour, wantPages: 1, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := &Store{hist: c.h}
			rows, pages, err := s.readHistory(context.Background(), "BTC", now, c.span)
			if (err != nil) != c.wantErr || pages != c.wantPages || c.h.pages != pages || len(rows) != c.wantRows {
				t.Fatalf("readHistory: %d rows, %d pages (%d asked), err %v; want %d rows, %d pages, err %v",
					len(rows), pages, c.h.pages, err, c.wantRows, c.wantPages, c.wantErr)
			}
			for i, p := range rows {
				if p.t.Before(now.Add(-c.span)) || p.t.After(now) || i > 0 && !p.t.After(rows[i-1].t) {
					t.Fatalf("row %d at %s: outside the window by our clock, or out of order", i, p.t)
				}
			}
			if len(rows) > 0 && !rows[len(rows)-1].t.Equal(now) {
				t.Errorf("newest row at %s, want %s (the window's end, by our clock)", rows[len(rows)-1].t, now)
			}
			r := newRing(c.span, time.Second)
			for _, p := range rows {
				r.push(p.t, p.v)
			}
			_, why := r.value("change", now, 1)
			if covered := why == ""; covered != c.wantCovered {
				t.Errorf("window covered %v (%q), want %v", covered, why, c.wantCovered)
			}
		})
	}
}
