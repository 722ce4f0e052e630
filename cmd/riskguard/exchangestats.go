package main

import (
	"net/http"
	"sync"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/web"
)

// exchangeStats follows the exchange client's requests (its request hook)
// for the status page: latency and errors.
type exchangeStats struct {
	mu        sync.Mutex
	requests  int
	errors    int
	last      time.Duration
	avg       time.Duration // moving average over about 20 requests
	lastErr   string
	lastErrAt time.Time
}

// observe counts one request; status 0 or ≥ 400 is an error. The message
// of a transport error is kept without its URL's query (it never holds
// a secret: the client signs in headers).
func (s *exchangeStats) observe(ri exchange.RequestInfo, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.last = ri.Duration
	if s.avg == 0 {
		s.avg = ri.Duration
	} else {
		s.avg += (ri.Duration - s.avg) / 20
	}
	if ri.Status == 0 || ri.Status >= 400 {
		s.errors++
		s.lastErrAt = now
		s.lastErr = ri.Method + " " + ri.Route + ": "
		if ri.Err != nil {
			s.lastErr += ri.Err.Error()
		} else {
			s.lastErr += http.StatusText(ri.Status)
		}
	}
}

// Snapshot is the figures so far, for the status API.
func (s *exchangeStats) Snapshot() web.ExchangeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return web.ExchangeStatus{Requests: s.requests, Errors: s.errors, LastLatencyMs: ms(s.last), AvgLatencyMs: ms(s.avg),
		LastError: s.lastErr, LastErrorAt: s.lastErrAt}
}
