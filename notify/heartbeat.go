package notify

import (
	"context"
	"io"
	"net/http"
	"sync"

	"github.com/riskguard/riskguard/internal/nextstep"
)

// heartbeat pings a dead man's switch (healthchecks.io's convention: GET the
// URL after a healthy tick, URL+"/fail" after a failed one). Only the latest
// tick's result waits to be sent: a slow endpoint costs pings, not memory.
type heartbeat struct {
	url    string
	slot   chan bool // cap 1: the latest result not yet sent
	redact redactor

	mu                   sync.Mutex
	sent, failed, missed uint64
}

// HeartbeatStats counts the heartbeat's pings.
type HeartbeatStats struct {
	Sent   uint64 // answered with a 2xx
	Failed uint64 // not answered, or not with a 2xx
	Missed uint64 // replaced by a newer result before being sent
}

// Heartbeat records a tick's health for the dead man's switch; the ping is
// sent in the background, and a newer call replaces one not yet sent. It
// does nothing when no heartbeat URL is configured.
func (d *Dispatcher) Heartbeat(ok bool) {
	if d.hb == nil {
		return
	}
	for range 2 {
		select {
		case d.hb.slot <- ok:
			return
		default:
		}
		select {
		case <-d.hb.slot:
			d.hb.mu.Lock()
			d.hb.missed++
			d.hb.mu.Unlock()
		default:
		}
	}
}

// HeartbeatStats returns the heartbeat's counters; zero without a URL.
func (d *Dispatcher) HeartbeatStats() HeartbeatStats {
	if d.hb == nil {
		return HeartbeatStats{}
	}
	d.hb.mu.Lock()
	defer d.hb.mu.Unlock()
	return HeartbeatStats{Sent: d.hb.sent, Failed: d.hb.failed, Missed: d.hb.missed}
}

func (d *Dispatcher) heartbeatLoop(ctx context.Context) {
	for {
		select {
		case <-d.stop:
			return
		case ok := <-d.hb.slot:
			err := d.ping(ctx, ok)
			d.hb.mu.Lock()
			if err != nil {
				d.hb.failed++
			} else {
				d.hb.sent++
			}
			d.hb.mu.Unlock()
			if err != nil {
				d.opts.logger.Warn("heartbeat ping failed", "err", err)
			}
		}
	}
}

func (d *Dispatcher) ping(ctx context.Context, ok bool) error {
	u := d.hb.url
	if !ok {
		u += "/fail"
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return &DeliveryError{Permanent: true, Msg: d.hb.redact.apply(err.Error())}
	}
	req.Header.Set("User-Agent", "riskguard")
	resp, err := d.opts.hc.Do(req)
	if err != nil {
		return d.hb.redact.transportError(err, nextstep.Target{Name: "the heartbeat", Setting: "notify.heartbeat_url", URL: d.hb.url, Timeout: "raise notify.timeout"})
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode/100 != 2 {
		return &DeliveryError{Status: resp.StatusCode, Msg: http.StatusText(resp.StatusCode)}
	}
	return nil
}
