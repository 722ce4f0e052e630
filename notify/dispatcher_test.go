package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// recorder is a Sender that records what it is given; fail, when set,
// decides the outcome of the nth call (from 1).
type recorder struct {
	got  chan Message
	fail func(n int) error
	n    atomic.Int64
}

func newRecorder() *recorder { return &recorder{got: make(chan Message, 10000)} }

func (r *recorder) Send(ctx context.Context, m Message) error {
	n := int(r.n.Add(1))
	if r.fail != nil {
		if err := r.fail(n); err != nil {
			return err
		}
	}
	r.got <- m
	return nil
}

// hang is a dead channel: it answers only when given up on.
type hang struct{ entered chan struct{} }

func (h *hang) Send(ctx context.Context, m Message) error {
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return &DeliveryError{Msg: "timed out", Err: ctx.Err()}
}

// logConfig is a configuration of log channels by name, to be given
// senders with WithSenders.
func logConfig(groupWait time.Duration, names ...string) *Config {
	cfg := &Config{Channels: map[string]ChannelConfig{}, GroupWait: groupWait, RepeatInterval: 4 * time.Hour,
		QueueSize: 100, Timeout: 5 * time.Second, MaxAttempts: 4}
	for _, n := range names {
		cfg.Channels[n] = ChannelConfig{Name: n, Type: TypeLog}
	}
	return cfg
}

func newTestDispatcher(t testing.TB, cfg *Config, opts ...Option) *Dispatcher {
	t.Helper()
	d, err := NewDispatcher(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = d.Close(ctx)
	})
	return d
}

// queued takes what waits in a channel's queue, without delivering it.
func queued(d *Dispatcher, name string) []Message {
	var out []Message
	for range 100000 {
		m, ok := d.chans[name].pop()
		if !ok {
			break
		}
		out = append(out, m)
	}
	return out
}

func receive(t *testing.T, ch <-chan Message) Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no message delivered within 5s")
	}
	return Message{}
}

func ruleMsg(kind Kind, rule, sym, text string) Message {
	return Message{Kind: kind, Severity: "critical", Rule: rule, Symbol: sym, Text: text}
}

