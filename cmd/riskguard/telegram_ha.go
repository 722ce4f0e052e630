package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/web"
)

// Telegram in a cluster (docs/ha.md): Telegram lets one getUpdates poller
// per bot at a time (a second one gets 409 Conflict), so with the same
// configuration on every host only the leader of the first account polls
// (controls.lead); a command for an account this process does not lead is
// forwarded to that account's leader's control API (forwarder).

// telegramFollowEvery is how often a process looks whether it should poll
// the bots: a dead poller is replaced within the lease and this.
const telegramFollowEvery = 250 * time.Millisecond

// forwarder sends a Telegram command that the engine refused as a standby
// to the account's leader, through its control API: the address in the
// leader's election value, signed with the same control token (the token
// itself is never sent).
type forwarder struct {
	seat *ha.Seat
	// account is the ?account= of the request: "" for a configuration
	// without accounts:.
	account string
	token   string
	client  *http.Client
}

// errForward is the error of a command the leader could not be sent, or
// refused; it says why and where the leader is.
var errForward = errors.New("not sent to the leader")

// newForwarder is the forwarder of an account's guard; nil without ha.
func newForwarder(g *guard) *forwarder {
	if g.ha == nil {
		return nil
	}
	return &forwarder{seat: g.ha.seat, account: g.name, token: g.controlToken, client: &http.Client{Timeout: 10 * time.Second}}
}

// leader is the base URL of the account's leader's control API: the
// address of a live member whose lease holds the leader key (ha.Seat's
// LiveLeader), never merely what a value in etcd says. An advertised
// address written as https://host:port is reached over TLS.
func (f *forwarder) leader(ctx context.Context) (string, string, error) {
	cur, mine := f.seat.Leader()
	switch {
	case mine:
		return "", "", fmt.Errorf("%w: this process leads the account but may not act now (its lease is lapsing, or it hands the account over); try again in a few seconds", errForward)
	case cur.Host == "":
		return "", "", fmt.Errorf("%w: no leader of account %s seen yet", errForward, f.seat.Account())
	case cur.Advertise == "":
		return "", "", fmt.Errorf("%w: account %s is led by %s, which advertises no control API address (ha.advertise)", errForward, f.seat.Account(), cur.Host)
	case f.token == "":
		return "", "", fmt.Errorf("%w: account %s is led by %s (%s); this process has no control token to reach it: make the change there", errForward, f.seat.Account(), cur.Host, controlBase(cur.Advertise))
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	live, err := f.seat.LiveLeader(lctx)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%w: %v: the command is not forwarded; make the change on the leader, and check who wrote the key (riskguard ha status)", errForward, err)
	case live.Host != cur.Host || live.Advertise != cur.Advertise:
		return "", "", fmt.Errorf("%w: the leader of account %s changed while the command was on its way; try again in a few seconds", errForward, f.seat.Account())
	}
	return controlBase(live.Advertise), live.Host, nil
}

// controlBase is the base URL of an advertised control address: as
// written when it has a scheme (https://host:port reaches a TLS listener
// or a proxy in front of one), else plain http://.
func controlBase(advertise string) string {
	if strings.HasPrefix(advertise, "https://") || strings.HasPrefix(advertise, "http://") {
		return strings.TrimSuffix(advertise, "/")
	}
	return "http://" + advertise
}

// post sends req to the leader's path and decodes a 2xx answer into out.
// It returns the status and the leader's name.
func (f *forwarder) post(ctx context.Context, path string, req web.ControlRequest, out any) (int, string, error) {
	base, host, err := f.leader(ctx)
	if err != nil {
		return 0, "", err
	}
	u := base + path
	if f.account != "" {
		u += "?account=" + url.QueryEscape(f.account)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, host, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, host, err
	}
	// The command is signed with the token, never carries it: the address
	// came from a value in etcd, which others may write (web.SignScheme).
	web.SignRequest(hr, body, f.token, time.Now())
	hr.Header.Set("Content-Type", "application/json")
	resp, err := f.client.Do(hr)
	if err != nil {
		// The leader may have made the change and the answer been lost.
		return 0, host, fmt.Errorf("%w: the leader %s (%s) did not answer (%v); see /status before trying again", errForward, host, base, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		json.Unmarshal(data, &e) //nolint:errcheck // an answer without error says its status alone
		if e.Error == "" {
			e.Error = http.StatusText(resp.StatusCode)
		}
		return resp.StatusCode, host, fmt.Errorf("%w: the leader %s answered %d: %s", errForward, host, resp.StatusCode, e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, host, fmt.Errorf("%w: the leader %s's answer: %v", errForward, host, err)
		}
	}
	return resp.StatusCode, host, nil
}

// pause forwards a pause.
func (f *forwarder) pause(ctx context.Context, p control.Pause) (control.Pause, string, error) {
	var out control.Pause
	_, host, err := f.post(ctx, "/api/v1/pause", web.ControlRequest{Rule: p.Rule, Symbol: p.Symbol, EndsAt: p.EndsAt, Comment: p.Comment, CreatedBy: p.CreatedBy}, &out)
	return out, host, err
}

// resume forwards a resume; found is false when the leader had no pause.
func (f *forwarder) resume(ctx context.Context, by string) (ended int, found bool, host string, err error) {
	var out struct{ Resumed []control.Pause }
	status, host, err := f.post(ctx, "/api/v1/resume", web.ControlRequest{CreatedBy: by}, &out)
	if status == http.StatusNotFound {
		return 0, false, host, nil
	}
	return len(out.Resumed), err == nil, host, err
}

// silence forwards a silence.
func (f *forwarder) silence(ctx context.Context, s control.Silence) (control.Silence, string, error) {
	var out control.Silence
	_, host, err := f.post(ctx, "/api/v1/silences", web.ControlRequest{Rule: s.Rule, Symbol: s.Symbol, EndsAt: s.EndsAt, Comment: s.Comment, CreatedBy: s.CreatedBy}, &out)
	return out, host, err
}

// ack forwards the acknowledgement of rule on symbol; active is false
// when the leader has no such firing alert.
func (f *forwarder) ack(ctx context.Context, rule, symbol, by, comment string) (active bool, host string, err error) {
	status, host, err := f.post(ctx, "/api/v1/ack", web.ControlRequest{Rule: rule, Symbol: symbol, CreatedBy: by, Comment: comment}, nil)
	if status == http.StatusConflict {
		return false, host, nil
	}
	return err == nil, host, err
}

// standby reports whether err is the engine's refusal on a standby, which
// a forwarder may send on.
func (c telegramController) standby(err error) bool {
	return c.fwd != nil && errors.Is(err, engine.ErrStandby)
}

// viaLeader is the note an answer of a forwarded command ends with.
func viaLeader(host string) string { return fmt.Sprintf(" (sent to the leader, %s)", host) }
