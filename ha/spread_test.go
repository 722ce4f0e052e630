package ha_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// spreadNode is one process guarding every account, through its own proxy
// to etcd.
type spreadNode struct {
	host  string
	node  *ha.Node
	seats []*ha.Seat
	proxy *etcdtest.Proxy
}

func startSpreadNode(t *testing.T, c *etcdtest.Cluster, host string, accounts []string) *spreadNode {
	t.Helper()
	return startSpreadNodeWith(t, c, host, accounts, ha.Options{})
}

func startSpreadNodeWith(t *testing.T, c *etcdtest.Cluster, host string, accounts []string, o ha.Options) *spreadNode {
	t.Helper()
	p := etcdtest.NewProxy(t, c.Endpoints[0])
	n, err := ha.New(ha.Config{Endpoints: []string{p.URL()}, LeaseTTL: ttl, Prefix: "/s/", Host: host, DialTimeout: time.Second}, o)
	if err != nil {
		t.Fatal(err)
	}
	sn := &spreadNode{host: host, node: n, proxy: p}
	for _, a := range accounts {
		sn.seats = append(sn.seats, n.Seat(a))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; n.Close() })
	return sn
}

// leads is how many accounts the node may act for now.
func (sn *spreadNode) leads() int {
	k := 0
	for _, s := range sn.seats {
		if ok, _ := s.MayAct(time.Now()); ok {
			k++
		}
	}
	return k
}

// spreadState says, for a failure, what each node counts and why each of
// its seats may act or not.
func spreadState(nodes []*spreadNode) string {
	var b strings.Builder
	for _, sn := range nodes {
		q, live := sn.node.Quota()
		fmt.Fprintf(&b, "%s: quota %d of %d live, etcd up %v, leads %d\n", sn.host, q, live, sn.node.EtcdUp(), sn.leads())
		for _, s := range sn.seats {
			ok, why := s.MayAct(time.Now())
			fmt.Fprintf(&b, "  %s: may act %v, term %d, handing over %v %s\n", s.Account(), ok, s.Term(), s.HandingOver(), why)
		}
	}
	return b.String()
}

