package exchange

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy bounds the retries of a call. Network errors, 5xx and 429 are
// retried (every endpoint of the client is a GET or an idempotent POST);
// other 4xx never are, so a rejected signature does not become a storm.
// Zero fields take the defaults: 4 attempts, 200ms base delay, 5s maximum
// delay, 20s maximum elapsed time.
type RetryPolicy struct {
	// MaxAttempts counts the first try; 1 disables retries.
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt; it doubles for
	// each further attempt, up to MaxDelay, with jitter.
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// MaxElapsed bounds the whole call: no retry is started whose wait would
	// end after it.
	MaxElapsed time.Duration
}

// DefaultRetryPolicy returns the policy a client uses without WithRetry.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 4, BaseDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second, MaxElapsed: 20 * time.Second}
}

// withDefaults fills zero fields from DefaultRetryPolicy and validates.
func (p RetryPolicy) withDefaults() (RetryPolicy, error) {
	if p.MaxAttempts < 0 || p.BaseDelay < 0 || p.MaxDelay < 0 || p.MaxElapsed < 0 {
		return p, fmt.Errorf("retry policy %+v: negative value", p)
	}
	d := DefaultRetryPolicy()
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = d.BaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = max(d.MaxDelay, p.BaseDelay)
	}
	if p.MaxElapsed == 0 {
		p.MaxElapsed = d.MaxElapsed
	}
	if p.MaxDelay < p.BaseDelay {
		return p, fmt.Errorf("retry policy: max delay %s below base delay %s", p.MaxDelay, p.BaseDelay)
	}
	return p, nil
}

// backoff is the wait after the given failed attempt (1-based): the base
// delay doubled per attempt and capped, then "equal jitter" — half fixed,
// half random — so concurrent clients spread out but never retry at once.
func (p RetryPolicy) backoff(attempt int, jitter func() float64) time.Duration {
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	j := jitter()
	if j < 0 || j >= 1 || j != j {
		j = 0
	}
	return d/2 + time.Duration(j*float64(d/2))
}

// maxRetryAfter caps a Retry-After header so a hostile value cannot overflow.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date,
// the latter measured against now (the estimated server time).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}

// sleepCtx waits d or until ctx is done, whichever comes first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
