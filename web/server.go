// Package web is the daemon's HTTP surface: the status page, the read and
// control API under /api/v1, /metrics and /healthz. It reads and actuates
// the guard only through the small interfaces it declares here (Guard,
// Controls, ExchangeStats), which *engine.Engine, its control.Service and
// the daemon's wiring satisfy; cmd/riskguard builds a Server and starts it.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/control"
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
	Silences(now time.Time) []control.Silence
	// Pauses lists the pauses in force at now.
	Pauses(now time.Time) []control.Pause
	// AddSilence adds s; an invalid silence is an error to show the caller.
	AddSilence(ctx context.Context, now time.Time, s control.Silence) (control.Silence, error)
	// ExpireSilence ends the silence id; control.ErrNotFound when there is
	// none in force.
	ExpireSilence(ctx context.Context, now time.Time, id, by string) error
	// Ack mutes the alert of rule on symbol until it resolves (or until,
	// when not zero); control.ErrNotActive when the alert is inactive.
	Ack(ctx context.Context, now time.Time, rule, symbol, by, comment string, until time.Time) (control.Silence, error)
	// Pause holds back the actions p matches.
	Pause(ctx context.Context, now time.Time, p control.Pause) (control.Pause, error)
	// Resume ends the pauses of rule and symbol (every one when both are
	// empty); control.ErrNotFound when there is none.
	Resume(ctx context.Context, now time.Time, rule, symbol, by string) ([]control.Pause, error)
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

// Account is one of the accounts a Server serves when the guard watches
// several (the configuration's accounts:).
type Account struct {
	// Name is the account's name, what ?account=NAME selects.
	Name     string
	Guard    Guard
	Controls Controls
	// Exchange may be nil (zeros).
	Exchange ExchangeStats
	// Cluster, under ha, is this process's role for the account; nil for
	// a guard alone.
	Cluster Cluster
}

// Options configure a Server. Guard (or Accounts), Controls and Metrics
// are required.
type Options struct {
	// Accounts, when not empty, are the accounts of a guard that watches
	// several: every read and control endpoint then takes ?account=NAME
	// (optional when there is one), /api/v1/accounts lists them, and
	// /healthz answers for all. Guard, Controls and Exchange are unused.
	Accounts []Account
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
	// accounts are the accounts served, in order; one without a name
	// when Options.Accounts is empty.
	accounts []Account
	token    string
	hosts    map[string]bool // AllowedHosts, normalized
	maxAge   time.Duration
	logger   *slog.Logger
	now      func() time.Time
	mux      *http.ServeMux
	// replays are the signed requests accepted lately (SignScheme).
	replays replays
}

// New checks opts and builds the server with its routes.
func New(opts Options) (*Server, error) {
	accounts := opts.Accounts
	if len(accounts) == 0 {
		accounts = []Account{{Guard: opts.Guard, Controls: opts.Controls, Exchange: opts.Exchange, Cluster: opts.Cluster}}
	}
	for _, a := range accounts {
		switch {
		case a.Guard == nil:
			return nil, errors.New("web: no guard")
		case a.Controls == nil:
			return nil, errors.New("web: no controls")
		case len(opts.Accounts) > 0 && a.Name == "":
			return nil, errors.New("web: an account without a name")
		}
	}
	switch {
	case opts.Metrics == nil:
		return nil, errors.New("web: no metrics handler")
	case opts.HealthMaxAge <= 0:
		return nil, fmt.Errorf("web: health max age must be positive, got %s", opts.HealthMaxAge)
	}
	s := &Server{accounts: accounts, token: opts.Token,
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
// only localhost, AllowedHosts and IP addresses are served: a name is
// needed to rebind, so an address as Host (127.0.0.1, [::1], the
// daemon's own 10.0.0.5 that a browser on the LAN or a probe sends) is no
// page's; the control API's token still guards what changes.
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
	// An address cannot be DNS-rebound (0.0.0.0 and :: are what the CLI
	// sends for such a listen).
	return net.ParseIP(host) != nil
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

// healthy reports whether the last complete snapshot of g is at most
// HealthMaxAge old at now, and its age.
func (s *Server) healthy(g Guard, now time.Time) (bool, time.Duration) {
	last := g.LastSuccess()
	if last.IsZero() {
		return false, 0
	}
	age := now.Sub(last)
	return age <= s.maxAge, age
}

// healthz is GET /healthz: 200 or 503 with the snapshot's age, then the
// calls in flight. It is open to all, for load balancers and systemd.
//
// With several accounts it is healthy when every account is, and says
// each account's line prefixed with its name: an account whose exchange
// does not answer is an account unguarded.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	var b strings.Builder
	all := true
	for _, a := range s.accounts {
		prefix := ""
		if a.Name != "" {
			prefix = "account " + a.Name + ": "
		}
		ok, age := s.healthy(a.Guard, now)
		all = all && ok
		switch {
		case a.Guard.LastSuccess().IsZero():
			// Never read is not "read 0s ago".
			fmt.Fprintf(&b, "%sunhealthy: no complete snapshot read yet\n", prefix)
		case !ok:
			fmt.Fprintf(&b, "%sunhealthy: last complete snapshot %s ago\n", prefix, age.Round(time.Millisecond))
		default:
			fmt.Fprintf(&b, "%sok: last complete snapshot %s ago\n", prefix, age.Round(time.Millisecond))
		}
		for _, c := range a.Guard.InFlight(now) {
			fmt.Fprintf(&b, "%sin flight for %s: %s\n", prefix, time.Duration(c.Running*float64(time.Second)).Round(time.Millisecond), c.Call)
		}
	}
	if !all {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	io.WriteString(w, b.String())
}

// lookup is the account a request names with ?account=NAME, or nil when
// it names none the server has; it answers nothing.
func (s *Server) lookup(r *http.Request) *Account {
	name := r.URL.Query().Get("account")
	if name == "" && len(s.accounts) == 1 {
		return &s.accounts[0]
	}
	for i := range s.accounts {
		if s.accounts[i].Name != "" && s.accounts[i].Name == name {
			return &s.accounts[i]
		}
	}
	return nil
}

// account is the account a request names with ?account=NAME: optional
// when the server has one, required with several. It answers the refusal
// itself (400 or 404, naming the accounts) and reports whether to go on.
func (s *Server) account(w http.ResponseWriter, r *http.Request) (*Account, bool) {
	if a := s.lookup(r); a != nil {
		return a, true
	}
	name := r.URL.Query().Get("account")
	if s.accounts[0].Name == "" {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no account %q: this guard has no accounts: section (one account, no name): leave the account out", name))
		return nil, false
	}
	names := make([]string, len(s.accounts))
	for i, a := range s.accounts {
		names[i] = a.Name
	}
	if name == "" {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("this guard watches several accounts: name one with ?account=NAME (the CLI's --account): %s", strings.Join(names, ", ")))
		return nil, false
	}
	writeError(w, http.StatusNotFound, fmt.Sprintf("no account %q: the accounts are %s (GET /api/v1/accounts lists them)", name, strings.Join(names, ", ")))
	return nil, false
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
