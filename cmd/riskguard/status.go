package main

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange"
)

// statusPage is the status page: one self-contained file (no external
// asset, no build step) that fetches /api/v1/status every few seconds.
//
//go:embed status.html
var statusPage []byte

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

// exchangeStatus is the exchange part of the status API.
type exchangeStatus struct {
	Requests      int       `json:"requests"`
	Errors        int       `json:"errors"`
	LastLatencyMs float64   `json:"lastLatencyMs"`
	AvgLatencyMs  float64   `json:"avgLatencyMs"`
	LastError     string    `json:"lastError,omitempty"`
	LastErrorAt   time.Time `json:"lastErrorAt,omitzero"`
}

func (s *exchangeStats) snapshot() exchangeStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return exchangeStatus{Requests: s.requests, Errors: s.errors, LastLatencyMs: ms(s.last), AvgLatencyMs: ms(s.avg),
		LastError: s.lastErr, LastErrorAt: s.lastErrAt}
}

// statusResponse is GET /api/v1/status: the engine's Status, whether the
// daemon is healthy (as /healthz says), and the exchange client's figures.
type statusResponse struct {
	*engine.Status
	Healthy  bool           `json:"healthy"`
	Exchange exchangeStatus `json:"exchange"`
	// Control says whether the mutating endpoints are enabled (a token is
	// configured); never the token.
	Control bool `json:"controlEnabled"`
}

// statusRoutes registers the status page and the read endpoints.
func (g *guard) statusRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", g.open(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
		w.Write(statusPage)
	}))
	mux.HandleFunc("GET /api/v1/status", g.open(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		healthy, _ := g.healthy(now)
		writeJSON(w, http.StatusOK, statusResponse{Status: g.engine.Status(now), Healthy: healthy, Exchange: g.stats.snapshot(), Control: g.controlToken != ""})
	}))
	mux.HandleFunc("GET /api/v1/silences", g.open(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(g.engine.Silences(time.Now())))
	}))
	mux.HandleFunc("GET /api/v1/pauses", g.open(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(g.engine.Pauses(time.Now())))
	}))
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// apiError is the body of every refused API call.
type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, apiError{Error: msg})
}
