// Package web is the daemon's HTTP surface: the status page, the read and
// control API under /api/v1, /metrics and /healthz. It reads and actuates
// the guard only through the small interfaces it declares here (Guard,
// Controls, ExchangeStats), which *engine.Engine and the daemon's wiring
// satisfy; cmd/riskguard builds a Server and starts it.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine"
)

// Guard is what the status page, /api/v1/status and /healthz read of the
// running guard. None of its methods may wait for a tick: /healthz must
// answer while a tick hangs on the exchange.
type Guard interface {
	// Status is what the guard knows at now.
	Status(now time.Time) *engine.Status
	// LastSuccess is the time of the last complete snapshot; zero before
	// the first.
	LastSuccess() time.Time
	// InFlight lists the mutating calls still running at now.
	InFlight(now time.Time) []engine.CallInFlight
}

// Controls are the silences, pauses and acknowledgements the control API
// reads and changes. A change is audited with its author by the guard.
type Controls interface {
	// Silences lists the silences and acknowledgements not ended at now.
	Silences(now time.Time) []engine.Silence
	// Pauses lists the pauses in force at now.
	Pauses(now time.Time) []engine.Pause
	// AddSilence adds s; an invalid silence is an error to show the caller.
	AddSilence(ctx context.Context, now time.Time, s engine.Silence) (engine.Silence, error)
	// ExpireSilence ends the silence id; engine.ErrNotFound when there is
	// none in force.
	ExpireSilence(ctx context.Context, now time.Time, id, by string) error
	// Ack mutes the alert of rule on symbol until it resolves (or until,
	// when not zero); engine.ErrNotActive when the alert is inactive.
	Ack(ctx context.Context, now time.Time, rule, symbol, by, comment string, until time.Time) (engine.Silence, error)
	// Pause holds back the actions p matches.
	Pause(ctx context.Context, now time.Time, p engine.Pause) (engine.Pause, error)
	// Resume ends the pauses of rule and symbol (every one when both are
	// empty); engine.ErrNotFound when there is none.
	Resume(ctx context.Context, now time.Time, rule, symbol, by string) ([]engine.Pause, error)
}

// ExchangeStats gives the exchange client's figures shown by the status
// page. The daemon follows its client's requests to fill them; the engine
// does not know them.
type ExchangeStats interface {
	// Snapshot is the figures at the time of the call.
	Snapshot() ExchangeStatus
}

// ExchangeStatus is the "exchange" part of GET /api/v1/status: the
// requests to the exchange, their latency and the last error.
type ExchangeStatus struct {
	Requests      int       `json:"requests"`
	Errors        int       `json:"errors"`
	LastLatencyMs float64   `json:"lastLatencyMs"`
	AvgLatencyMs  float64   `json:"avgLatencyMs"`
	LastError     string    `json:"lastError,omitempty"`
	LastErrorAt   time.Time `json:"lastErrorAt,omitzero"`
}