func TestOneMessagePerChannelPerEvent(t *testing.T) {
	t.Parallel()
	type service struct {
		typ    string
		answer fakeAnswer
	}
	services := []service{
		{TypeSlack, fakeAnswer{status: 200, body: "ok"}},
		{TypeTelegram, fakeAnswer{status: 200, body: `{"ok":true}`}},
		{TypeDiscord, fakeAnswer{status: 204}},
		{TypeWebhook, fakeAnswer{status: 200}},
	}
	cfg := logConfig(0)
	gots := map[string]chan request{}
	for _, s := range services {
		srv, got := fakeServer(t, s.answer)
		cfg.Channels[s.typ] = channelFor(s.typ, srv.URL)
		gots[s.typ] = got
	}
	smtp := startSMTP(t, &smtpServer{})
	cfg.Channels["mail"] = ChannelConfig{Name: "mail", Type: TypeEmail, SMTP: smtp.addr, From: "guard@example.org", To: []string{"me@example.org"}}
	var logs bytes.Buffer
	cfg.Channels["log"] = ChannelConfig{Name: "log", Type: TypeLog}
	d := newTestDispatcher(t, cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	d.Start()
	if err := d.Send(context.Background(), sampleMessage()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	const want = "🛠 lowered XBTCUSDT leverage 20→10"
	for typ, got := range gots {
		if n := len(got); n != 1 {
			t.Errorf("%s got %d requests, want 1", typ, n)
			continue
		}
		if r := <-got; !bytes.Contains(r.body, []byte(want)) {
			t.Errorf("%s body %s lacks %q", typ, r.body, want)
		}
	}
	if n := len(smtp.got); n != 1 {
		t.Errorf("smtp got %d mails", n)
	}
	if n := strings.Count(logs.String(), "notify: "+want); n != 1 {
		t.Errorf("log channel wrote %d lines: %s", n, logs.String())
	}
	for name, s := range d.Stats() {
		if s.Sent != 1 || s.Failed+s.Dropped+s.Retried != 0 {
			t.Errorf("%s stats %+v", name, s)
		}
	}
}

// stateMsg is a rule's state message as the engine writes it: firing at
// the rule's severity, resolved always info.
func stateMsg(kind Kind, sev, rule, sym, text string) Message {
	if kind == KindResolved {
		sev = "info"
	}
	return Message{Kind: kind, Severity: sev, Rule: rule, Symbol: sym, Text: text}
}

// sendAt sends m with the clock set to at.
func sendAt(t *testing.T, d *Dispatcher, clock *fakeClock, at time.Time, m Message) {
	t.Helper()
	clock.Set(at)
	if err := d.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

// texts are the rendered texts of ms.
func texts(ms []Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Text
	}
	return out
}

// A quiet group's first message is queued the moment it is sent; identical
// ones within group_wait wait and go out as one "(×N)" when the wait ends;
// group_wait after that, with nothing new, the group is quiet again.
func TestFirstMessageAtOnceFollowUpsMerged(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: testNow}
	d := newTestDispatcher(t, logConfig(30*time.Second, "c"), WithClock(clock.Now))
	act := Message{Kind: KindAction, Severity: "warning", Symbol: "XSOL", Action: "cancel_orders", Text: "cancelled XSOL orders"}

	sendAt(t, d, clock, testNow, act)
	if q := queued(d, "c"); len(q) != 1 || q[0].Count != 1 || q[0].Text != "🛠 cancelled XSOL orders" || !q[0].Time.Equal(testNow) {
		t.Fatalf("first message of a quiet group: %+v, want it queued at once", q)
	}
	for i := 1; i <= 3; i++ {
		sendAt(t, d, clock, testNow.Add(time.Duration(i)*5*time.Second), act)
	}
	if next := d.Flush(testNow.Add(29 * time.Second)); !next.Equal(testNow.Add(30 * time.Second)) {
		t.Errorf("follow-up due at %s, want group_wait after the first message", next)
	}
	if q := queued(d, "c"); len(q) != 0 {
		t.Fatalf("follow-ups released before group_wait: %q", texts(q))
	}
	d.Flush(testNow.Add(30 * time.Second))
	if q := queued(d, "c"); len(q) != 1 || q[0].Count != 3 || q[0].Text != "🛠 cancelled XSOL orders (×3)" {
		t.Fatalf("follow-up: %q, want one message for the 3 that followed", texts(q))
	}
	// Another action on another symbol is another group: at once.
	sendAt(t, d, clock, testNow.Add(31*time.Second), Message{Kind: KindAction, Severity: "warning", Symbol: "XBTC", Action: "cancel_orders", Text: "cancelled XBTC orders"})
	if q := queued(d, "c"); len(q) != 1 || q[0].Text != "🛠 cancelled XBTC orders" {
		t.Fatalf("another group's first message: %q", texts(q))
	}
	// The follow-up opened a new wait: what comes within it waits too.
	sendAt(t, d, clock, testNow.Add(59*time.Second), act)
	if q := queued(d, "c"); len(q) != 0 {
		t.Fatalf("a message within group_wait of the follow-up went at once: %q", texts(q))
	}
	d.Flush(testNow.Add(60 * time.Second))
	if q := queued(d, "c"); len(q) != 1 || q[0].Text != "🛠 cancelled XSOL orders" {
		t.Fatalf("second follow-up: %q", texts(q))
	}
	// Quiet for group_wait: the next one goes at once again.
	if next := d.Flush(testNow.Add(90 * time.Second)); !next.IsZero() {
		t.Errorf("something still waits: next flush %s", next)
	}
	sendAt(t, d, clock, testNow.Add(95*time.Second), act)
	if q := queued(d, "c"); len(q) != 1 || q[0].Count != 1 {
		t.Fatalf("first message after the group went quiet: %q", texts(q))
	}
	if s := d.Stats()["c"]; s.Merged != 4 || s.Suppressed != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A rule flapping firing/resolved twice a second does not flood: its first
// message goes at once, the rest of the window as one follow-up. The bound:
// a group's messages are group_wait apart, but for a critical one of a kind
// not sent critically within group_wait, and one critical re-fire per
// group_wait (issue 40: a rule that resolved and fired critically again is
// news, not merged); so a flapping warning rule sends at most one message
// per group_wait, a flapping critical one three (its critical firing, one
// re-fire, and the follow-up). repeat_interval then holds back a follow-up
// that says what was already said.
func TestFlappingRuleDoesNotFlood(t *testing.T) {
	t.Parallel()
	const wait = 30 * time.Second
	flap := func(t *testing.T, d *Dispatcher, clock *fakeClock, sev string, start time.Time, seconds int, last Kind) {
		t.Helper()
		for i := range seconds {
			at := start.Add(time.Duration(i) * time.Second)
			first, second := KindFiring, KindResolved
			if last == KindFiring {
				first, second = KindResolved, KindFiring
			}
			text := func(k Kind) string {
				if k == KindFiring {
					return fmt.Sprintf("near-liq firing on XBTC: distance %.2f%%", 3+float64(i%10)/10)
				}
				return "near-liq resolved on XBTC"
			}
			// The flusher runs on time: each follow-up goes out when due.
			d.Flush(at)
			sendAt(t, d, clock, at, stateMsg(first, sev, "near-liq", "XBTC", text(first)))
			d.Flush(at.Add(500 * time.Millisecond))
			sendAt(t, d, clock, at.Add(500*time.Millisecond), stateMsg(second, sev, "near-liq", "XBTC", text(second)))
		}
	}
	for _, tt := range []struct {
		sev  string
		icon string
		// during is what the first 20 s of flapping send at once: the
		// first firing; for a critical rule also its first re-fire (it
		// resolved, untold, and fired again: news, standing for the
		// resolved), which starts the wait anew (firstDue).
		during   []string
		firstDue time.Duration
		// afterFirst is the follow-up of the first window.
		afterFirst string
		// second is what the same flapping a minute later sends.
		second []string
		// third is what the third flapping, ending firing, sends: the
		// follow-up for a warning rule; the critical firing at once for a
		// critical one, whose follow-up then repeats it and is held.
		third      []string
		merged     uint64
		suppressed uint64
		// want10m is what ten minutes of flapping and the last wait send;
		// bound is one message per group_wait, three for a critical rule
		// (its critical firing, one re-fire, the follow-up).
		want10m, bound int
	}{
		{sev: "warning", icon: "🟠", during: []string{"🟠 near-liq firing on XBTC: distance 3.00%"}, firstDue: wait,
			afterFirst: "✅ near-liq resolved on XBTC (×39)",
			second:     []string{"🟠 near-liq firing on XBTC: distance 3.00%", "✅ near-liq resolved on XBTC (×39)"},
			third:      []string{"🟠 near-liq firing on XBTC: distance 3.90% (×39)"}, merged: 3 * 39, suppressed: 1,
			want10m: 21, bound: 600/30 + 1},
		{sev: "critical", icon: "🔴", during: []string{"🔴 near-liq firing on XBTC: distance 3.00%", "🔴 near-liq firing on XBTC: distance 3.10% (×2)"}, firstDue: wait + time.Second,
			afterFirst: "✅ near-liq resolved on XBTC (×37)",
			second:     []string{"🔴 near-liq firing on XBTC: distance 3.00%", "🔴 near-liq firing on XBTC: distance 3.10% (×2)", "✅ near-liq resolved on XBTC (×37)"},
			third:      []string{"🔴 near-liq firing on XBTC: distance 3.00%", "🔴 near-liq firing on XBTC: distance 3.10% (×2)"}, merged: 3*38 - 1, suppressed: 2,
			want10m: 60, bound: 3 * (600/30 + 1)},
	} {
		t.Run(tt.sev, func(t *testing.T) {
			t.Parallel()
			clock := &fakeClock{t: testNow}
			cfg := logConfig(wait, "c")
			d := newTestDispatcher(t, cfg, WithClock(clock.Now))

			// 20 s of flapping: the first firing at once (and a critical
			// rule's first re-fire), then nothing until the wait ends,
			// then one follow-up for the rest.
			flap(t, d, clock, tt.sev, testNow, 20, KindResolved)
			if q := queued(d, "c"); !slices.Equal(texts(q), tt.during) {
				t.Fatalf("during the flapping: %q, want %q", texts(q), tt.during)
			}
			if got := d.Flush(testNow.Add(29 * time.Second)); !got.Equal(testNow.Add(tt.firstDue)) {
				t.Errorf("next flush at %s", got)
			}
			d.Flush(testNow.Add(tt.firstDue))
			q := queued(d, "c")
			if len(q) != 1 || q[0].Kind != KindResolved || q[0].Text != tt.afterFirst {
				t.Fatalf("after the first window: %q, want %q", texts(q), tt.afterFirst)
			}

			// The same flapping a minute later: the group was quiet, so its
			// first firing is news at once, and the follow-up says it
			// resolved again.
			flap(t, d, clock, tt.sev, testNow.Add(time.Minute), 20, KindResolved)
			d.Flush(testNow.Add(2 * time.Minute))
			if q := queued(d, "c"); !slices.Equal(texts(q), tt.second) {
				t.Fatalf("second flapping: %q, want %q", texts(q), tt.second)
			}
			// Starting with a resolved it already told, ending firing:
			// repeat_interval holds what repeats the last word.
			flap(t, d, clock, tt.sev, testNow.Add(3*time.Minute), 20, KindFiring)
			d.Flush(testNow.Add(4 * time.Minute))
			if q := queued(d, "c"); !slices.Equal(texts(q), tt.third) {
				t.Fatalf("third flapping: %q, want %q", texts(q), tt.third)
			}
			if s := d.Stats()["c"]; s.Merged != tt.merged || s.Suppressed != tt.suppressed {
				t.Errorf("stats %+v, want merged %d suppressed %d", s, tt.merged, tt.suppressed)
			}

			// Ten minutes of flapping without repeat_interval to hide
			// anything: the group's own bound.
			cfg.RepeatInterval = 0
			clock2 := &fakeClock{t: testNow}
			d2 := newTestDispatcher(t, cfg, WithClock(clock2.Now))
			flap(t, d2, clock2, tt.sev, testNow, 600, KindResolved)
			d2.Flush(testNow.Add(600*time.Second + wait))
			got := len(queued(d2, "c"))
			t.Logf("%s: 1200 messages in 10 minutes, %d sent (bound %d)", tt.sev, got, tt.bound)
			if got > tt.bound || got != tt.want10m {
				t.Errorf("%d messages sent in 10 minutes of flapping, want %d (bound %d)", got, tt.want10m, tt.bound)
			}
		})
	}
}

// A critical message does not wait for group_wait even when its group is
// busy: it goes at once, standing for what waited; a second critical one of
// the same kind within the wait is merged, so that a flapping critical
// alert stays bounded. Another group's critical message goes at once too.
func TestCriticalAtOnceInBusyGroup(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: testNow}
	d := newTestDispatcher(t, logConfig(time.Hour, "c"), WithClock(clock.Now))
	failed := func(sev, text string) Message {
		return Message{Kind: KindActionFailed, Severity: sev, Symbol: "XSOL", Action: "reduce_position", Text: text}
	}
	sendAt(t, d, clock, testNow, failed("warning", "reduce_position XSOL not applied: order rejected"))
	sendAt(t, d, clock, testNow.Add(time.Second), failed("warning", "reduce_position XSOL not applied: order rejected"))
	sendAt(t, d, clock, testNow.Add(2*time.Second), failed("warning", "reduce_position XSOL not applied: order rejected"))
	if q := queued(d, "c"); len(q) != 1 {
		t.Fatalf("warnings: %q, want the first only", texts(q))
	}
	// The group is busy (two wait, for an hour); the critical failure and a
	// liquidation elsewhere go now.
	sendAt(t, d, clock, testNow.Add(3*time.Second), failed("critical", "FAILED reduce_position XSOL: the position grew"))
	sendAt(t, d, clock, testNow.Add(4*time.Second), Message{Kind: KindLiquidation, Severity: "critical", Symbol: "XBTC", Text: "LIQUIDATED: XBTC LONG 0.8"})
	q := queued(d, "c")
	if want := []string{"❌ FAILED reduce_position XSOL: the position grew (×3)", "🔴 LIQUIDATED: XBTC LONG 0.8"}; !slices.Equal(texts(q), want) {
		t.Fatalf("critical messages: %q, want %q at once", texts(q), want)
	}
	// The same critical failure again within the wait is merged, and goes
	// out when the wait ends.
	sendAt(t, d, clock, testNow.Add(5*time.Second), failed("critical", "FAILED reduce_position XSOL: the position grew"))
	if q := queued(d, "c"); len(q) != 0 {
		t.Fatalf("a repeated critical message went at once: %q", texts(q))
	}
	if next := d.Flush(testNow.Add(time.Minute)); !next.Equal(testNow.Add(3*time.Second + time.Hour)) {
		t.Errorf("follow-up due %s, want group_wait after the critical one", next)
	}
	d.Flush(testNow.Add(3*time.Second + time.Hour))
	if q := queued(d, "c"); len(q) != 1 || q[0].Count != 1 || q[0].Severity != "critical" {
		t.Fatalf("follow-up: %+v", q)
	}
}

func TestRepeatInterval(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: testNow}
	d := newTestDispatcher(t, logConfig(0, "c"), WithClock(clock.Now))
	steps := []struct {
		after time.Duration
		m     Message
		sent  bool
	}{
		{0, ruleMsg(KindRule, "near", "XBTC", "near XBTC: distance 3.10%"), true},
		{time.Minute, ruleMsg(KindRule, "near", "XBTC", "near XBTC: distance 2.95%"), false},                      // figures only
		{2 * time.Minute, ruleMsg(KindRule, "near", "ETH", "near ETH: distance 2.95%"), true},                     // another symbol
		{3 * time.Minute, ruleMsg(KindRule, "near", "XBTC", "near XBTC: distance 1.00%, orders cancelled"), true}, // words changed
		{4 * time.Hour, ruleMsg(KindRule, "near", "XBTC", "near XBTC: distance 1.00%, orders cancelled"), false},
		{4*time.Hour + 3*time.Minute, ruleMsg(KindRule, "near", "XBTC", "near XBTC: distance 1.20%, orders cancelled"), true}, // interval over
		{5 * time.Hour, Message{Kind: KindAction, Severity: "warning", Symbol: "XBTC", Action: "cancel_orders", Text: "cancelled XBTC orders"}, true},
		{5*time.Hour + time.Second, Message{Kind: KindAction, Severity: "warning", Symbol: "XBTC", Action: "cancel_orders", Text: "cancelled XBTC orders"}, true},
		{5*time.Hour + 2*time.Second, Message{Kind: KindBreaker, Severity: "critical", Text: "circuit breaker OPEN"}, true},
		{5*time.Hour + 3*time.Second, Message{Kind: KindBreaker, Severity: "critical", Text: "circuit breaker OPEN"}, true},
		{5*time.Hour + 4*time.Second, Message{Kind: KindExchange, Severity: "critical", Text: "exchange unreachable for 2m"}, true},
		{5*time.Hour + 5*time.Second, Message{Kind: KindExchange, Severity: "critical", Text: "exchange unreachable for 3m"}, false},
		{5*time.Hour + 6*time.Second, Message{Kind: KindExchange, Severity: "info", Text: "exchange reachable again"}, true},
	}
	for i, st := range steps {
		clock.Set(testNow.Add(st.after))
		if err := d.Send(context.Background(), st.m); err != nil {
			t.Fatal(err)
		}
		if got := len(queued(d, "c")); got != map[bool]int{true: 1, false: 0}[st.sent] {
			t.Errorf("step %d (%s): %d messages queued, want sent=%v", i, st.m.Text, got, st.sent)
		}
	}
}

