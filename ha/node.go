package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Member is one process as it announces itself: in its member key and in
// the value of each election it wins.
type Member struct {
	Host      string    `json:"host"`
	Advertise string    `json:"advertise,omitempty"`
	Started   time.Time `json:"started"`
	// HandingOver: as a leader key's value, the leader is handing the
	// account over and sends no call (the accounts are spread anew).
	HandingOver bool `json:"handingOver,omitempty"`
	// Accounts are the accounts this process guards, name → a fingerprint
	// of the exchange account (of its API key, never the key or the
	// secret): two processes that name one exchange account differently,
	// or two exchange accounts alike, are refused (CheckAccounts).
	Accounts map[string]string `json:"accounts,omitempty"`
}

// Event is something an operator should hear of: etcd unreachable, a
// leadership won or lost.
type Event struct {
	Account  string // "" for the whole process
	Severity string // info, warning, critical
	Text     string
}

// Options are a Node's collaborators.
type Options struct {
	// Logger; nil discards.
	Logger *slog.Logger
	// OnEvent, when set, hears the events; it must not block.
	OnEvent func(Event)
	// Metrics; nil records none.
	Metrics *Metrics
	// Accounts are the accounts this process guards, name → a fingerprint
	// of its exchange account (never the secret): published with the
	// member and compared by CheckAccounts.
	Accounts map[string]string
}

// Node is this process in the cluster: one etcd client, one lease (a
// concurrency.Session) and, per account, a Seat that campaigns for it.
type Node struct {
	cfg     Config
	cli     *clientv3.Client
	log     *slog.Logger
	onEvent func(Event)
	metrics *Metrics
	me      Member
	ttl     time.Duration
	margin  time.Duration

	mu    sync.Mutex
	seats map[string]*Seat
	// lastAck is when the last renewal of the current lease that etcd
	// acknowledged was *sent*, on this process's monotonic clock: etcd
	// keeps the lease at least ttl after it received that renewal, so at
	// least ttl after lastAck.
	lastAck time.Time
	leased  bool // a lease is held (lastAck is of it)
	// sess is the current lease's session (tests end it: EndSession).
	sess   *concurrency.Session
	etcdUp bool
	// downSaid: the etcd-unreachable event was sent for this outage.
	downSaid bool
	members  []Member
	// The spread (spread.go): held is the seats this process leads and
	// may act for, by when each was won; quota is how many it may lead;
	// lower/lowerSince is a smaller quota waiting out the settle delay;
	// changed is closed (and replaced) when quota or held change, waking
	// the seats that wait for room.
	held       map[*Seat]time.Time
	quota      int
	lower      int
	lowerSince time.Time
	changed    chan struct{}
	// failResigns makes that many resignations fail before they reach
	// etcd, as a slow etcd's would (tests: export_test.go).
	failResigns int
	// loseCampaigns makes that many campaigns of an account put their key
	// and lose etcd's answer (tests: export_test.go).
	loseCampaigns map[string]int
}

// New connects to etcd (the connection is made lazily: an unreachable etcd
// is a standby, not a failure to start).
func New(cfg Config, o Options) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc, err := cfg.clientConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("ha: etcd client: %w", err)
	}
	n := &Node{cfg: cfg, cli: cli, log: o.Logger, onEvent: o.OnEvent, metrics: o.Metrics, seats: map[string]*Seat{},
		held: map[*Seat]time.Time{}, changed: make(chan struct{}),
		ttl: cfg.LeaseTTL, margin: cfg.Margin(), me: Member{Host: cfg.Host, Advertise: cfg.Advertise, Started: time.Now().UTC(), Accounts: o.Accounts}}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	return n, nil
}

func nopLogger() *zap.Logger { return zap.NewNop() }

// errResignFailed is the error of a resignation failResigns failed.
var errResignFailed = errors.New("resign failed (test)")

// resignOnce resigns el's leadership, waiting at most a second for etcd.
func (n *Node) resignOnce(el *concurrency.Election) error {
	n.mu.Lock()
	fail := n.failResigns > 0
	if fail {
		n.failResigns--
	}
	n.mu.Unlock()
	if fail {
		return errResignFailed
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return el.Resign(ctx)
}

// errCampaignLost is the error of a campaign loseCampaigns lost.
var errCampaignLost = errors.New("campaign answer lost (test)")

// loseCampaign reports whether the account's next campaign is to lose its
// answer (loseCampaigns), counting it.
func (n *Node) loseCampaign(account string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.loseCampaigns[account] == 0 {
		return false
	}
	n.loseCampaigns[account]--
	return true
}

// withdrawOnce deletes an election key of this process while it is on
// lease, waiting at most a second for etcd.
func (n *Node) withdrawOnce(key string, lease clientv3.LeaseID) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := n.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return fmt.Errorf("withdraw %s: %w", key, err)
	}
	return nil
}

// ErrAccountsDiffer is the error of a process whose accounts another live
// member of the cluster guards under another name, or whose account name
// another member uses for another exchange account.
var ErrAccountsDiffer = errors.New("the cluster's configs disagree on the accounts")

