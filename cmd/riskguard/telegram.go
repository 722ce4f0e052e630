package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/engine/control"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/rules"
)

// telegramController is the running guard as the Telegram control steers
// it: the engine it reads, and the same control service as the control
// API, each change audited with its author.
type telegramController struct {
	e   *engine.Engine
	ctl *control.Service
	// fwd, under ha, sends a command the engine refused as a standby to
	// the account's leader (telegram_ha.go); nil without ha.
	fwd *forwarder
}

var _ notify.Controller = telegramController{}

// Status says the guard's state in a few lines.
func (c telegramController) Status(context.Context) string {
	st := c.e.Status(time.Now())
	var b strings.Builder
	switch {
	case st.SnapshotAge == nil:
		b.WriteString("riskguard: no complete snapshot yet")
	default:
		fmt.Fprintf(&b, "riskguard: last complete snapshot %s ago", time.Duration(*st.SnapshotAge*float64(time.Second)).Round(time.Second))
	}
	if st.LastError != "" {
		fmt.Fprintf(&b, " (last tick failed: %s)", st.LastError)
	}
	if st.DryRun {
		b.WriteString(", dry run")
	}
	if c.fwd != nil {
		if hs := c.fwd.seat.Status(); hs.Role != ha.RoleLeader {
			fmt.Fprintf(&b, "\nread by %s, a %s for this account (it evaluates the same rules); the leader is %s", hs.Host, hs.Role, cmp.Or(hs.Leader.Host, "not known yet"))
		}
	}
	if st.Breaker.Open {
		fmt.Fprintf(&b, "\ncircuit breaker OPEN until %s", st.Breaker.OpenUntil.UTC().Format(time.RFC3339))
	}
	for _, p := range st.Pauses {
		fmt.Fprintf(&b, "\nPAUSED (%s) by %s%s", p.Scope(), p.CreatedBy, endsAt(p.EndsAt))
	}
	for _, s := range st.Silences {
		fmt.Fprintf(&b, "\nsilenced %s by %s%s", s.Scope(), s.CreatedBy, endsAt(s.EndsAt))
	}
	for _, p := range st.Positions {
		dist := "no index"
		if p.Distance != nil {
			dist = fmt.Sprintf("%.2f%% from liquidation", *p.Distance*100)
		}
		fmt.Fprintf(&b, "\n%s %s %s %dx %s, %s", p.Symbol, p.Side, p.Size, p.Leverage, p.MarginMode, dist)
		for _, r := range p.Rules {
			if r.State != alert.Inactive.String() {
				fmt.Fprintf(&b, "\n  %s %s", r.Rule, r.State)
			}
		}
	}
	return b.String()
}

func endsAt(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " until " + t.UTC().Format(time.RFC3339)
}

// Pause stops every action for d (0: until resumed).
func (c telegramController) Pause(ctx context.Context, by string, d time.Duration) (string, error) {
	now := time.Now()
	p := control.Pause{CreatedBy: by, Comment: "from Telegram"}
	if d > 0 {
		p.EndsAt = now.Add(d)
	}
	via := ""
	asked := p
	p, err := c.ctl.Pause(ctx, now, asked)
	if c.standby(err) {
		var host string
		if p, host, err = c.fwd.pause(ctx, asked); err == nil {
			via = viaLeader(host)
		}
	}
	if err != nil {
		return "", err
	}
	text := fmt.Sprintf("Paused: no action is sent%s; the rules are still evaluated and what would be done is said (pause %s)%s.", orUntilResumed(p.EndsAt), p.ID, via)
	if len(p.InFlight) > 0 {
		text += " Sent before the pause and still running (they may still change the position): " + strings.Join(p.InFlight, "; ") + "."
	}
	return text, nil
}

func orUntilResumed(t time.Time) string {
	if t.IsZero() {
		return " until /resume"
	}
	return endsAt(t)
}