// Six accounts over three processes: two each; one cut off from etcd
// (dead to the others) → three each for the other two within the lease
// and a renewal; back → two each again. Meanwhile a checker samples,
// every few milliseconds, which processes may act for each account and
// who holds its leader key in etcd: never two at once, and the one that
// may act always holds the key.
func TestSpreadAndRebalance(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	accounts := []string{"a1", "a2", "a3", "a4", "a5", "a6"}
	var nodes []*spreadNode
	for _, h := range []string{"p1", "p2", "p3"} {
		nodes = append(nodes, startSpreadNode(t, c, h, accounts))
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var violations []string
	samples := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			for i, a := range accounts {
				var acting []string
				for _, sn := range nodes {
					if ok, _ := sn.seats[i].MayAct(time.Now()); ok {
						acting = append(acting, sn.host)
					}
				}
				if len(acting) == 0 {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				resp, err := cli.Get(ctx, "/s/accounts/"+a+"/leader/", clientv3.WithFirstCreate()...)
				cancel()
				mu.Lock()
				samples++
				if len(acting) > 1 {
					violations = append(violations, fmt.Sprintf("account %s: %v may act at once", a, acting))
				} else if err == nil {
					var m ha.Member
					if len(resp.Kvs) == 0 || json.Unmarshal(resp.Kvs[0].Value, &m) != nil || m.Host != acting[0] {
						violations = append(violations, fmt.Sprintf("account %s: %s may act but the leader key is %q", a, acting[0], m.Host))
					}
				}
				mu.Unlock()
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	spread := func(what string, want map[*spreadNode]int, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			done := true
			for sn, w := range want {
				if sn.leads() != w {
					done = false
				}
			}
			if done {
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("timed out after %s waiting for %s:\n%s", within, what, spreadState(nodes))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p1, p2, p3 := nodes[0], nodes[1], nodes[2]
	took := spread("two accounts each over three processes", map[*spreadNode]int{p1: 2, p2: 2, p3: 2}, 20*time.Second)
	t.Logf("spread 2/2/2 %s after start", took.Round(time.Millisecond))
	// Stable: no account moves once spread.
	time.Sleep(ttl)
	for _, sn := range nodes {
		if got := sn.leads(); got != 2 {
			t.Fatalf("%s leads %d after settling, want 2", sn.host, got)
		}
	}

	p3.proxy.Cut()
	took = spread("three accounts each over the two left", map[*spreadNode]int{p1: 3, p2: 3, p3: 0}, 3*ttl)
	t.Logf("p3 cut off: 3/3 %s later (lease_ttl %s)", took.Round(time.Millisecond), ttl)
	// The lease, a renewal to see the member gone, and a second for
	// etcd's lessor (it revokes expired leases every 500 ms) and the load.
	if limit := ttl + ttl/6 + time.Second; took > limit {
		t.Errorf("the two left took %s to lead p3's accounts, over lease_ttl + a renewal + 1s (%s)", took, limit)
	}

	p3.proxy.Heal()
	took = spread("two accounts each again", map[*spreadNode]int{p1: 2, p2: 2, p3: 2}, 6*ttl)
	t.Logf("p3 back: 2/2/2 %s later", took.Round(time.Millisecond))
	if q, live := p1.node.Quota(); q != 2 || live != 3 {
		t.Errorf("p1's quota %d over %d live, want 2 over 3", q, live)
	}

	mu.Lock()
	defer mu.Unlock()
	if samples == 0 {
		t.Fatal("the checker sampled no leader")
	}
	for _, v := range violations {
		t.Error(v)
	}
	t.Logf("%d samples of a leader, %d violations", samples, len(violations))
}

// A hand-over (a member joined) is the fencing order: the seat stops
// acting, may still write its state (fenced on its key, so the next
// leader has its last cooldowns), and resigns a third of the lease later;
// only then does the newcomer win.
func TestHandOverStopsBeforeResign(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	accounts := []string{"x", "y"}
	reg := prometheus.NewRegistry()
	m, err := ha.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	p1 := startSpreadNodeWith(t, c, "p1", accounts, ha.Options{Metrics: m})
	waitFor(t, "p1 leading both accounts alone", 10*time.Second, func() bool { return p1.leads() == 2 })
	joined := time.Now()
	p2 := startSpreadNode(t, c, "p2", accounts)
	var stopped, won time.Time
	var handing *ha.Seat
	var saveErr error
	saved := false
	var sawRole, sawGauge, sawCount, sawEtcd bool
	waitFor(t, "p2 leading one account", 4*ttl, func() bool {
		now := time.Now()
		for _, s := range p1.seats {
			if s.HandingOver() && handing == nil {
				handing, stopped = s, now
				if ok, _ := s.MayAct(now); ok {
					t.Errorf("account %s: MayAct true while handing over", s.Account())
				}
				_, saveErr = s.SaveState(context.Background(), map[string][]byte{"breaker": []byte(`{"handed":true}`)})
				saved = true
			}
		}
		// From the moment it stops acting until it resigns, p1 says
		// handing-over: its status, riskguard_leader 0, the hand-over
		// counted, and the leader key's value in etcd (ha status).
		if handing != nil && handing.HandingOver() {
			st := handing.Status()
			sawRole = sawRole || st.Role == ha.RoleHandingOver
			sawGauge = sawGauge || metricValue(t, reg, "riskguard_leader", handing.Account()) == 0
			sawCount = sawCount || metricValue(t, reg, "riskguard_handovers_total", handing.Account()) == 1
			if !sawEtcd {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				leads, _, err := ha.Inspect(ctx, ha.Config{Endpoints: c.Endpoints, LeaseTTL: ttl, Prefix: "/s/", Host: "inspect"})
				cancel()
				for _, l := range leads {
					sawEtcd = sawEtcd || err == nil && l.Account == handing.Account() && l.Leader.Host == "p1" && l.Leader.HandingOver
				}
			}
		}
		if p2.leads() == 1 {
			won = now
			return true
		}
		return false
	})
	if handing == nil {
		t.Fatal("p1 was never seen handing an account over")
	}
	if !sawRole || !sawGauge || !sawCount || !sawEtcd {
		t.Errorf("while handing over: role handing-over seen %v, riskguard_leader 0 %v, riskguard_handovers_total 1 %v, in etcd %v; want all", sawRole, sawGauge, sawCount, sawEtcd)
	}
	if st := handing.Status(); st.Role != ha.RoleStandby {
		t.Errorf("after the hand-over p1's role for %s is %s", handing.Account(), st.Role)
	}
	if saved && saveErr != nil {
		t.Errorf("the state write while handing over: %v", saveErr)
	}
	if gap := won.Sub(stopped); gap < ttl/3-50*time.Millisecond {
		t.Errorf("p2 led %s after p1 stopped acting, want at least the margin %s", gap, ttl/3)
	}
	if p1.leads() != 1 {
		t.Errorf("p1 leads %d after the hand-over, want 1", p1.leads())
	}
	// The newcomer took the handed-over account and its state.
	var got *ha.Seat
	for i, s := range p2.seats {
		if ok, _ := s.MayAct(time.Now()); ok {
			got = s
			if accounts[i] != handing.Account() {
				t.Errorf("p2 leads %s, p1 handed over %s", accounts[i], handing.Account())
			}
		}
	}
	if got != nil {
		parts, err := got.LoadState(context.Background())
		if err != nil || string(parts["breaker"]) != `{"handed":true}` {
			t.Errorf("the new leader read breaker %q (%v), want what the old one wrote while handing over", parts["breaker"], err)
		}
	}
	t.Logf("p2 joined at 0; p1 stopped acting for %s at %s; p2 led it at %s", handing.Account(), stopped.Sub(joined).Round(time.Millisecond), won.Sub(joined).Round(time.Millisecond))
}

// metricValue is the value of the metric name for account in reg (-1
// when absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name, account string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "account" && l.GetValue() == account {
					if m.Gauge != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// A resignation etcd does not answer is tried again: a hand-over whose
// leader key stayed behind would keep the account's election on a process
// that no longer acts for it, for as long as that process's lease lives,
// and the account would have no guard. p1 leads both accounts alone; p2
// joins; p1's hand-over fails to resign three times, and p2 still leads
// one account.
func TestHandOverResignsUntilEtcdAnswers(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	accounts := []string{"a1", "a2"}
	p1 := startSpreadNode(t, c, "p1", accounts)
	waitFor(t, "p1 leading both accounts alone", 10*time.Second, func() bool { return p1.leads() == 2 })
	ha.FailResigns(p1.node, 3)
	p2 := startSpreadNode(t, c, "p2", accounts)
	start := time.Now()
	for p1.leads() != 1 || p2.leads() != 1 {
		if time.Since(start) > 6*ttl {
			t.Fatalf("no spread %s after p2 joined:\n%s", 6*ttl, spreadState([]*spreadNode{p1, p2}))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A campaign that did not win leaves no key in the election (issue 32,
// item 8). m, a member guarding no account, makes p1's quota one of its
// two accounts; p1's campaign for x puts its key and loses etcd's answer
// (as a campaign withdrawn while its put was on its way does), and p1 wins
// y and is full, so it never campaigns for x again. Before, the key stayed
// at the head of x's election for as long as p1's lease lived: p3, joining
// with room for x, waited behind it, and x had a leader key and no guard.
func TestLostCampaignLeavesNoKey(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	m := startSpreadNode(t, c, "m", nil)
	waitFor(t, "m a member", 10*time.Second, func() bool { return len(m.node.Members()) == 1 })
	p := etcdtest.NewProxy(t, c.Endpoints[0])
	n, err := ha.New(ha.Config{Endpoints: []string{p.URL()}, LeaseTTL: ttl, Prefix: "/s/", Host: "p1", DialTimeout: time.Second}, ha.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p1 := &spreadNode{host: "p1", node: n, proxy: p, seats: []*ha.Seat{n.Seat("x"), n.Seat("y")}}
	ha.LoseCampaigns(n, "x", 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); n.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; n.Close() })
	waitFor(t, "p1 leading one account", 10*time.Second, func() bool { return p1.leads() == 1 })
	if ok, _ := p1.seats[1].MayAct(time.Now()); !ok {
		t.Fatalf("p1 leads x, want y:\n%s", spreadState([]*spreadNode{p1}))
	}
	if q, live := n.Quota(); q != 1 || live != 2 {
		t.Fatalf("p1's quota %d of %d live, want 1 of 2", q, live)
	}
	p3 := startSpreadNode(t, c, "p3", []string{"x"})
	joined := time.Now()
	start := time.Now()
	for p3.leads() != 1 {
		if time.Since(start) > 3*ttl {
			t.Fatalf("x without a guard %s after p3 joined with room for it:\n%s", 3*ttl, spreadState([]*spreadNode{p1, p3}))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.Get(context.Background(), "/s/accounts/x/leader/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Errorf("x's election holds %d keys, want p3's alone", len(resp.Kvs))
	}
	t.Logf("p3 joined at 0 and led x at %s", time.Since(joined).Round(time.Millisecond))
}
