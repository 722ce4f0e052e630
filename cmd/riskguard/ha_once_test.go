package main

// The cluster rows of the "exactly once" fault campaign (issue 30,
// docs/reliability.md): two riskguard binaries and an embedded etcd, the
// leader killed -9 while its reduce-only order is on the wire.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/internal/etcdtest"
	"github.com/shopspring/decimal"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// halveXBTCRule halves XBTC whenever its leverage is over 12×: once the
// test raises it, the rule fires at every tick of the run (halving the
// position does not lower its leverage), and its cooldown is longer than
// the run, so any second order is a repeat.
const halveXBTCRule = `
  - name: halve-xbtc
    when: position.symbol == "XBTC" && position.leverage > 12
    cooldown: 10m
    severity: critical
    actions:
      - action: reduce_position
        fraction: 0.5
`

// intents are the names of the account's intents in etcd.
func (h *haEnv) intents() []string {
	h.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: h.etcd.Endpoints, DialTimeout: 2 * time.Second})
	if err != nil {
		h.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	const pfx = "/rg-test/accounts/default/state/intents/"
	resp, err := cli.Get(ctx, pfx, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		h.t.Errorf("read the intents: %v", err)
		return nil
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, strings.TrimPrefix(string(kv.Key), pfx))
	}
	return out
}

// orders counts the orders that reached the exchange on sym.
func (h *haEnv) orders(sym string) int {
	n := 0
	for _, c := range h.ex.Calls() {
		if c.Mutating && c.Path == "/v1/contracts/orders/"+sym+"/create" {
			n++
		}
	}
	return n
}

// positionReads counts the exchange's answered position reads.
func (h *haEnv) positionReads() int {
	n := 0
	for _, c := range h.ex.Calls() {
		if c.Path == "/v1/contracts/positions" {
			n++
		}
	}
	return n
}

// The leader killed -9 while its reduce-only order is on the wire, at
// four points: the exchange filled the order and the test holds its
// answer, kills the process, then drops the answer or lets it go to the
// dead connection; the answer arrived and the process is killed at the
// read-back that follows it (before it saved what became of the call); or
// once the outcome and the cooldown are saved and the intent dropped. In
// each the exchange sees one order in all — over the takeover and ten
// reads of the new leader, with the rule firing at every tick — and the
// position is halved once (0.8 → 0.4). In the first three the call's
// intent is in etcd at the kill; the new leader audits it as
// `interrupted` (taken as sent) and its first read `settled` with the
// account's 0.4, and drops the intent once it saved the cooldown.
func TestHAKillLeaderMidOrder(t *testing.T) {
	// Not parallel: two binaries and an etcd each; run alone they keep
	// their timings and leave the parallel tests theirs.
	for _, mode := range []string{"answer held then dropped", "answer held then sent", "at the read-back", "after the save"} {
		t.Run(mode, func(t *testing.T) { killMidOrder(t, mode) })
	}
}