// Resume ends every pause.
func (c telegramController) Resume(ctx context.Context, by string) (string, error) {
	ended, err := c.ctl.Resume(ctx, time.Now(), "", "", by)
	if c.standby(err) {
		n, found, host, err := c.fwd.resume(ctx, by)
		switch {
		case err != nil:
			return "", err
		case !found:
			return "The guard was not paused" + viaLeader(host) + ".", nil
		}
		return fmt.Sprintf("Resumed: actions are sent again (%d pause(s) ended)%s.", n, viaLeader(host)), nil
	}
	if errors.Is(err, control.ErrNotFound) {
		return "The guard was not paused.", nil
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Resumed: actions are sent again (%d pause(s) ended).", len(ended)), nil
}

// Silence mutes a rule's or a symbol's notifications for d: target is a
// rule of the set or a symbol the exchange lists.
func (c telegramController) Silence(ctx context.Context, by, target string, d time.Duration) (string, error) {
	now := time.Now()
	s := control.Silence{CreatedBy: by, EndsAt: now.Add(d), Comment: "from Telegram"}
	var ruleNames []string
	for _, r := range c.e.Rules().Rules {
		ruleNames = append(ruleNames, r.Name)
	}
	symbols := append(c.e.ListedSymbols(), "account")
	is := func(k string) bool { return strings.EqualFold(k, target) } // the engine stores the guard's spelling
	switch {
	case slices.ContainsFunc(ruleNames, is):
		s.Rule = target
	case slices.ContainsFunc(symbols, is):
		s.Symbol = target
	default:
		msg := fmt.Sprintf("%q is neither a rule nor a symbol", target)
		if hint := rules.DidYouMean(target, append(ruleNames, symbols...)); hint != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", hint)
		}
		return "", errors.New(msg)
	}
	asked, via := s, ""
	s, err := c.ctl.AddSilence(ctx, now, asked)
	if c.standby(err) {
		var host string
		if s, host, err = c.fwd.silence(ctx, asked); err == nil {
			via = viaLeader(host)
		}
	}
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Silenced %s until %s (silence %s)%s.", s.Scope(), s.EndsAt.UTC().Format(time.RFC3339), s.ID, via), nil
}

// Ack acknowledges every firing alert: muted until it resolves.
func (c telegramController) Ack(ctx context.Context, by string) (string, error) {
	var done []string
	via := ""
	for _, a := range c.e.Active() {
		if a.State != alert.Firing {
			continue
		}
		_, err := c.ctl.Ack(ctx, time.Now(), a.Rule, a.Symbol, by, "from Telegram", time.Time{})
		if c.standby(err) {
			// This process's warm states say what fires; the leader
			// acknowledges what fires there too.
			var active bool
			var host string
			if active, host, err = c.fwd.ack(ctx, a.Rule, a.Symbol, by, "from Telegram"); err == nil && !active {
				continue
			}
			via = viaLeader(host)
		}
		if err != nil {
			return "", err
		}
		done = append(done, a.Rule+" on "+a.Symbol)
	}
	if len(done) == 0 {
		return "Nothing is firing" + via + ".", nil
	}
	return "Acknowledged until resolved: " + strings.Join(done, ", ") + via + ".", nil
}

// controls runs the Telegram control of every telegram channel with
// control_chat_ids; a reload starts them again with the new section. A
// zero controls runs them without the alarm (newControls adds it).
type controls struct {
	// failAfter is engine.control_fail_after: a control whose getUpdates
	// fails that long is notified through notifier (critically, and again
	// when it reads) and shows in failing{channel}.
	failAfter time.Duration
	notifier  journal.Notifier
	failing   *prometheus.GaugeVec

	// lead, under ha, says whether this process polls (it leads the
	// first account: telegram_ha.go); nil polls always.
	lead func() bool

	// op serialises start, stop and follow's changes.
	op sync.Mutex
	// want is what start was last given: the bots to run while lead
	// says so (follow starts and stops them); active: they were started.
	want   *controlsWant
	active bool

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// controlsWant is the controls' configuration as last started.
type controlsWant struct {
	ctx    context.Context
	ncfg   *notify.Config
	ctrl   notify.Controller
	logger *slog.Logger
}

// newControls builds the controls' set-up; its gauge
// riskguard_telegram_control_failing is registered in reg.
func newControls(failAfter time.Duration, notifier journal.Notifier, reg prometheus.Registerer) *controls {
	cs := &controls{failAfter: failAfter, notifier: notifier, failing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "riskguard_telegram_control_failing",
		Help: "1 while a Telegram control's getUpdates has been failing for engine.control_fail_after or longer.",
	}, []string{"channel"})}
	reg.MustRegister(cs.failing)
	return cs
}