func TestFullQueueDropsOldest(t *testing.T) {
	t.Parallel()
	cfg := logConfig(0, "c")
	cfg.QueueSize = 3
	rec := newRecorder()
	d := newTestDispatcher(t, cfg, WithSenders(map[string]Sender{"c": rec}))
	for i := range 5 {
		if err := d.Send(context.Background(), Message{Kind: KindAction, Symbol: fmt.Sprint("S", i), Action: "cancel_orders", Text: fmt.Sprint("m", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if s := d.Stats()["c"]; s.Dropped != 2 || s.Queued != 3 {
		t.Errorf("stats %+v", s)
	}
	d.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range len(rec.got) {
		got = append(got, (<-rec.got).Text)
	}
	if want := []string{"🛠 m2", "🛠 m3", "🛠 m4"}; !slices.Equal(got, want) {
		t.Errorf("delivered %q, want %q", got, want)
	}
}

// TestDeadChannelDoesNotBlockSend is not parallel: it measures.
func TestDeadChannelDoesNotBlockSend(t *testing.T) {
	cfg := logConfig(0, "dead", "live")
	cfg.Timeout = time.Hour
	dead, live := &hang{entered: make(chan struct{}, 1)}, newRecorder()
	d := newTestDispatcher(t, cfg, WithSenders(map[string]Sender{"dead": dead, "live": live}))
	d.Start()
	if err := d.Send(context.Background(), Message{Kind: KindLifecycle, Text: "started"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dead.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the dead channel's worker never started sending")
	}
	receive(t, live.got)
	// A blocking Send would wait for the hung channel's hour-long attempt.
	// On a loaded machine (2 shared cores, -race) a goroutine holding a
	// queue's lock can be descheduled for a while, so the tail is bounded
	// loosely and the 99th percentile tightly.
	durs := make([]time.Duration, 1000)
	for i := range durs {
		start := time.Now()
		_ = d.Send(context.Background(), Message{Kind: KindAction, Symbol: fmt.Sprint("S", i), Action: "cancel_orders", Text: "x"})
		durs[i] = time.Since(start)
	}
	slices.Sort(durs)
	p50, p99, worst := durs[500], durs[990], durs[999]
	t.Logf("1000 Sends with a hung channel: p50 %s, p99 %s, max %s", p50, p99, worst)
	if p99 > 50*time.Millisecond || worst > 2*time.Second {
		t.Errorf("Send blocks while a channel hangs: p99 %s, max %s", p99, worst)
	}
	// The live channel delivers everything its queue kept.
	received := 0
	for i := 0; i < 1000 && received+int(d.Stats()["live"].Dropped) < 1000; i++ {
		receive(t, live.got)
		received++
	}
	// One message is stuck in delivery, a full queue of 100 waits, the
	// other 900 were dropped, oldest first.
	if s := d.Stats()["dead"]; s.Dropped != 900 || s.Queued != 100 {
		t.Errorf("dead stats %+v", s)
	}
	// Close gives up on the dead channel at its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := d.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "100 messages not delivered") {
		t.Errorf("Close: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Close took %s", el)
	}
	if s := d.Stats()["dead"]; s.Failed != 1 {
		t.Errorf("dead stats after Close %+v", s)
	}
}

func BenchmarkSendDeadChannel(b *testing.B) {
	cfg := logConfig(0, "dead")
	cfg.Timeout = time.Hour
	d, err := NewDispatcher(cfg, WithSenders(map[string]Sender{"dead": &hang{entered: make(chan struct{}, 1)}}))
	if err != nil {
		b.Fatal(err)
	}
	d.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_ = d.Close(ctx)
	}()
	m := Message{Kind: KindAction, Severity: "warning", Symbol: "XBTC", Action: "lower_leverage", Text: "lowered XBTC 20→10"}
	ctx := context.Background()
	for b.Loop() {
		_ = d.Send(ctx, m)
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	rl := func(d time.Duration) error { return &DeliveryError{Status: 429, RetryAfter: d, Msg: "slow down"} }
	tests := []struct {
		name       string
		fail       func(n int) error
		wantSleeps []time.Duration
		wantErr    bool
		retried    uint64
	}{
		{"ok", nil, nil, false, 0},
		{"429 twice", func(n int) error {
			if n <= 2 {
				return rl(7 * time.Second)
			}
			return nil
		}, []time.Duration{7 * time.Second, 7 * time.Second}, false, 2},
		{"500 always", func(int) error { return &DeliveryError{Status: 500, Msg: "oops"} },
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, true, 3},
		{"network then ok", func(n int) error {
			if n == 1 {
				return errors.New("connection reset")
			}
			return nil
		}, []time.Duration{time.Second}, false, 1},
		{"permanent", func(int) error { return &DeliveryError{Status: 400, Permanent: true, Msg: "bad"} }, nil, true, 0},
		{"hint too long", func(int) error { return rl(10 * time.Minute) }, nil, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var sleeps []time.Duration
			rec := newRecorder()
			rec.fail = tt.fail
			d := newTestDispatcher(t, logConfig(0, "c"), WithSenders(map[string]Sender{"c": rec}),
				WithSleep(func(ctx context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }))
			err := d.deliver(context.Background(), d.chans["c"], sampleMessage())
			if (err != nil) != tt.wantErr || !slices.Equal(sleeps, tt.wantSleeps) {
				t.Errorf("err %v sleeps %v, want error %v sleeps %v", err, sleeps, tt.wantErr, tt.wantSleeps)
			}
			s := d.Stats()["c"]
			if s.Retried != tt.retried || (s.Failed == 1) != tt.wantErr || (s.Sent == 1) == tt.wantErr {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestRetriesHonourTelegramRetryAfter(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv, _ := fakeServer(t, fakeAnswer{hang: false, status: 0})
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(429)
			_, _ = w.Write([]byte(`{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 12","parameters":{"retry_after":12}}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	cfg := logConfig(0)
	cfg.Channels["ops"] = channelFor(TypeTelegram, srv.URL)
	var sleeps []time.Duration
	d := newTestDispatcher(t, cfg, WithSleep(func(ctx context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }))
	if res, err := d.Test(context.Background(), "ops"); err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatal(res, err)
	}
	if !slices.Equal(sleeps, []time.Duration{12 * time.Second}) || calls.Load() != 2 {
		t.Errorf("sleeps %v calls %d", sleeps, calls.Load())
	}
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	srv, got := fakeServer(t, fakeAnswer{status: 200})
	cfg := logConfig(0)
	cfg.HeartbeatURL = srv.URL + "/ping/SECRET-uuid"
	d := newTestDispatcher(t, cfg)
	d.Heartbeat(true) // waits in the slot until Start
	d.Start()
	wantPath := func(p string) {
		t.Helper()
		select {
		case r := <-got:
			if r.method != http.MethodGet || r.path != p {
				t.Errorf("%s %s, want GET %s", r.method, r.path, p)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no ping to %s", p)
		}
	}
	wantPath("/ping/SECRET-uuid")
	d.Heartbeat(false)
	wantPath("/ping/SECRET-uuid/fail")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s := d.HeartbeatStats(); s.Sent != 2 || s.Failed != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestHeartbeatLatestWinsAndFailuresAreRedacted(t *testing.T) {
	t.Parallel()
	srv, got := fakeServer(t, fakeAnswer{status: 503})
	cfg := logConfig(0)
	cfg.HeartbeatURL = srv.URL + "/ping/SECRET-uuid"
	var logs syncBuffer
	d := newTestDispatcher(t, cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	d.Heartbeat(true)
	d.Heartbeat(true)
	d.Heartbeat(false) // replaces the unsent ones: one ping, to /fail
	if s := d.HeartbeatStats(); s.Missed != 2 {
		t.Errorf("missed %d, want 2", s.Missed)
	}
	d.Start()
	select {
	case r := <-got:
		if r.path != "/ping/SECRET-uuid/fail" {
			t.Errorf("ping %s", r.path)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ping")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.Close(ctx)
	if s := d.HeartbeatStats(); s.Failed != 1 {
		t.Errorf("stats %+v", s)
	}
	if strings.Contains(logs.String(), "SECRET") || !strings.Contains(logs.String(), "heartbeat ping failed") {
		t.Errorf("logs: %s", logs.String())
	}
	d2 := newTestDispatcher(t, logConfig(0))
	d2.Heartbeat(true) // no URL: nothing happens
	if s := d2.HeartbeatStats(); s != (HeartbeatStats{}) {
		t.Errorf("stats without URL %+v", s)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger used by workers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestTestCommand(t *testing.T) {
	t.Parallel()
	okSrv, okGot := fakeServer(t, fakeAnswer{status: 200, body: `{"ok":true}`})
	badSrv, _ := fakeServer(t, fakeAnswer{status: 401, body: `{"ok":false,"error_code":401,"description":"Unauthorized"}`})
	cfg := logConfig(0)
	cfg.Channels["ops"] = channelFor(TypeTelegram, okSrv.URL)
	bad := channelFor(TypeTelegram, badSrv.URL)
	bad.Name = "bad"
	cfg.Channels["bad"] = bad
	var logs syncBuffer
	d := newTestDispatcher(t, cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if res, err := d.Test(context.Background(), "ops"); err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatal(res, err)
	}
	var body struct{ Text string }
	mustJSON(t, (<-okGot).body, &body)
	if body.Text != "🔔 riskguard test message to channel ops: notifications work" {
		t.Errorf("test text %q", body.Text)
	}
	res, err := d.Test(context.Background(), "")
	if err != nil || len(res) != 2 || res[0].Channel != "bad" || res[0].Err == nil || !strings.Contains(res[0].Err.Error(), "status 401: Unauthorized") ||
		res[1].Channel != "ops" || res[1].Err != nil {
		t.Errorf("Test all: %+v, %v", res, err)
	}
	err = res[0].Err
	var uce *UnknownChannelError
	if _, err := d.Test(context.Background(), "nope"); !errors.As(err, &uce) {
		t.Errorf("Test nope: %v", err)
	}
	if strings.Contains(logs.String(), "SECRET") || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("secret in logs or error: %s %v", logs.String(), err)
	}
	if _, err := newTestDispatcher(t, logConfig(0)).Test(context.Background(), ""); err == nil {
		t.Error("Test without channels succeeded")
	}
}

func TestSendRouting(t *testing.T) {
	t.Parallel()
	cfg := logConfig(0, "a", "b", "c")
	cfg.Default = []string{"a", "b"}
	d := newTestDispatcher(t, cfg)
	count := func() [3]int {
		return [3]int{len(queued(d, "a")), len(queued(d, "b")), len(queued(d, "c"))}
	}
	if err := d.Send(context.Background(), Message{Kind: KindLifecycle, Text: "started"}); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != [3]int{1, 1, 0} {
		t.Errorf("default routing %v", got)
	}
	err := d.Send(context.Background(), Message{Kind: KindLifecycle, Text: "x", Channels: []string{"c", "zz", "c"}})
	var uce *UnknownChannelError
	if !errors.As(err, &uce) || !slices.Equal(uce.Names, []string{"zz"}) {
		t.Errorf("unknown channel error %v", err)
	}
	if got := count(); got != [3]int{0, 0, 1} {
		t.Errorf("named routing %v", got)
	}
	d2 := newTestDispatcher(t, logConfig(0, "a", "b"))
	_ = d2.Send(context.Background(), Message{Kind: KindLifecycle, Text: "started"})
	if a, b := len(queued(d2, "a")), len(queued(d2, "b")); a != 1 || b != 1 {
		t.Errorf("no default: %d %d, want every channel", a, b)
	}
}

func TestCloseLifecycle(t *testing.T) {
	t.Parallel()
	rec := newRecorder()
	clock := &fakeClock{t: testNow}
	d := newTestDispatcher(t, logConfig(time.Hour, "c"), WithSenders(map[string]Sender{"c": rec}), WithClock(clock.Now))
	d.Start()
	// The first goes at once, the second waits for group_wait.
	for range 2 {
		if err := d.Send(context.Background(), Message{Kind: KindLifecycle, Severity: "info", Text: "riskguard stopping"}); err != nil {
			t.Fatal(err)
		}
	}
	if m := receive(t, rec.got); m.Text != "🔵 riskguard stopping" || !m.Time.Equal(testNow) {
		t.Errorf("got %+v", m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Close sends what group_wait still holds.
	if err := d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, rec.got); m.Text != "🔵 riskguard stopping" || !m.Time.Equal(testNow) {
		t.Errorf("got %+v", m)
	}
	if err := d.Send(ctx, Message{Text: "late"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if err := d.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	never := newTestDispatcher(t, logConfig(0, "c"))
	_ = never.Send(ctx, Message{Kind: KindLifecycle, Text: "x"})
	if err := never.Close(ctx); err == nil || !strings.Contains(err.Error(), "1 messages not delivered") {
		t.Errorf("Close without Start: %v", err)
	}
}

func TestNewDispatcherErrors(t *testing.T) {
	t.Parallel()
	cfg := logConfig(0, "a")
	tests := []struct {
		name string
		cfg  *Config
		opts []Option
		want string
	}{
		{"nil config", nil, nil, "nil config"},
		{"unknown sender", cfg, []Option{WithSenders(map[string]Sender{"b": newRecorder()})}, `unknown channel "b"`},
		{"bad template", cfg, []Option{WithTemplates(map[Kind]string{KindFiring: "{{.Nope}}"})}, "template for firing"},
		{"nil client", cfg, []Option{WithHTTPClient(nil)}, "nil HTTP client"},
		{"nil clock", cfg, []Option{WithClock(nil)}, "nil clock"},
		{"nil sleep", cfg, []Option{WithSleep(nil)}, "nil sleep"},
		{"bad backoff", cfg, []Option{WithBackoff(time.Second, time.Millisecond, time.Minute)}, "backoff"},
		{"bad default", &Config{Channels: cfg.Channels, Default: []string{"z"}}, nil, `default channel "z"`},
		{"bad type", &Config{Channels: map[string]ChannelConfig{"x": {Type: "pigeon"}}}, nil, "channel x: unknown type"},
	}
	for _, tt := range tests {
		if _, err := NewDispatcher(tt.cfg, tt.opts...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestCollector(t *testing.T) {
	t.Parallel()
	cfg := logConfig(0, "c")
	cfg.QueueSize = 1
	cfg.HeartbeatURL = "http://127.0.0.1:1/hb"
	d := newTestDispatcher(t, cfg)
	_ = d.Send(context.Background(), Message{Kind: KindLifecycle, Text: "a"})
	_ = d.Send(context.Background(), Message{Kind: KindLifecycle, Text: "b"})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(d.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"riskguard_notify_queue_length,channel=c,type=log":                     1,
		"riskguard_notify_messages_total,channel=c,result=dropped,type=log":    1,
		"riskguard_notify_messages_total,channel=c,result=sent,type=log":       0,
		"riskguard_notify_messages_total,channel=c,result=suppressed,type=log": 0,
		"riskguard_notify_heartbeats_total,result=missed":                      0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if len(got) != 6+1+3 {
		t.Errorf("%d metrics: %v", len(got), got)
	}
}

func TestMaskFigures(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"distance 3.20% at 64,210.5": "distance #% at #",
		"x1y22z":                     "x#y#z",
		"no figures.":                "no figures.",
	} {
		if got := maskFigures(in); got != want {
			t.Errorf("maskFigures(%q) = %q, want %q", in, got, want)
		}
	}
}

// A generic webhook answering 429 keeps the message: it is sent again after
// the Retry-After the hook asked for.
func TestWebhookRetriesAfter429(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	srv, _ := fakeServer(t, fakeAnswer{status: 0})
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	cfg := logConfig(0)
	cfg.Channels["hook"] = channelFor(TypeWebhook, srv.URL)
	var sleeps []time.Duration
	d := newTestDispatcher(t, cfg, WithSleep(func(ctx context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }))
	if res, err := d.Test(context.Background(), "hook"); err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatal(res, err)
	}
	if !slices.Equal(sleeps, []time.Duration{7 * time.Second}) || calls.Load() != 2 {
		t.Errorf("sleeps %v calls %d, want one wait of 7s and two calls", sleeps, calls.Load())
	}
}
