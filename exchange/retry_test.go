package exchange

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestRetries(t *testing.T) {
	t.Parallel()
	date := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	type answer struct {
		status     int
		retryAfter string
	}
	ok := answer{status: 200}
	tests := []struct {
		name       string
		answers    []answer // one per attempt; the last repeats
		policy     RetryPolicy
		wantErr    func(*testing.T, error)
		wantSleeps []time.Duration
	}{
		{
			name:    "5xx then success",
			answers: []answer{{status: 500}, {status: 503}, ok},
			// equal jitter at 0.5: 3/4 of 200ms, then of 400ms
			wantSleeps: []time.Duration{150 * time.Millisecond, 300 * time.Millisecond},
		},
		{
			name:       "429 with Retry-After seconds",
			answers:    []answer{{status: 429, retryAfter: "3"}, ok},
			wantSleeps: []time.Duration{3 * time.Second},
		},
		{
			name:       "429 with Retry-After date",
			answers:    []answer{{status: 429, retryAfter: date.Add(2 * time.Second).Format(http.TimeFormat)}, ok},
			wantSleeps: []time.Duration{2 * time.Second},
		},
		{
			name:       "503 with Retry-After",
			answers:    []answer{{status: 503, retryAfter: "1"}, ok},
			wantSleeps: []time.Duration{time.Second},
		},
		{
			name:       "unparsable Retry-After falls back to backoff",
			answers:    []answer{{status: 429, retryAfter: "soon"}, ok},
			wantSleeps: []time.Duration{150 * time.Millisecond},
		},
		{
			name:    "429 persists",
			answers: []answer{{status: 429, retryAfter: "1"}},
			wantErr: func(t *testing.T, err error) {
				var rl *RateLimitError
				if !errors.As(err, &rl) || rl.RetryAfter != time.Second || rl.APIError == nil || rl.APIError.Status != 429 || rl.APIError.Code != "TOO_MANY" {
					t.Errorf("error = %#v, want RateLimitError after 1s with the API error", err)
				}
				var ae *APIError
				if !errors.As(err, &ae) {
					t.Error("RateLimitError does not unwrap to *APIError")
				}
			},
			wantSleeps: []time.Duration{time.Second, time.Second, time.Second},
		},
		{
			name:    "5xx exhausts attempts",
			answers: []answer{{status: 500}},
			wantErr: func(t *testing.T, err error) {
				var ae *APIError
				if !errors.As(err, &ae) || ae.Status != 500 || !strings.Contains(err.Error(), "giving up after 4 attempts") {
					t.Errorf("error = %v, want the last APIError after 4 attempts", err)
				}
			},
			wantSleeps: []time.Duration{150 * time.Millisecond, 300 * time.Millisecond, 600 * time.Millisecond},
		},
		{
			name:    "delay capped by MaxDelay",
			answers: []answer{{status: 500}},
			policy:  RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 2 * time.Second, MaxElapsed: time.Minute},
			wantErr: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "giving up after 5 attempts") {
					t.Errorf("error = %v", err)
				}
			},
			wantSleeps: []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond, 1500 * time.Millisecond},
		},
		{
			name:    "bounded by MaxElapsed",
			answers: []answer{{status: 502}},
			// waits 300ms, 600ms; the next, 1.2s, would end past 1s.
			policy: RetryPolicy{MaxAttempts: 10, BaseDelay: 400 * time.Millisecond, MaxDelay: 10 * time.Second, MaxElapsed: time.Second},
			wantErr: func(t *testing.T, err error) {
				if !strings.Contains(err.Error(), "giving up after 3 attempts") {
					t.Errorf("error = %v", err)
				}
			},
			wantSleeps: []time.Duration{300 * time.Millisecond, 600 * time.Millisecond},
		},
		{
			name:    "Retry-After beyond MaxElapsed gives up at once",
			answers: []answer{{status: 429, retryAfter: "3600"}},
			wantErr: func(t *testing.T, err error) {
				var rl *RateLimitError
				if !errors.As(err, &rl) || rl.RetryAfter != time.Hour {
					t.Errorf("error = %v, want RateLimitError after 1h", err)
				}
			},
		},
		{
			name: "400 never retried", answers: []answer{{status: 400}},
			wantErr: func(t *testing.T, err error) {
				var ae *APIError
				if !errors.As(err, &ae) || ae.Status != 400 {
					t.Errorf("error = %v", err)
				}
			},
		},
		{
			name: "401 never retried", answers: []answer{{status: 401}},
			wantErr: func(t *testing.T, err error) {
				var ae *APIError
				if !errors.As(err, &ae) || ae.Status != 401 {
					t.Errorf("error = %v", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newFakeClock(date)
			opts := []Option{WithClock(clock.Now)}
			if tt.policy != (RetryPolicy{}) {
				opts = append(opts, WithRetry(tt.policy))
			}
			c, mux, rec := setup(t, opts...)
			rec.clock = clock
			var mu sync.Mutex
			var stamps []string
			var n atomic.Int32
			mux.HandleFunc("POST /v1/contracts/orders/{symbol}/cancel", func(w http.ResponseWriter, r *http.Request) {
				checkSigned(t, r)
				mu.Lock()
				stamps = append(stamps, r.Header.Get(HeaderTimestamp))
				mu.Unlock()
				i := min(int(n.Add(1)), len(tt.answers)) - 1
				a := tt.answers[i]
				if a.retryAfter != "" {
					w.Header().Set("Retry-After", a.retryAfter)
				}
				if a.status == 200 {
					writeData(w, `{"cancelled":1}`)
					return
				}
				writeFailure(w, a.status, "TOO_MANY", "", "status "+strconv.Itoa(a.status))
			})
			_, err := c.CancelOrders(context.Background(), "XBTC")
			if tt.wantErr == nil && err != nil {
				t.Fatalf("error = %v, want success", err)
			}
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("succeeded, want an error")
				}
				tt.wantErr(t, err)
			}
			if got := rec.got(); !slices.Equal(got, tt.wantSleeps) {
				t.Errorf("sleeps = %v, want %v", got, tt.wantSleeps)
			}
			if got, want := int(n.Load()), len(tt.wantSleeps)+1; got != want {
				t.Errorf("%d attempts, want %d", got, want)
			}
			// Every attempt is signed anew, with the time of that attempt.
			mu.Lock()
			defer mu.Unlock()
			for i := 1; i < len(stamps); i++ {
				if stamps[i] == stamps[i-1] {
					t.Errorf("attempts %d and %d share timestamp %s: not re-signed", i, i+1, stamps[i])
				}
			}
		})
	}
}

