package web

import (
	_ "embed"
	"io"
	"net/http"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/alert"
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
	// Role is leader, handing-over (still holds the leader key, sends no
	// call: the accounts are spread anew) or standby.
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

// AccountSummary is one row of GET /api/v1/accounts: an account of a
// guard that watches several, as the status page lists them. The list is
// empty for a configuration without accounts:.
type AccountSummary struct {
	Name        string    `json:"name"`
	Healthy     bool      `json:"healthy"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	Positions   int       `json:"positions"`
	// Firing counts the rule states firing on its positions.
	Firing int  `json:"firing"`
	Paused bool `json:"paused"`
	DryRun bool `json:"dryRun"`
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
		a, ok := s.account(w, r)
		if !ok {
			return
		}
		now := s.now()
		healthy, _ := s.healthy(a.Guard, now)
		var ex ExchangeStatus
		if a.Exchange != nil {
			ex = a.Exchange.Snapshot()
		}
		resp := statusResponse{Status: a.Guard.Status(now), Healthy: healthy, Exchange: ex, Control: s.token != ""}
		if a.Cluster != nil {
			cs := a.Cluster.ClusterStatus()
			resp.HA = &cs
		}
		if err := writeJSON(w, http.StatusOK, resp); err != nil {
			s.logger.Error("GET /api/v1/status failed", "err", err)
		}
	}))
	s.mux.HandleFunc("GET /api/v1/accounts", s.open(func(w http.ResponseWriter, r *http.Request) {
		now := s.now()
		out := []AccountSummary{}
		for _, a := range s.accounts {
			if a.Name == "" {
				break // no accounts: section: an empty list
			}
			healthy, _ := s.healthy(a.Guard, now)
			st := a.Guard.Status(now)
			sum := AccountSummary{Name: a.Name, Healthy: healthy, LastSuccess: a.Guard.LastSuccess(), Paused: len(st.Pauses) > 0, DryRun: st.DryRun}
			for _, p := range st.Positions {
				for _, rs := range p.Rules {
					if rs.State == alert.Firing.String() {
						sum.Firing++
					}
				}
			}
			sum.Positions = len(st.Positions)
			out = append(out, sum)
		}
		writeJSON(w, http.StatusOK, out)
	}))
	s.mux.HandleFunc("GET /api/v1/silences", s.open(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := s.account(w, r); ok {
			writeJSON(w, http.StatusOK, nonNil(a.Controls.Silences(s.now())))
		}
	}))
	s.mux.HandleFunc("GET /api/v1/pauses", s.open(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := s.account(w, r); ok {
			writeJSON(w, http.StatusOK, nonNil(a.Controls.Pauses(s.now())))
		}
	}))
}