// CheckAccounts compares this process's accounts (Options.Accounts) with
// those of the live members in etcd: one exchange account under two names
// would be two elections, each leader sending every order; one name for
// two exchange accounts would be one election guarding only one of them.
// Either is ErrAccountsDiffer, naming both. A process starting alone, or
// with members that publish no accounts, passes.
func (n *Node) CheckAccounts(ctx context.Context) error {
	if len(n.me.Accounts) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.margin)
	defer cancel()
	resp, err := n.cli.Get(ctx, n.memberPrefix(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("ha: read the members to compare the accounts: %w", err)
	}
	var errs []error
	for _, kv := range resp.Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) != nil || m.Host == n.me.Host {
			continue
		}
		for name, fp := range n.me.Accounts {
			for theirs, tfp := range m.Accounts {
				switch {
				case name == theirs && fp != tfp:
					errs = append(errs, fmt.Errorf("%w: account %q is one exchange account here (fingerprint %s) and another on %s (fingerprint %s): one election would guard only one of them", ErrAccountsDiffer, name, fp, m.Host, tfp))
				case name != theirs && fp == tfp:
					errs = append(errs, fmt.Errorf("%w: account %q here and account %q on %s are one exchange account (fingerprint %s): two leaders would send every order twice", ErrAccountsDiffer, name, theirs, m.Host, fp))
				}
			}
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// Close closes the etcd client; call it after Run returned.
func (n *Node) Close() error { return n.cli.Close() }

// Host is this process's name among the members.
func (n *Node) Host() string { return n.cfg.Host }

// Seat returns the account's seat, made on first use; seats made after Run
// started campaign from the next lease on.
func (n *Node) Seat(account string) *Seat {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s, ok := n.seats[account]; ok {
		return s
	}
	s := &Seat{n: n, account: account, pfx: n.accountPrefix(account), release: make(chan struct{}, 1), won: make(chan struct{}, 1)}
	n.seats[account] = s
	n.metrics.setLeader(account, false)
	n.metrics.handedOver(account, 0)
	return s
}

func (n *Node) accountPrefix(account string) string {
	return strings.TrimSuffix(n.cfg.Prefix, "/") + "/accounts/" + account + "/"
}

func (n *Node) memberPrefix() string { return strings.TrimSuffix(n.cfg.Prefix, "/") + "/members/" }

func (n *Node) event(account, severity, text string) {
	lvl := slog.LevelInfo
	switch severity {
	case "warning":
		lvl = slog.LevelWarn
	case "critical":
		lvl = slog.LevelError
	}
	n.log.Log(context.Background(), lvl, text, "account", account)
	if n.onEvent != nil {
		n.onEvent(Event{Account: account, Severity: severity, Text: text})
	}
}

// Run holds a lease and campaigns for every seat until ctx is done, then
// resigns the leaderships it holds. A lease that is lost (not renewed
// within its TTL by this process's clock, or gone on etcd's side) steps
// every seat down; a new lease is then asked for, until etcd answers.
// Cancel ctx only once this process sends no more calls: a resignation
// lets a standby act at once.
func (n *Node) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		sess, err := n.newSession(ctx)
		if err != nil {
			n.unreachable(err)
			wait(ctx, time.Second)
			continue
		}
		n.hold(ctx, sess)
	}
	return nil
}

// newSession grants a lease; the time its request was sent is its first
// acknowledged renewal.
func (n *Node) newSession(ctx context.Context) (*concurrency.Session, error) {
	gctx, cancel := context.WithTimeout(ctx, n.margin)
	defer cancel()
	sent := time.Now()
	lease, err := n.cli.Grant(gctx, int64(n.ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("grant lease: %w", err)
	}
	sess, err := concurrency.NewSession(n.cli, concurrency.WithLease(lease.ID), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	n.mu.Lock()
	n.lastAck, n.leased = sent, true
	n.mu.Unlock()
	n.reachable()
	return sess, nil
}

// hold runs one lease: the member key, the seats' campaigns and the
// measured renewals, until the lease is lost or ctx is done.
func (n *Node) hold(ctx context.Context, sess *concurrency.Session) {
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	n.mu.Lock()
	n.sess = sess
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.leased, n.sess = false, nil
		n.mu.Unlock()
		// Acting stopped now: MayAct answers false. A call that passed the
		// check just before is bounded by the margin, as at a hand-over:
		// the seats resign and the lease is revoked only after it, so that
		// no other process acts while that call may still land (a session
		// whose keep-alive the client closed while the lease still holds
		// on etcd would otherwise hand the account over at once). A
		// process stopping (ctx done) sends no more calls: no wait.
		if ctx.Err() == nil {
			wait(ctx, n.margin)
		}
		cancel()
		wg.Wait() // every seat stepped down (and resigned when it could)
		sess.Orphan()
		n.revoke(ctx, sess.Lease())
	}()
	me, _ := json.Marshal(n.me)
	pctx, pcancel := context.WithTimeout(lctx, n.margin)
	_, err := n.cli.Put(pctx, n.memberPrefix()+n.cfg.Host, string(me), clientv3.WithLease(sess.Lease()))
	pcancel()
	if err != nil {
		n.unreachable(err)
		return
	}
	// The live members decide how many accounts this process may lead
	// before any seat campaigns.
	n.refreshMembers(lctx)
	n.rebalance(time.Now(), true)
	n.mu.Lock()
	seats := make([]*Seat, 0, len(n.seats))
	for _, s := range n.seats {
		seats = append(seats, s)
	}
	n.mu.Unlock()
	for _, s := range seats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.campaign(lctx, sess, string(me))
		}()
	}
	n.renew(lctx, sess)
}