func killMidOrder(t *testing.T, mode string) {
	h := newHAEnvWith(t, 1, haInterval, halveXBTCRule)
	// The front's part: the process that sent the order, killed.
	var (
		mu       sync.Mutex
		procs    = map[string]*haProc{}
		answered string // the process whose order was answered
		killed   *haProc
		atKill   []string // the intents in etcd when it was killed
	)
	kill := func(name string) {
		mu.Lock()
		p := procs[name]
		mu.Unlock()
		p.kill()
		in := h.intents()
		mu.Lock()
		killed, atKill = p, in
		mu.Unlock()
	}
	h.intercept = func(proc string, w http.ResponseWriter, r *http.Request, serve http.HandlerFunc) {
		isOrder := r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/create")
		mu.Lock()
		first := killed == nil // one kill: a second order (a repeat) is only counted
		readBack := mode == "at the read-back" && answered == proc && first && r.Method == http.MethodGet
		mu.Unlock()
		switch {
		case readBack:
			kill(proc) // the read-back is never answered
		case isOrder && first && strings.HasPrefix(mode, "answer held"):
			rec := httptest.NewRecorder()
			serve(rec, r) // the exchange fills the order
			kill(proc)
			if mode == "answer held then sent" {
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				w.Write(rec.Body.Bytes())
			}
		case isOrder:
			serve(w, r)
			mu.Lock()
			answered = proc
			mu.Unlock()
		default:
			serve(w, r)
		}
	}
	a, b := h.start("a", 0), h.start("b", 0)
	mu.Lock()
	procs["a"], procs["b"] = a, b
	mu.Unlock()
	l, _ := h.leader(a, b)
	waitFor(t, "both processes campaigning", 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		leads, _, err := ha.Inspect(ctx, ha.Config{Endpoints: h.etcd.Endpoints, LeaseTTL: haTTL, Prefix: "/rg-test/", Host: "test"})
		return err == nil && len(leads) == 1 && leads[0].Candidates == 2 && leads[0].Leader.Host == l.name
	})
	danger := time.Now()
	h.setLeverage("XBTC", 15)
	if mode == "after the save" {
		waitFor(t, "the order answered", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return answered != "" })
		waitFor(t, "the cooldown saved and the intent dropped", 10*time.Second, func() bool {
			return strings.Contains(h.sharedState("rules/halve-xbtc"), "lastActionAt") && len(h.intents()) == 0
		})
		mu.Lock()
		name := answered
		mu.Unlock()
		kill(name)
	}
	waitFor(t, "the leader killed mid-order", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return killed != nil })
	mu.Lock()
	dead, intentsAtKill := killed, atKill
	mu.Unlock()
	killedAt := time.Now()
	if dead != l {
		t.Fatalf("%s was killed, but %s led", dead.name, l.name)
	}
	s := a
	if dead == a {
		s = b
	}
	waitFor(t, "the standby leading", 15*time.Second, func() bool { return s.role() == "leader" })
	led := time.Since(killedAt)
	adopting := mode != "after the save"
	if adopting && len(intentsAtKill) != 1 {
		// Counted all the same: what the exchange sees without it.
		t.Errorf("etcd held intents %v when the leader was killed, want the order's one", intentsAtKill)
		adopting = false
	}
	if adopting {
		waitFor(t, "the adopted order settled", 10*time.Second, func() bool {
			for _, r := range s.audit() {
				if r.Phase == "settled" && r.Action == "reduce_position" {
					return true
				}
			}
			return false
		})
	}
	from := h.positionReads()
	waitFor(t, "ten reads of the new leader", 15*time.Second, func() bool { return h.positionReads() >= from+10 })
	if n := h.orders("XBTC"); n != 1 {
		t.Errorf("%d orders reached the exchange for the one decision, want 1", n)
	}
	if q := h.position("XBTC").Quantity; !q.Equal(decimal.RequireFromString("0.4")) {
		t.Errorf("XBTC quantity %s, want 0.4: the position halved once", q)
	}
	var interrupted, settled []journal.Record
	for _, r := range s.audit() {
		if r.Action != "reduce_position" {
			continue
		}
		switch r.Phase {
		case "interrupted":
			interrupted = append(interrupted, r)
		case "settled":
			settled = append(settled, r)
		case "sent":
			t.Errorf("the new leader sent an order: %+v", r)
		}
	}
	if adopting {
		if len(interrupted) != 1 || !strings.Contains(interrupted[0].Reason, "intent "+intentsAtKill[0]) || interrupted[0].Symbol != "XBTC" {
			t.Errorf("the new leader's interrupted records %+v, want one for intent %s", interrupted, intentsAtKill[0])
		}
		if len(settled) != 1 || !strings.Contains(settled[0].Reason, "0.4 of XBTC") {
			t.Errorf("the new leader's settled records %+v, want one showing 0.4 of XBTC", settled)
		}
		// The adopted intent is dropped once the new leader saved the
		// cooldown it counts from it.
		waitFor(t, "the adopted intent dropped", 10*time.Second, func() bool { return len(h.intents()) == 0 })
	} else if len(interrupted)+len(settled) > 0 {
		t.Errorf("an order whose outcome was saved was taken over as interrupted: %+v %+v", interrupted, settled)
	}
	t.Logf("%s: %s killed %s after the danger; %s led %s later; %d order(s) at the exchange over the takeover and 10 reads; intents at the kill %v",
		mode, dead.name, killedAt.Sub(danger).Round(time.Millisecond), s.name, led.Round(time.Millisecond), h.orders("XBTC"), intentsAtKill)
}

// The seventh case of the campaign: a three-member etcd whose raft leader
// member is killed (as a crash: no leadership transfer) again and again
// under two riskguard processes, while the danger is made again and again
// (XBTC back over 5× within 100 ms of each cut, a cut allowed every
// second). Two deployments: each process lists all three members (the
// etcd client moves to another; the leadership should stay); or each
// lists only its own member, and the etcd leadership is first moved to
// the acting process's member, so that the kill takes etcd's leader and
// the acting process's etcd at once (a failover each time). Over each
// run one process at a time acts: no two processes' calls overlap at the
// exchange, and by the audit logs' `sent` records a call's leadership term
// never goes back (a deposed leader never sends after a newer one did)
// and each term is one process's; and no time without an actor is longer
// than 2×lease_ttl + interval, counted from when the cut was allowed
// again (the previous call plus the rule's one-second cooldown). One run
// of three kills each; RISKGUARD_HA_SOAK=long runs five of ten each.
func TestHAEtcdLeaderKilled(t *testing.T) {
	// Not parallel: two binaries and three etcd members each; run alone
	// they keep their timings and leave the parallel tests theirs.
	runs, kills := 1, 3
	if os.Getenv("RISKGUARD_HA_SOAK") == "long" {
		runs, kills = 5, 10
	}
	for run := range runs {
		for _, own := range []bool{false, true} {
			name := fmt.Sprintf("all members listed/run %d", run)
			if own {
				name = fmt.Sprintf("own member only/run %d", run)
			}
			t.Run(name, func(t *testing.T) { etcdLeaderKills(t, kills, own) })
		}
	}
}

