package web

import (
	_ "embed"
	"io"
	"net/http"

	"github.com/riskguard/riskguard/engine"
)

// statusPage is the status page: one self-contained file (no external
// asset, no build step) that fetches /api/v1/status every few seconds. A
// string, so that nothing can change it.
//
//go:embed status.html
var statusPage string

// statusResponse is GET /api/v1/status: the engine's Status, whether the
// daemon is healthy (as /healthz says), and the exchange client's figures.
type statusResponse struct {
	*engine.Status
	Healthy  bool           `json:"healthy"`
	Exchange ExchangeStatus `json:"exchange"`
	// Control says whether the mutating endpoints are enabled (a token is
	// configured); never the token.
	Control bool `json:"controlEnabled"`
	// HA is this process's role among several (ha:); absent for one.
	HA *ClusterStatus `json:"ha,omitempty"`
}

// Cluster is the guard's place among several processes (ha:); nil for a
// guard alone.
type Cluster interface {
	// ClusterStatus is the status API's ha part.
	ClusterStatus() ClusterStatus
}

// ClusterStatus is the role of this process for its account.
type ClusterStatus struct {
	Account string `json:"account"`
	// Role is leader or standby.
	Role string `json:"role"`
	Host string `json:"host"`
	// Term is the leadership term (the leader key's etcd revision).
	Term int64 `json:"term"`
	// LeaseAgeSeconds is the age of the last renewal etcd acknowledged.
	LeaseAgeSeconds float64 `json:"leaseAgeSeconds"`
	// Leader and LeaderAddress are the leader as last observed.
	Leader        string   `json:"leader"`
	LeaderAddress string   `json:"leaderAddress,omitempty"`
	Members       []string `json:"members"`
	EtcdUp        bool     `json:"etcdUp"`
}

// statusRoutes registers the status page and the read endpoints.
func (s *Server) statusRoutes() {
	s.mux.HandleFunc("GET /{$}", s.open(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
		io.WriteString(w, statusPage)
	}))
	s.mux.HandleFunc("GET /api/v1/status", s.open(func(w http.ResponseWriter, r *http.Request) {
		now := s.now()
		healthy, _ := s.healthy(now)
		var ex ExchangeStatus
		if s.exchange != nil {
			ex = s.exchange.Snapshot()
		}
		resp := statusResponse{Status: s.guard.Status(now), Healthy: healthy, Exchange: ex, Control: s.token != ""}
		if s.cluster != nil {
			cs := s.cluster.ClusterStatus()
			resp.HA = &cs
		}
		if err := writeJSON(w, http.StatusOK, resp); err != nil {
			s.logger.Error("GET /api/v1/status failed", "err", err)
		}
	}))
	s.mux.HandleFunc("GET /api/v1/silences", s.open(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(s.controls.Silences(s.now())))
	}))
	s.mux.HandleFunc("GET /api/v1/pauses", s.open(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, nonNil(s.controls.Pauses(s.now())))
	}))
}