// Options configure a Server. Guard, Controls and Metrics are required.
type Options struct {
	// Guard is read by the page, /api/v1/status and /healthz.
	Guard Guard
	// Controls are read and changed by /api/v1/silences, /pause,
	// /resume and /ack.
	Controls Controls
	// Exchange gives the exchange figures of the status API; nil shows
	// zeros.
	Exchange ExchangeStats
	// Metrics serves GET /metrics (promhttp.HandlerFor the registry).
	Metrics http.Handler
	// Token is the bearer token of the control API and of reads from
	// beyond loopback; "" disables the mutating endpoints (403).
	Token string
	// AllowedHosts are the host names (or addresses) requests may name in
	// their Host header besides the loopback ones (engine.allowed_hosts);
	// see Server.ServeHTTP.
	AllowedHosts []string
	// HealthMaxAge is how old the last complete snapshot may be for
	// /healthz to answer ok; it must be positive.
	HealthMaxAge time.Duration
	// Cluster, under ha, gives the role for the status, and makes a
	// standby answer the mutating endpoints with 421 and where the leader
	// is; nil for a guard alone.
	Cluster Cluster
	// Logger gets the listener's lines; nil discards them.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Server serves the HTTP surface over the guard. It is an http.Handler;
// Start also listens.
type Server struct {
	guard    Guard
	controls Controls
	exchange ExchangeStats
	cluster  Cluster
	token    string
	hosts    map[string]bool // AllowedHosts, normalized
	maxAge   time.Duration
	logger   *slog.Logger
	now      func() time.Time
	mux      *http.ServeMux
}

// New checks opts and builds the server with its routes.
func New(opts Options) (*Server, error) {
	switch {
	case opts.Guard == nil:
		return nil, errors.New("web: no guard")
	case opts.Controls == nil:
		return nil, errors.New("web: no controls")
	case opts.Metrics == nil:
		return nil, errors.New("web: no metrics handler")
	case opts.HealthMaxAge <= 0:
		return nil, fmt.Errorf("web: health max age must be positive, got %s", opts.HealthMaxAge)
	}
	s := &Server{guard: opts.Guard, controls: opts.Controls, exchange: opts.Exchange, cluster: opts.Cluster, token: opts.Token,
		maxAge: opts.HealthMaxAge, logger: opts.Logger, now: opts.Now, mux: http.NewServeMux()}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.hosts = map[string]bool{}
	for _, h := range opts.AllowedHosts {
		s.hosts[normalHost(h)] = true
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.mux.Handle("GET /metrics", opts.Metrics)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.statusRoutes()
	s.controlRoutes()
	return s, nil
}

// ServeHTTP serves every route of the server to the requests that name
// a host it answers to, and refuses the others with 421 Misdirected
// Request. A web page can make a browser send its requests here by having
// its own name resolve to 127.0.0.1 (DNS rebinding); the browser then sends
// that name as Host, and the page could read the answers as its own. So
// only the loopback names and addresses (localhost, 127.0.0.1, [::1], any
// port; the unspecified 0.0.0.0 and [::], which reach this machine only)
// and AllowedHosts are served. /metrics and /healthz also answer any
// IP address, which probes use and no page can rebind: a name is needed
// for that.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r) {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "misdirected request: this host name is not served here (engine.allowed_hosts lists the names besides localhost)", http.StatusMisdirectedRequest)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// hostAllowed reports whether r's Host is one the server answers to.
func (s *Server) hostAllowed(r *http.Request) bool {
	if r.Host == "" {
		return true // HTTP/1.0 without Host: no browser sends that
	}
	host := normalHost(r.Host)
	if host == "" || host == "localhost" || s.hosts[host] {
		return true // "": ":9464", what the CLI sends for engine.listen ":9464"
	}
	ip := net.ParseIP(host)
	if ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		return true // 0.0.0.0 and :: are what the CLI sends for such a listen
	}
	return ip != nil && (r.URL.Path == "/metrics" || r.URL.Path == "/healthz")
}

// normalHost is a Host header's or an allowed host's name: without its
// port and IPv6 brackets, in lower case, without a final dot.
func normalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	return h
}

// Start listens on addr and serves in the background until ctx is done,
// then shuts down within two seconds. It returns once the listener is
// open, so that a bad address fails the daemon's start.
func (s *Server) Start(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("metrics listener stopped", "err", err)
		}
	}()
	s.logger.Info("serving /metrics and /healthz", "addr", ln.Addr().String(), "status_page", "/", "control_api", s.token != "")
	return nil
}

// healthy reports whether the last complete snapshot is at most
// HealthMaxAge old at now, and its age.
func (s *Server) healthy(now time.Time) (bool, time.Duration) {
	last := s.guard.LastSuccess()
	if last.IsZero() {
		return false, 0
	}
	age := now.Sub(last)
	return age <= s.maxAge, age
}

// healthz is GET /healthz: 200 or 503 with the snapshot's age, then the
// calls in flight. It is open to all, for load balancers and systemd.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	ok, age := s.healthy(now)
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: last complete snapshot %s ago\n", age.Round(time.Millisecond))
	} else {
		fmt.Fprintf(w, "ok: last complete snapshot %s ago\n", age.Round(time.Millisecond))
	}
	for _, c := range s.guard.InFlight(now) {
		fmt.Fprintf(w, "in flight for %s: %s\n", time.Duration(c.Running*float64(time.Second)).Round(time.Millisecond), c.Call)
	}
}

// nonNil makes an empty list encode as [], not null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// writeJSON answers code with v, indented, never cached. v is encoded
// before the header is written, so that a value JSON cannot carry is a 500
// saying so, never a 200 with an empty body; the error is returned for the
// caller to log.
func writeJSON(w http.ResponseWriter, code int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		w.Header().Set("Cache-Control", "no-store")
		http.Error(w, "the answer could not be encoded; the daemon's log says why", http.StatusInternalServerError)
		return fmt.Errorf("encode the answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, err := w.Write(buf.Bytes())
	return err
}

// ErrorBody is the body of every refused API call.
type ErrorBody struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg})
}
