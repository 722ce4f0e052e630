package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// flakyWriter is an audit log's writer that fails one write in three while
// failing is set, so that the audit log keeps flipping between failing (a
// record kept) and working (the kept record written with the next one).
// It keeps what it was given.
type flakyWriter struct {
	mu      sync.Mutex
	n       int
	failing bool
	buf     bytes.Buffer
}

var errFlaky = errors.New("flaky audit disk")

func (w *flakyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.failing && w.n%3 == 0 {
		return 0, errFlaky
	}
	return w.buf.Write(p)
}

func (w *flakyWriter) heal() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failing = false
}

// records parses what the writer was given: whole records, one a line.
func (w *flakyWriter) records(t *testing.T) []journal.Record {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []journal.Record
	sc := bufio.NewScanner(bytes.NewReader(w.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r journal.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit line %q is not one record: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// raceRules is the rule set the reloads parse again and again: threshold
// alternates, so that every other reload changes eth-near's fingerprint and
// restarts its state.
func raceRules(threshold string) (*rules.Set, error) {
	return rules.Parse("rules.yaml", []byte(`rules:
  - name: eth-near
    when: liquidationDistance < `+threshold+`
    symbols: [XETH]
    cooldown: 1s
    actions:
      - action: cancel_orders
  - name: sol-over-max
    when: position.leverage > riskLimit.maxLeverage
    symbols: [XSOL]
    cooldown: 1s
    allow_closer_liquidation: true
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
`))
}

// The engine's methods are safe for concurrent use (its doc says so): the
// control API (silences, pauses, acknowledgements), reloads, the audit log's
// reopening and the status page run while ticks do, as the daemon's HTTP
// handlers and SIGHUP do. Every one of them writes audit records, and the
// audit log here fails one write in three, so its failing/working state is
// flipped from all of them at once. Under -race nothing may be reported;
// afterwards every record made it to the writer exactly once, the failure
// and the recovery were notified, and Status agrees with what the control
// calls left.
//
// On 416ba0c `go test -race` fails: (*Engine).audited reads and writes
// e.auditFailing without a lock, from the tick and from AddSilence, Pause,
// Resume, ExpireSilence and ReopenAudit outside it ("WARNING: DATA RACE").
func TestConcurrentControlReloadAndTicks(t *testing.T) {
	t.Parallel()
	const (
		ticks    = 200
		controls = 150
		reloads  = 150
		reads    = 300
	)
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	// XETH alternates between 3% from its liquidation price (eth-near
	// fires and cancels) and 5.4% (it resolves): every tick has records.
	xeth, ok := ex.Position("XETH")
	if !ok {
		t.Fatal("scenario changed: no XETH position")
	}
	near := xeth.LiquidationPrice.Div(decimal.NewFromFloat(1.03)).Round(2)
	far, _ := ex.IndexPrice("ETH")

	w := &flakyWriter{failing: true}
	audit := journal.NewAudit(w)
	n := &notes{}
	local := ex.Local()
	set, err := raceRules("0.05")
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Interval: time.Second}, set, engine.Deps{
		Reader: local, Actuator: local, Notifier: n, Audit: audit,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := time.Now()
	tickAt := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }

	var (
		wg                                sync.WaitGroup
		added, expired, paused, resumed   int // by the control goroutine
		lastSet                           *rules.Set
		controlErrs, reloadErrs, tickErrs []error
	)
	wg.Go(func() { // the loop
		for i := range ticks {
			if i%2 == 0 {
				ex.SetIndexPrice("ETH", near)
			} else {
				ex.SetIndexPrice("ETH", far)
			}
			if _, err := e.Tick(ctx, tickAt(i)); err != nil {
				tickErrs = append(tickErrs, err)
			}
		}
	})
	wg.Go(func() { // the control API
		fail := func(err error) { controlErrs = append(controlErrs, err) }
		for i := range controls {
			now := base.Add(time.Duration(i) * time.Millisecond)
			s, err := e.Control().AddSilence(ctx, now, control.Silence{Rule: "eth-near", EndsAt: now.Add(time.Hour), CreatedBy: "ctl"})
			if err != nil {
				fail(fmt.Errorf("add silence: %w", err))
				continue
			}
			added++
			p, err := e.Control().Pause(ctx, now, control.Pause{Rule: "sol-over-max", CreatedBy: "ctl", Comment: "race"})
			if err != nil {
				fail(fmt.Errorf("pause: %w", err))
			} else {
				paused++
			}
			// The alert may be active or not at this moment: both answers
			// are fine, and an acknowledgement may end by itself.
			if a, err := e.Control().Ack(ctx, now, "eth-near", "XETH", "ctl-ack", "", time.Time{}); err == nil {
				if err := e.Control().ExpireSilence(ctx, now, a.ID, "ctl-ack"); err != nil && !errors.Is(err, control.ErrNotFound) {
					fail(fmt.Errorf("expire ack: %w", err))
				}
			} else if !errors.Is(err, control.ErrNotActive) {
				fail(fmt.Errorf("ack: %w", err))
			}
			if err := e.Control().ExpireSilence(ctx, now, s.ID, "ctl-expire"); err != nil {
				fail(fmt.Errorf("expire silence: %w", err))
			} else {
				expired++
			}
			if p.ID != "" {
				if ended, err := e.Control().Resume(ctx, now, p.Rule, p.Symbol, "ctl-resume"); err != nil {
					fail(fmt.Errorf("resume: %w", err))
				} else {
					resumed += len(ended)
				}
			}
		}
	})
	wg.Go(func() { // SIGHUP: reload and reopen the audit log
		for i := range reloads {
			now := base.Add(time.Duration(i) * time.Millisecond)
			set, err := raceRules([]string{"0.05", "0.06"}[i%2])
			if err != nil {
				reloadErrs = append(reloadErrs, err)
				return
			}
			if i%3 == 0 {
				cfg := engine.DefaultConfig()
				cfg.Interval = time.Second
				cfg.ActionTimeout = time.Duration(5+i%5) * time.Second
				e.Reconfigure(now, set, cfg)
			} else {
				e.Update(now, set)
			}
			lastSet = set
			if err := e.ReopenAudit(ctx, now); err != nil {
				reloadErrs = append(reloadErrs, err)
			}
		}
	})
	wg.Go(func() { // the status page
		for i := range reads {
			st := e.Status(base.Add(time.Duration(i) * time.Millisecond))
			_ = e.Active()
			_ = e.Rules()
			_ = e.LastSuccess()
			if st == nil || st.Silences == nil || st.Pauses == nil {
				t.Error("Status left its lists nil")
				return
			}
		}
	})
	wg.Wait()

	for _, err := range append(controlErrs, reloadErrs...) {
		t.Error(err)
	}
	for _, err := range tickErrs {
		t.Errorf("tick: %v", err)
	}

	// One more tick with a working disk writes what was kept and applies
	// the last reload if a tick held it back.
	w.heal()
	if _, err := e.Tick(ctx, tickAt(ticks)); err != nil {
		t.Fatalf("last tick: %v", err)
	}
	if n := audit.Backlog(); n != 0 {
		t.Errorf("%d audit records still kept after a tick with a working disk", n)
	}
	if e.Rules() != lastSet {
		t.Error("the rule set in force is not the last one reloaded")
	}

	// Every record reached the writer once: as many control records as
	// successful calls, and the ticks' and reloads' records too.
	count := map[string]int{}
	for _, r := range w.records(t) {
		count[r.Type+" "+r.To+" "+r.By]++
		count[r.Type]++
	}
	for _, c := range []struct {
		key  string
		want int
	}{
		{"silence added ctl", added},
		{"silence expired ctl-expire", expired},
		{"pause paused ctl", paused},
		{"pause resumed ctl-resume", resumed},
	} {
		if got := count[c.key]; got != c.want {
			t.Errorf("%d %q records in the audit log, want %d (one per call)", got, c.key, c.want)
		}
	}
	if added != controls || paused != controls || resumed != controls || expired != controls {
		t.Errorf("control calls: %d silences added, %d expired, %d pauses, %d resumed; want %d each", added, expired, paused, resumed, controls)
	}
	for _, typ := range []string{"transition", "action", "reload"} {
		if count[typ] == 0 {
			t.Errorf("no %q record in the audit log", typ)
		}
	}

	// The failing audit log was said, and so was its recovery.
	var failed, again int
	for _, m := range n.all() {
		if m.Kind != notify.KindAudit {
			continue
		}
		switch {
		case strings.Contains(m.Text, "cannot be written"):
			failed++
		case strings.Contains(m.Text, "writes again"):
			again++
		}
	}
	if failed == 0 || again == 0 {
		t.Errorf("audit notifications: %d failures, %d recoveries; want both", failed, again)
	}

	// Status agrees with what the calls left: no silence, no pause; the
	// positions carry the rules of the set in force.
	st := e.Status(tickAt(ticks))
	if len(st.Silences) != 0 || len(st.Pauses) != 0 {
		t.Errorf("Status: %d silences, %d pauses left; want none", len(st.Silences), len(st.Pauses))
	}
	if !st.LastTick.Equal(tickAt(ticks)) || st.LastError != "" {
		t.Errorf("Status: last tick %s (error %q), want %s", st.LastTick, st.LastError, tickAt(ticks))
	}
	names := map[string]bool{}
	for _, r := range lastSet.Rules {
		names[r.Name] = true
	}
	var rulesShown int
	for _, p := range st.Positions {
		for _, r := range p.Rules {
			rulesShown++
			if !names[r.Rule] {
				t.Errorf("Status shows rule %q on %s, not in the set in force", r.Rule, p.Symbol)
			}
		}
	}
	if rulesShown != len(lastSet.Rules) {
		t.Errorf("Status shows %d rule states, want %d (eth-near on XETH, sol-over-max on XSOL)", rulesShown, len(lastSet.Rules))
	}
}