func TestRetryNetworkErrors(t *testing.T) {
	t.Parallel()
	c, mux, rec := setup(t)
	var n atomic.Int32
	mux.HandleFunc("GET /v1/market/indexPrices", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			// Drop the connection without an answer.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
			return
		}
		writeData(w, `{"BTC":1}`)
	})
	m, err := c.IndexPrices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || n.Load() != 2 || len(rec.got()) != 1 {
		t.Errorf("prices %v after %d attempts and sleeps %v", m, n.Load(), rec.got())
	}
}

func TestRetryAttemptTimeout(t *testing.T) {
	t.Parallel()
	// Long enough that the second attempt's immediate answer arrives within
	// it on a loaded machine under -race (at 50 ms CI once saw a third).
	c, mux, _ := setup(t, WithTimeout(500*time.Millisecond))
	var n atomic.Int32
	mux.HandleFunc("GET /v1/market/indexPrices", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-r.Context().Done() // hang until the client's attempt times out
			return
		}
		writeData(w, `{"BTC":1}`)
	})
	if _, err := c.IndexPrices(context.Background()); err != nil {
		t.Fatalf("error = %v, want success on the second attempt", err)
	}
	if n.Load() != 2 {
		t.Errorf("%d attempts, want 2", n.Load())
	}

	// When every attempt times out the error says so and is not mistaken
	// for the caller's deadline.
	c2, mux2, _ := setup(t, WithTimeout(20*time.Millisecond), WithRetry(RetryPolicy{MaxAttempts: 2}))
	mux2.HandleFunc("GET /v1/market/indexValue", func(w http.ResponseWriter, r *http.Request) {})
	mux2.HandleFunc("GET /v1/market/indexes/indexValue", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	_, err := c2.IndexValue(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no complete answer within 20ms") || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want an attempt timeout that is not DeadlineExceeded", err)
	}
}

