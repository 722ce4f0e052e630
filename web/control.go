package web

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/control"
)

// errNoToken is what a mutating call gets when no control token is set.
const errNoToken = "the control API is disabled: no control token is configured (set RISKGUARD_CONTROL_TOKEN or engine.control_token_file and restart)"

// tokenOK compares the request's bearer token with the configured one in
// constant time (both hashed first, so their lengths do not show either).
func (s *Server) tokenOK(r *http.Request) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || got == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(s.token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// authorized answers 403 when no token is configured and 401 for a missing
// or wrong one; it reports whether the call may go on.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.token == "" {
		writeError(w, http.StatusForbidden, errNoToken)
		return false
	}
	if !s.tokenOK(r) && !s.signedOK(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="riskguard"`)
		writeError(w, http.StatusUnauthorized, "missing or wrong bearer token (Authorization: Bearer …)")
		return false
	}
	return true
}

// open serves a read endpoint: open to loopback clients, and to others
// with the token only (a listener beyond loopback is warned about).
func (s *Server) open(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() || s.authorized(w, r) {
			h(w, r)
		}
	}
}

// mutating serves a control endpoint: the token always.
func (s *Server) mutating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r) {
			return
		}
		// A standby's silences and pauses would be lost at the next
		// takeover and never reach the leader: it says where to go.
		if a := s.lookup(r); a != nil && a.Cluster != nil {
			// A leader handing the account over still takes them: it
			// writes them to etcd, fenced on its key, for the next leader.
			if cs := a.Cluster.ClusterStatus(); cs.Role != "leader" && cs.Role != "handing-over" {
				writeJSON(w, http.StatusMisdirectedRequest, map[string]string{
					"error":         fmt.Sprintf("this process (%s) is a standby for account %s: send it to the leader, %s", cs.Host, cs.Account, cmp.Or(cs.LeaderAddress, cs.Leader, "not known yet")),
					"leader":        cs.Leader,
					"leaderAddress": cs.LeaderAddress,
				})
				return
			}
		}
		h(w, r)
	}
}

// ControlRequest is the body of the mutating endpoints (POST
// /api/v1/silences, /pause, /resume, /ack); each uses the fields it needs.
// CreatedBy names the author, audited with the change.
type ControlRequest struct {
	Rule     string `json:"rule,omitempty"`
	Symbol   string `json:"symbol,omitempty"`
	Severity string `json:"severity,omitempty"`
	// StartsAt and EndsAt bound a silence; Duration ("2h") is the
	// alternative to EndsAt, from now (or StartsAt).
	StartsAt  time.Time `json:"startsAt,omitzero"`
	EndsAt    time.Time `json:"endsAt,omitzero"`
	Duration  string    `json:"duration,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	CreatedBy string    `json:"createdBy"`
	// AllowUnknown accepts a rule or a symbol the guard does not know (a
	// symbol not open yet): without it such a name is refused with 400 and
	// the closest known name.
	AllowUnknown bool `json:"allowUnknown,omitempty"`
}

// decode reads a control request: JSON, at most 64 KiB, no unknown field,
// an author; with a duration turned into EndsAt.
// liquidationAcker is a Guard that keeps the liquidations it saw marked
// until acknowledged (the engine).
type liquidationAcker interface {
	AckLiquidation(ctx context.Context, now time.Time, symbol, by string) (int, error)
}

func decode(w http.ResponseWriter, r *http.Request, now time.Time) (*ControlRequest, bool) {
	var req ControlRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return nil, false
	}
	if strings.TrimSpace(req.CreatedBy) == "" {
		writeError(w, http.StatusBadRequest, "createdBy is required: who makes the change (the CLI's --by)")
		return nil, false
	}
	if req.Duration != "" {
		d, err := time.ParseDuration(req.Duration)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("duration %q: want a positive Go duration like 90m or 2h", req.Duration))
			return nil, false
		}
		from := now
		if !req.StartsAt.IsZero() {
			from = req.StartsAt
		}
		if d > control.MaxDuration {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("duration %q: at most %s (90 days)", req.Duration, control.MaxDuration))
			return nil, false
		}
		req.EndsAt = from.Add(d)
	}
	return &req, true
}