// revoke ends a lease given up on, with the leader keys attached to it,
// trying again until etcd answers or three TTLs passed: a lease left alive
// (etcd extends every lease when its own leader changes) would hold the
// elections on a process that no longer acts, and its accounts would have
// no guard. A process stopping (ctx done) tries once.
func (n *Node) revoke(ctx context.Context, lease clientv3.LeaseID) {
	deadline := time.Now().Add(3 * n.ttl)
	for said := false; ; said = true {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		_, err := n.cli.Revoke(rctx, lease)
		rcancel()
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			if said {
				n.log.Info("ha: revoked the lease given up on", "lease", int64(lease))
			}
			return
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			n.log.Warn("ha: could not revoke the lease given up on; it expires on etcd's side", "lease", int64(lease), "err", err)
			return
		}
		if !said {
			n.log.Warn("ha: could not revoke the lease given up on; trying again until etcd answers", "lease", int64(lease), "err", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// renew renews the lease every sixth of its TTL, measuring each renewal
// from the time it was sent, and returns when the lease is lost: etcd
// said it is gone, or no renewal was acknowledged for a whole TTL by this
// process's clock (etcd may have let it expire).
func (n *Node) renew(ctx context.Context, sess *concurrency.Session) {
	every := max(n.ttl/6, 100*time.Millisecond)
	for {
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, n.margin)
		resp, err := n.cli.KeepAliveOnce(rctx, sess.Lease())
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && resp.TTL > 0:
			n.mu.Lock()
			n.lastAck = sent
			n.mu.Unlock()
			n.reachable()
			n.refreshMembers(ctx)
			n.rebalance(time.Now(), false)
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil:
			n.event("", "critical", "ha: the lease expired on etcd's side: every leadership of this process ended; campaigning again")
			return
		default:
			n.unreachable(err)
		}
		n.mu.Lock()
		age := time.Since(n.lastAck)
		n.mu.Unlock()
		n.metrics.leaseAge(age)
		if age >= n.ttl {
			n.event("", "critical", fmt.Sprintf("ha: the lease was not renewed for %s (its TTL): this process stopped acting %s before, and campaigns again once etcd answers", age.Round(time.Millisecond), n.margin))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			n.event("", "critical", "ha: the lease's session ended: every leadership of this process ended; campaigning again")
			return
		case <-time.After(every):
		}
	}
}

// refreshMembers reads the live members for the status (best effort).
func (n *Node) refreshMembers(ctx context.Context) {
	gctx, cancel := context.WithTimeout(ctx, n.margin)
	defer cancel()
	resp, err := n.cli.Get(gctx, n.memberPrefix(), clientv3.WithPrefix())
	if err != nil {
		return
	}
	var ms []Member
	for _, kv := range resp.Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) == nil {
			ms = append(ms, m)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Host < ms[j].Host })
	n.mu.Lock()
	n.members = ms
	n.mu.Unlock()
}

func (n *Node) unreachable(err error) {
	n.mu.Lock()
	said := n.downSaid
	n.etcdUp, n.downSaid = false, true
	n.mu.Unlock()
	n.metrics.setEtcdUp(false)
	if !said {
		n.event("", "critical", fmt.Sprintf("ha: etcd unreachable (%v): a leader keeps acting until its lease would have expired by its own clock (lease_ttl %s minus %s), then stops; a standby cannot take over until etcd answers", err, n.ttl, n.margin))
	}
}

func (n *Node) reachable() {
	n.mu.Lock()
	was := n.downSaid
	n.etcdUp, n.downSaid = true, false
	n.mu.Unlock()
	n.metrics.setEtcdUp(true)
	if was {
		n.event("", "info", "ha: etcd answers again")
	}
}

// leaseLeft is how much of the lease this process may still use, by its
// own monotonic clock, and the age of the last acknowledged renewal.
func (n *Node) leaseLeft() (left, age time.Duration, leased bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.leased {
		return 0, 0, false
	}
	age = time.Since(n.lastAck)
	return n.ttl - n.margin - age, age, true
}

// Members are the live processes, as last read.
func (n *Node) Members() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.members)
}

// EtcdUp reports whether the last request to etcd was answered.
func (n *Node) EtcdUp() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.etcdUp
}

func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