// alarm is the control alarm of channel name: the gauge and a critical
// notification (info when it reads again).
func (cs *controls) alarm(name string) func(ctx context.Context, failing bool, text string) {
	return func(ctx context.Context, failing bool, text string) {
		m := notify.Message{Time: time.Now(), Kind: notify.KindControl, Severity: "info", Text: text}
		v := 0.0
		if failing {
			m.Severity, v = "critical", 1
		}
		if cs.failing != nil {
			cs.failing.WithLabelValues(name).Set(v)
		}
		if cs.notifier != nil {
			_ = cs.notifier.Send(context.WithoutCancel(ctx), m)
		}
	}
}

// start stops the running controls and starts those of ncfg (under ha,
// only while lead says this process polls; follow starts them later).
func (cs *controls) start(ctx context.Context, ncfg *notify.Config, ctrl notify.Controller, logger *slog.Logger) {
	cs.op.Lock()
	defer cs.op.Unlock()
	cs.halt()
	cs.want = &controlsWant{ctx: ctx, ncfg: ncfg, ctrl: ctrl, logger: logger}
	if cs.lead != nil && !cs.lead() {
		return
	}
	cs.run(ctx, ncfg, ctrl, logger)
}

// follow starts the controls while lead says this process polls, and
// stops them when it no longer does, looking every interval until ctx is
// done: one poller per bot over the cluster, replaced within a lease when
// it dies.
func (cs *controls) follow(ctx context.Context, every time.Duration) {
	if cs.lead == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cs.op.Lock()
		lead, want := cs.lead(), cs.want
		switch {
		case lead && !cs.active && want != nil:
			want.logger.Info("telegram control: this process leads the first account, so it polls the bots")
			cs.run(want.ctx, want.ncfg, want.ctrl, want.logger)
		case !lead && cs.active:
			want.logger.Info("telegram control: this process no longer leads the first account; its leader polls the bots")
			cs.halt()
		}
		cs.op.Unlock()
	}
}

// run starts the bots of ncfg. The caller holds op.
func (cs *controls) run(ctx context.Context, ncfg *notify.Config, ctrl notify.Controller, logger *slog.Logger) {
	cs.active = true
	if cs.failing != nil {
		cs.failing.Reset()
	}
	if ncfg == nil {
		return
	}
	var bots []*notify.TelegramControl
	for _, name := range ncfg.ChannelNames() {
		cc := ncfg.Channels[name]
		if len(cc.ControlChats) == 0 {
			continue
		}
		if cs.failing != nil {
			cs.failing.WithLabelValues(name).Set(0)
		}
		tc, err := notify.NewTelegramControl(cc, ctrl, notify.WithControlLogger(logger),
			notify.WithControlAlarm(cs.failAfter, cs.alarm(name)))
		if err != nil {
			logger.Error("telegram control not started", "channel", name, "err", err)
			continue
		}
		logger.Info("telegram control listening", "channel", name, "chats", len(cc.ControlChats))
		bots = append(bots, tc)
	}
	if len(bots) == 0 {
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, tc := range bots {
		wg.Go(func() { tc.Run(cctx) })
	}
	go func() { wg.Wait(); close(done) }()
	cs.mu.Lock()
	cs.cancel, cs.done = cancel, done
	cs.mu.Unlock()
}

// stop ends the running controls and waits for them; follow starts
// none until start is called again.
func (cs *controls) stop() {
	cs.op.Lock()
	defer cs.op.Unlock()
	cs.want = nil
	cs.halt()
}

// halt ends the running controls and waits for them. The caller holds
// op.
func (cs *controls) halt() {
	cs.active = false
	cs.mu.Lock()
	cancel, done := cs.cancel, cs.done
	cs.cancel, cs.done = nil, nil
	cs.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}