// controlRequest is what every mutating endpoint starts with: the account
// it names, the time, and the request body decoded; ok is false once an
// error was answered.
func (s *Server) controlRequest(w http.ResponseWriter, r *http.Request) (*Account, time.Time, *ControlRequest, bool) {
	a, ok := s.account(w, r)
	if !ok {
		return nil, time.Time{}, nil, false
	}
	now := s.now()
	req, ok := decode(w, r, now)
	return a, now, req, ok
}

// controlRoutes registers the mutating endpoints.
func (s *Server) controlRoutes() {
	s.mux.HandleFunc("POST /api/v1/silences", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		a, now, req, ok := s.controlRequest(w, r)
		if !ok {
			return
		}
		sil, err := a.Controls.AddSilence(r.Context(), now, control.Silence{Rule: req.Rule, Symbol: req.Symbol, Severity: req.Severity,
			StartsAt: req.StartsAt, EndsAt: req.EndsAt, Comment: req.Comment, CreatedBy: req.CreatedBy, AllowUnknown: req.AllowUnknown})
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, sil)
	}))
	s.mux.HandleFunc("DELETE /api/v1/silences/{id}", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		a, ok := s.account(w, r)
		if !ok {
			return
		}
		by := r.URL.Query().Get("createdBy")
		if strings.TrimSpace(by) == "" {
			writeError(w, http.StatusBadRequest, "createdBy is required (a query parameter): who expires the silence")
			return
		}
		err := a.Controls.ExpireSilence(r.Context(), s.now(), r.PathValue("id"), by)
		switch {
		case errors.Is(err, control.ErrNotFound):
			writeError(w, http.StatusNotFound, err.Error())
		case err != nil:
			writeError(w, http.StatusBadRequest, err.Error())
		default:
			writeJSON(w, http.StatusOK, map[string]string{"expired": r.PathValue("id")})
		}
	}))
	s.mux.HandleFunc("POST /api/v1/pause", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		a, now, req, ok := s.controlRequest(w, r)
		if !ok {
			return
		}
		p, err := a.Controls.Pause(r.Context(), now, control.Pause{Rule: req.Rule, Symbol: req.Symbol, EndsAt: req.EndsAt, Comment: req.Comment, CreatedBy: req.CreatedBy, AllowUnknown: req.AllowUnknown})
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, p)
	}))
	s.mux.HandleFunc("POST /api/v1/resume", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		a, ok := s.account(w, r)
		if !ok {
			return
		}
		req, ok := decode(w, r, s.now())
		if !ok {
			return
		}
		ended, err := a.Controls.Resume(r.Context(), s.now(), req.Rule, req.Symbol, req.CreatedBy)
		if errors.Is(err, control.ErrNotFound) {
			writeError(w, http.StatusNotFound, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, map[string][]control.Pause{"resumed": ended})
	}))
	s.mux.HandleFunc("POST /api/v1/liquidations/ack", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		a, now, req, ok := s.controlRequest(w, r)
		if !ok {
			return
		}
		acker, can := a.Guard.(liquidationAcker)
		if !can {
			writeError(w, http.StatusNotFound, "this guard keeps no liquidations")
			return
		}
		n, err := acker.AckLiquidation(r.Context(), now, req.Symbol, req.CreatedBy)
		switch {
		case errors.Is(err, engine.ErrNoLiquidation):
			writeError(w, http.StatusNotFound, err.Error())
		case err != nil:
			writeError(w, http.StatusBadRequest, err.Error())
		default:
			writeJSON(w, http.StatusOK, map[string]int{"acknowledged": n})
		}
	}))
	s.mux.HandleFunc("POST /api/v1/ack", s.mutating(func(w http.ResponseWriter, r *http.Request) {
		a, now, req, ok := s.controlRequest(w, r)
		if !ok {
			return
		}
		sil, err := a.Controls.Ack(r.Context(), now, req.Rule, req.Symbol, req.CreatedBy, req.Comment, req.EndsAt)
		switch {
		case errors.Is(err, control.ErrUnknownName):
			writeError(w, http.StatusBadRequest, err.Error())
		case errors.Is(err, control.ErrNotActive):
			writeError(w, http.StatusConflict, err.Error())
		case err != nil:
			writeError(w, http.StatusBadRequest, err.Error())
		default:
			writeJSON(w, http.StatusCreated, sil)
		}
	}))
}
