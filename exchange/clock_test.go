package exchange

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// clockServer is an exchange whose clock is serverNow: it serves the
// timestamp and rejects signed calls whose API-TIMESTAMP is more than 60s
// away from its time, like the simulator does.
type clockServer struct {
	srv        *httptest.Server
	serverNow  func() time.Time
	stampCalls atomic.Int32
	private    atomic.Int32
	failStamp  atomic.Bool
}

func newClockServer(t *testing.T, serverNow func() time.Time) *clockServer {
	t.Helper()
	cs := &clockServer{serverNow: serverNow}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/market/timestamp", func(w http.ResponseWriter, r *http.Request) {
		checkPublic(t, r)
		cs.stampCalls.Add(1)
		if cs.failStamp.Load() {
			writeFailure(w, http.StatusBadRequest, "UNAVAILABLE", "", "no time")
			return
		}
		writeData(w, strconv.FormatInt(cs.serverNow().UnixMilli(), 10))
	})
	mux.HandleFunc("GET /v1/contracts/positions", func(w http.ResponseWriter, r *http.Request) {
		cs.private.Add(1)
		checkSigned(t, r)
		ms, _ := strconv.ParseInt(r.Header.Get(HeaderTimestamp), 10, 64)
		if d := cs.serverNow().Sub(time.UnixMilli(ms)).Abs(); d > 60*time.Second {
			writeFailure(w, http.StatusUnauthorized, "TIMESTAMP_EXPIRED", HeaderTimestamp, "off by "+d.String())
			return
		}
		writeData(w, "[]")
	})
	cs.srv = httptest.NewServer(mux)
	t.Cleanup(cs.srv.Close)
	return cs
}

// A local clock 5 minutes behind still signs requests the server accepts.
func TestClockOffsetSignsValidRequests(t *testing.T) {
	t.Parallel()
	cs := newClockServer(t, time.Now)
	behind := func() time.Time { return time.Now().Add(-5 * time.Minute) }
	c, err := New(cs.srv.URL, testKey, testSecret, WithClock(behind), WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := c.Positions(context.Background()); err != nil {
			t.Fatalf("Positions with a clock 5m behind: %v", err)
		}
	}
	if off := c.ClockOffset(); (off - 5*time.Minute).Abs() > 5*time.Second {
		t.Errorf("offset = %v, want about 5m", off)
	}
	if n := cs.stampCalls.Load(); n != 1 {
		t.Errorf("timestamp fetched %d times within the sync interval, want 1", n)
	}

	// The same clock without the offset is rejected: the test does test
	// something.
	raw, err := New(cs.srv.URL, testKey, testSecret, WithClock(behind), WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	raw.synced = true // pretend measured just now, offset zero
	raw.syncedAt = behind()
	if _, err := raw.Positions(context.Background()); err == nil || !strings.Contains(err.Error(), "TIMESTAMP_EXPIRED") {
		t.Errorf("unsynchronised client: error = %v, want TIMESTAMP_EXPIRED", err)
	}
}

// The offset is server time minus the local midpoint of send and receive.
func TestSyncClockMidpoint(t *testing.T) {
	t.Parallel()
	server := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	cs := newClockServer(t, func() time.Time { return server })
	// Each reading of this local clock moves it one second on: the call reads
	// it for the start of the call, at send and at receive.
	local := time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)
	var reads atomic.Int64
	tick := func() time.Time { return local.Add(time.Duration(reads.Add(1)) * time.Second) }
	c, err := New(cs.srv.URL, "", "", WithClock(tick), WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SyncClock(context.Background()); err != nil {
		t.Fatal(err)
	}
	// sent = local+2s, received = local+3s, midpoint local+2.5s.
	if got, want := c.ClockOffset(), time.Hour-2500*time.Millisecond; got != want {
		t.Errorf("offset = %v, want %v", got, want)
	}
	if c.syncedAt != local.Add(3*time.Second) {
		t.Errorf("syncedAt = %v", c.syncedAt)
	}
}

func TestClockRefresh(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		interval  time.Duration
		steps     []time.Duration // clock advance before each call
		wantStamp int32
	}{
		{name: "refreshed when older than interval", interval: time.Minute, steps: []time.Duration{0, 30 * time.Second, 31 * time.Second, time.Second}, wantStamp: 2},
		{name: "every call after each interval", interval: time.Minute, steps: []time.Duration{0, time.Minute, time.Minute}, wantStamp: 3},
		{name: "zero measures once", interval: 0, steps: []time.Duration{0, time.Hour, 24 * time.Hour}, wantStamp: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock(start)
			// The server's clock runs 2 minutes ahead of the local one.
			cs := newClockServer(t, func() time.Time { return clock.Now().Add(2 * time.Minute) })
			c, err := New(cs.srv.URL, testKey, testSecret, WithClock(clock.Now), WithClockSync(tt.interval), WithRateLimit(0, 0))
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range tt.steps {
				clock.Advance(d)
				if _, err := c.Positions(context.Background()); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if got := cs.stampCalls.Load(); got != tt.wantStamp {
				t.Errorf("timestamp fetched %d times, want %d", got, tt.wantStamp)
			}
			if got := c.ClockOffset(); got != 2*time.Minute {
				t.Errorf("offset = %v, want 2m", got)
			}
		})
	}
}

func TestClockSyncFailure(t *testing.T) {
	t.Parallel()
	clock := newFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	cs := newClockServer(t, func() time.Time { return clock.Now().Add(time.Minute) })
	c, err := New(cs.srv.URL, testKey, testSecret, WithClock(clock.Now), WithClockSync(time.Minute), WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// Without a first measurement a signed call fails before it is sent.
	cs.failStamp.Store(true)
	if _, err := c.Positions(ctx); err == nil || !strings.Contains(err.Error(), "sync clock") || !strings.Contains(err.Error(), "UNAVAILABLE") {
		t.Errorf("error = %v, want a sync clock failure", err)
	}
	if n := cs.private.Load(); n != 0 {
		t.Errorf("%d private requests sent without a clock offset", n)
	}

	// Measured once, a failed refresh keeps the old offset and the call
	// goes on; the refresh is retried only after a pause.
	cs.failStamp.Store(false)
	if _, err := c.Positions(ctx); err != nil {
		t.Fatal(err)
	}
	cs.failStamp.Store(true)
	clock.Advance(2 * time.Minute)
	before := cs.stampCalls.Load()
	for range 3 {
		if _, err := c.Positions(ctx); err != nil {
			t.Fatalf("call with a failing refresh: %v", err)
		}
	}
	if got := cs.stampCalls.Load() - before; got != 1 {
		t.Errorf("%d refresh attempts in a row, want 1 until the pause passes", got)
	}
	if c.ClockOffset() != time.Minute {
		t.Errorf("offset = %v, want the previous 1m", c.ClockOffset())
	}
	clock.Advance(clockRetryAfterFailure)
	cs.failStamp.Store(false)
	if _, err := c.Positions(ctx); err != nil {
		t.Fatal(err)
	}
	if got := cs.stampCalls.Load() - before; got != 2 {
		t.Errorf("%d refresh attempts after the pause, want 2", got)
	}
}