// Cancelling the context, or reaching its deadline, while the client waits
// between attempts ends the call at once with ctx.Err().
func TestCancelDuringBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want error
	}{{"canceled", context.Canceled}, {"deadline", context.DeadlineExceeded}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, mux, _ := setup(t)
			var n atomic.Int32
			mux.HandleFunc("GET /v1/contracts/positions", func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.Header().Set("Retry-After", "10")
				writeFailure(w, http.StatusServiceUnavailable, "MAINTENANCE", "", "down")
			})
			ctx, cancel := context.WithCancel(context.Background())
			if tc.want == context.DeadlineExceeded {
				ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
			}
			defer cancel()
			waiting := make(chan struct{})
			c.sleep = func(ctx context.Context, d time.Duration) error {
				close(waiting)
				return sleepCtx(ctx, d) // the real wait, 10s
			}
			done := make(chan error, 1)
			go func() {
				_, err := c.Positions(ctx)
				done <- err
			}()
			select {
			case <-waiting:
			case <-time.After(10 * time.Second):
				t.Fatal("client never waited between attempts")
			}
			if tc.want == context.Canceled {
				cancel()
			}
			select {
			case err := <-done:
				if !errors.Is(err, tc.want) {
					t.Errorf("error = %v, want %v", err, tc.want)
				}
				if strings.Contains(err.Error(), "MAINTENANCE") {
					t.Errorf("error %q carries the noise of the previous attempt", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("call did not return when the context ended")
			}
			if n.Load() != 1 {
				t.Errorf("%d attempts, want 1", n.Load())
			}
		})
	}
}

// Cancelling while a request is in flight returns ctx.Err(), not the
// transport's error.
func TestCancelDuringRequest(t *testing.T) {
	t.Parallel()
	c, mux, rec := setup(t)
	arrived := make(chan struct{})
	mux.HandleFunc("GET /v1/spots/balances", func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.SpotBalances(ctx)
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("request never arrived")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || err.Error() != "spot balances: context canceled" {
			t.Errorf("error = %q, want \"spot balances: context canceled\"", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("call did not return after cancel")
	}
	if len(rec.got()) != 0 {
		t.Errorf("retried after cancel: sleeps %v", rec.got())
	}
}

func TestBackoffAndRetryAfterParsing(t *testing.T) {
	t.Parallel()
	p := DefaultRetryPolicy()
	for _, tc := range []struct {
		attempt int
		jitter  float64
		want    time.Duration
	}{
		{1, 0, 100 * time.Millisecond}, {1, 0.999999, 199999900}, {2, 0, 200 * time.Millisecond},
		{10, 0, 2500 * time.Millisecond}, {1000, 0.5, 3750 * time.Millisecond},
		{1, -1, 100 * time.Millisecond}, {1, 2, 100 * time.Millisecond},
	} {
		if got := p.backoff(tc.attempt, func() float64 { return tc.jitter }); got != tc.want {
			t.Errorf("backoff(%d, jitter %v) = %v, want %v", tc.attempt, tc.jitter, got, tc.want)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false}, {"0", 0, true}, {" 7 ", 7 * time.Second, true}, {"-1", 0, false}, {"x", 0, false},
		{"99999999999999999", maxRetryAfter, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestRateLimiter(t *testing.T) {
	t.Parallel()
	t.Run("waits with the context", func(t *testing.T) {
		t.Parallel()
		c, mux, _ := setup(t, WithRateLimit(0.001, 1)) // one request, then one per 1000s
		var n atomic.Int32
		mux.HandleFunc("GET /v1/market/indexes/indexValue", func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			writeData(w, "1")
		})
		if _, err := c.IndexValue(context.Background()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := c.IndexValue(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error = %v, want DeadlineExceeded: the wait cannot end before the deadline", err)
		}
		cancelled, cancel2 := context.WithCancel(context.Background())
		cancel2()
		if _, err := c.IndexValue(cancelled); !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want Canceled", err)
		}
		if n.Load() != 1 {
			t.Errorf("%d requests passed the limiter, want 1", n.Load())
		}
	})
	t.Run("spaces requests", func(t *testing.T) {
		t.Parallel()
		c, mux, _ := setup(t, WithRateLimit(100, 1))
		mux.HandleFunc("GET /v1/market/indexes/indexValue", func(w http.ResponseWriter, r *http.Request) { writeData(w, "1") })
		start := time.Now()
		for range 6 {
			if _, err := c.IndexValue(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		// Five gaps of 10ms at least; an upper bound would make the test flaky.
		if el := time.Since(start); el < 45*time.Millisecond {
			t.Errorf("6 requests at 100/s burst 1 took %v, want at least ~50ms", el)
		}
	})
}