// etcdLeaderKills is one run of TestHAEtcdLeaderKilled; own: each process
// lists only its own etcd member (a on m0, b on m1).
func etcdLeaderKills(t *testing.T, kills int, own bool) {
	const cooldown = time.Second // cut-xbtc's
	h := newHAEnv(t, 3)
	// The processes reach each member through a proxy cut with its kill,
	// so that their connections drop at once, as a crashed host's do.
	var fronts, urls []string
	var proxies []*etcdtest.Proxy
	for _, ep := range h.etcd.Endpoints {
		p := etcdtest.NewProxy(t, ep)
		proxies, urls = append(proxies, p), append(urls, p.URL())
	}
	if own {
		fronts = []string{urls[0], urls[1]}
	} else {
		fronts = []string{strings.Join(urls, ","), strings.Join(urls, ",")}
	}
	procs := []*haProc{h.start("a", 0, "RISKGUARD_HA_ENDPOINTS="+fronts[0]), h.start("b", 1, "RISKGUARD_HA_ENDPOINTS="+fronts[1])}
	memberOf := map[string]int{"a": 0, "b": 1}
	l, _ := h.leader(procs...)
	defer h.pumpXBTC()()
	waitFor(t, "the leader acting", 20*time.Second, func() bool { return len(h.callsOn("XBTC", l.name, time.Time{})) > 0 })
	for k := range kills {
		waitFor(t, "an etcd leader", 10*time.Second, func() bool { return h.etcd.Leader() >= 0 })
		cs := h.callsOn("XBTC", "", time.Time{})
		actor := cs[len(cs)-1].proc
		if own {
			h.etcd.MoveLeader(t, memberOf[actor])
		}
		member := h.etcd.Leader()
		killed := time.Now()
		proxies[member].Cut()
		h.etcd.Kill(member)
		stopped := time.Since(killed)
		var first haCall
		waitFor(t, fmt.Sprintf("kill %d: a call after etcd member %d was killed", k, member), 15*time.Second, func() bool {
			for _, c := range h.callsOn("XBTC", "", killed) {
				// Own member only: the other process, which took over.
				if !own || c.proc != actor {
					first = c
					return h.etcd.Leader() >= 0
				}
			}
			return false
		})
		t.Logf("kill %d: %s acting; etcd leader m%d killed (stopped in %s); %s acted %s later", k, actor, member,
			stopped.Round(time.Millisecond), first.proc, first.start.Sub(killed).Round(time.Millisecond))
		h.etcd.Restart(t, member)
		proxies[member].Heal()
		back := time.Now()
		waitFor(t, fmt.Sprintf("kill %d: a call after m%d came back", k, member), 15*time.Second, func() bool { return len(h.callsOn("XBTC", "", back)) > 0 })
	}
	calls := h.mutating()
	slices.SortFunc(calls, func(x, y haCall) int { return x.start.Compare(y.start) })
	var longest time.Duration
	changes := 0
	for i := 1; i < len(calls); i++ {
		prev, c := calls[i-1], calls[i]
		if c.proc != prev.proc {
			changes++
			if !prev.end.Before(c.start) {
				t.Errorf("%s's call %s (%s–%s) overlaps %s's %s (from %s)", prev.proc, prev.path, prev.start, prev.end, c.proc, c.path, c.start)
			}
		}
		if strings.Contains(c.path, "/XBTC/") && strings.Contains(prev.path, "/XBTC/") {
			longest = max(longest, c.start.Sub(prev.start)-cooldown)
		}
	}
	if limit := 2*haTTL + haInterval; longest > limit {
		t.Errorf("the longest time without an actor was %s, more than 2×lease_ttl + interval = %s", longest, limit)
	}
	// The audit logs' sent records, by time: a leadership's term never
	// goes back, and each term is one process's.
	var sent []journal.Record
	for _, p := range procs {
		for _, r := range p.audit() {
			if r.Phase == "sent" {
				sent = append(sent, r)
			}
		}
	}
	slices.SortFunc(sent, func(x, y journal.Record) int { return x.Time.Compare(y.Time) })
	hostOf := map[int64]string{}
	for i, r := range sent {
		if r.Term == 0 {
			t.Errorf("a call sent by %s without a term: %+v", r.Host, r)
			continue
		}
		if h, ok := hostOf[r.Term]; ok && h != r.Host {
			t.Errorf("term %d's calls were sent by %s and %s", r.Term, h, r.Host)
		}
		hostOf[r.Term] = r.Host
		if i > 0 && r.Term < sent[i-1].Term {
			t.Errorf("%s sent %s %s under term %d after %s sent under term %d", r.Host, r.Action, r.Symbol, r.Term, sent[i-1].Host, sent[i-1].Term)
		}
	}
	if len(sent) != len(calls) {
		t.Errorf("%d sent records in the audit logs, %d calls at the exchange", len(sent), len(calls))
	}
	t.Logf("%d etcd leader kills: %d calls, %d leaderships (terms), %d changes of the acting process, longest time without an actor %s (limit %s)",
		kills, len(calls), len(hostOf), changes, longest.Round(time.Millisecond), 2*haTTL+haInterval)
}
