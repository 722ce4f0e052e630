// Package etcdtest runs etcd in the test's process (go.etcd.io/etcd's
// embed) on 127.0.0.1 ports, and a TCP proxy that a test closes to cut one
// process off from it. Only tests import it: the daemon's binary carries
// the etcd client, never the server.
package etcdtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Cluster is etcd members running in the test's process.
type Cluster struct {
	// Members are the running members (nil for one killed and not yet
	// restarted); read them through Member while a test kills and
	// restarts members.
	Members []*embed.Etcd
	// Endpoints are the members' client URLs.
	Endpoints []string
	once      sync.Once
	// cfgs are the members' configurations, for Restart.
	cfgs []*embed.Config
	mu   sync.Mutex
	// closing are closed once a killed member's listeners are closed.
	closing []chan struct{}
}

// Start runs an etcd cluster of n members, stopped at the test's end.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	type ports struct{ client, peer string }
	ps := make([]ports, n)
	var initial []string
	for i := range ps {
		ps[i] = ports{client: freeURL(t), peer: freeURL(t)}
		initial = append(initial, fmt.Sprintf("m%d=%s", i, ps[i].peer))
	}
	c := &Cluster{}
	var wg sync.WaitGroup
	errs := make([]error, n)
	c.Members = make([]*embed.Etcd, n)
	c.cfgs = make([]*embed.Config, n)
	c.closing = make([]chan struct{}, n)
	for i := range ps {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = t.TempDir()
		cfg.LogLevel = "fatal"
		cfg.ListenClientUrls = []url.URL{mustURL(ps[i].client)}
		cfg.AdvertiseClientUrls = cfg.ListenClientUrls
		cfg.ListenPeerUrls = []url.URL{mustURL(ps[i].peer)}
		cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "riskguard-test"
		// Short raft timings: a test cluster elects its leader in tens of
		// milliseconds.
		cfg.TickMs, cfg.ElectionMs = 20, 200
		c.cfgs[i] = cfg
		c.Endpoints = append(c.Endpoints, ps[i].client)
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := embed.StartEtcd(cfg)
			if err != nil {
				errs[i] = err
				return
			}
			c.Members[i] = e
			select {
			case <-e.Server.ReadyNotify():
			case <-time.After(30 * time.Second):
				errs[i] = fmt.Errorf("etcd member %d not ready after 30s", i)
			}
		}()
	}
	wg.Wait()
	t.Cleanup(c.Stop)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Stop stops every member: etcd unavailable.
func (c *Cluster) Stop() {
	c.once.Do(func() {
		c.mu.Lock()
		members := c.Members
		c.Members = make([]*embed.Etcd, len(members))
		c.mu.Unlock()
		for i, e := range members {
			if e != nil {
				e.Close()
			}
			c.closed(i)
		}
	})
}

// Member is member i, nil while it is killed.
func (c *Cluster) Member(i int) *embed.Etcd {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Members[i]
}

// Leader is the index of the member that is raft's leader as a running
// member sees it, -1 while none is known (an election under way).
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.Members {
		if e == nil {
			continue
		}
		lead := e.Server.Leader()
		for j, m := range c.Members {
			if m != nil && m.Server.MemberID() == lead {
				return j
			}
		}
	}
	return -1
}

// Kill stops member i as a crash does: its raft stops at once, without
// handing its leadership to another member (Close alone would, a graceful
// stop), so when it led the others elect a leader among themselves after
// their election timeout; then its listeners close and its clients'
// connections drop.
// Kill returns once raft stopped; the listeners close in the background
// (a graceful close waits seconds for the clients' streams), and Restart
// and Stop wait for them. A test that wants the clients' connections to
// drop at once reaches the member through a Proxy and cuts it.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	e := c.Members[i]
	c.Members[i] = nil
	closed := make(chan struct{})
	c.closing[i] = closed
	c.mu.Unlock()
	if e == nil {
		close(closed)
		return
	}
	e.Server.HardStop()
	go func() { defer close(closed); e.Close() }()
}

// closed waits until member i's last Kill has closed it.
func (c *Cluster) closed(i int) {
	c.mu.Lock()
	ch := c.closing[i]
	c.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// MoveLeader makes member i raft's leader (etcd's leadership transfer),
// so that a test can kill the member a process depends on while it leads.
func (c *Cluster) MoveLeader(t testing.TB, i int) {
	t.Helper()
	lead := c.Leader()
	if lead < 0 {
		t.Fatal("no etcd leader to move")
	}
	if lead == i {
		return
	}
	from, to := c.Member(lead), c.Member(i)
	if from == nil || to == nil {
		t.Fatalf("etcd member %d or %d is not running", lead, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := from.Server.MoveLeader(ctx, uint64(from.Server.MemberID()), uint64(to.Server.MemberID())); err != nil {
		t.Fatalf("move the etcd leadership from member %d to %d: %v", lead, i, err)
	}
}

// Restart starts member i again on its data directory and ports after
// Kill, and waits until it serves (it has caught up with the leader).
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	c.closed(i)
	e, err := embed.StartEtcd(c.cfgs[i])
	if err != nil {
		t.Fatalf("restart etcd member %d: %v", i, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatalf("etcd member %d not ready 30s after its restart", i)
	}
	c.mu.Lock()
	c.Members[i] = e
	c.mu.Unlock()
}

func freeURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

func mustURL(s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return *u
}

// Proxy forwards TCP connections from a 127.0.0.1 port to a target until
// it is closed; closing it drops every connection and refuses new ones.
type Proxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
	cut    bool
}

// NewProxy starts a proxy to target (host:port, or a URL whose host is
// taken), closed at the test's end.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	if u, err := url.Parse(target); err == nil && u.Host != "" {
		target = u.Host
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{l: l, target: target}
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's address as an etcd endpoint.
func (p *Proxy) URL() string { return "http://" + p.l.Addr().String() }

func (p *Proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed || p.cut {
			p.mu.Unlock()
			in.Close()
			out.Close()
			continue
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go func() { io.Copy(out, in); out.Close() }()
		go func() { io.Copy(in, out); in.Close() }()
	}
}

// Cut drops every connection and refuses new ones until Heal: the
// process behind it is cut off from etcd.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Close cuts every connection and refuses new ones.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.l.Close()
	for _, c := range p.conns {
		c.Close()
	}
}
