package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/riskguard/riskguard/internal/printable"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// ErrNotLeader is the error of a state write refused because this process
// no longer holds the account's leader key: a deposed leader cannot write.
var ErrNotLeader = errors.New("ha: not the leader (the leader key is gone or another's)")

// Seat is one account's election as this process sees it; it satisfies
// the engine's Leadership and SharedState.
type Seat struct {
	n       *Node
	account string
	pfx     string // PREFIX/accounts/NAME/

	// release asks the leadership to end: the accounts are spread anew.
	release chan struct{}
	// won is signalled (never closed) each time this process starts to
	// lead the account, so its engine ticks at once (Won).
	won chan struct{}

	mu     sync.Mutex
	leader bool
	// handing: the leadership is being handed over; MayAct is false.
	handing bool
	key     string // the leader key while leader
	rev     int64  // its create revision: the term
	since   time.Time
	// current is the leader as last observed (this process's own value
	// while it leads); zero when none was seen.
	current Member
	curRev  int64
	// sawOther: another process led since this one started; winning then
	// is a failover.
	sawOther bool
	// written is the state parts as last written or read as leader: the
	// base of SaveState's difference.
	written map[string]string
	writes  int // parts written, for the tests and the figures
}

// Account is the seat's account name.
func (s *Seat) Account() string { return s.account }

func (s *Seat) electionPrefix() string { return s.pfx + "leader" }
func (s *Seat) statePrefix() string    { return s.pfx + "state/" }

// campaign runs the account's election on one lease until ctx is done:
// it follows who leads, and campaigns while this process has room for
// one more account (spread.go).
func (s *Seat) campaign(ctx context.Context, sess *concurrency.Session, value string) {
	octx, ocancel := context.WithCancel(ctx)
	observed := make(chan struct{})
	go func() { defer close(observed); s.observe(octx, concurrency.NewElection(sess, s.electionPrefix())) }()
	defer func() { ocancel(); <-observed }()
	for ctx.Err() == nil {
		if !s.n.waitRoom(ctx) {
			return
		}
		if !s.campaignOnce(ctx, sess, value) {
			wait(ctx, 200*time.Millisecond) // etcd refused the campaign: not in a hot loop
		}
	}
}

// campaignOnce waits to win (or withdraws once this process is full),
// leads until ctx is done, the leader key is deleted under it (an
// operator, or etcd's expiry of a lease this process still thinks held)
// or the account is handed over, and steps down, resigning when etcd
// answers. It reports false when etcd refused the campaign.
func (s *Seat) campaignOnce(ctx context.Context, sess *concurrency.Session, value string) bool {
	el := concurrency.NewElection(sess, s.electionPrefix())
	cctx, ccancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); s.n.whileRoom(cctx, ccancel) }()
	var err error
	if s.n.loseCampaign(s.account) {
		err = s.putAnswerLost(sess, value)
	} else {
		err = el.Campaign(cctx, value)
	}
	withdrawn := cctx.Err() != nil // full (or ctx done), not refused
	ccancel()
	<-watched
	if err != nil {
		// A campaign that did not win may have left its key in the
		// election: etcd applied the put whose answer was lost (the
		// campaign was withdrawn while the put was on its way), or
		// Campaign's own clean-up (one Resign, its error dropped) did not
		// reach etcd. A full process does not campaign again, so the key
		// would stay for as long as this lease lives; once it heads the
		// queue the account has a leader key and no guard, and every
		// process with room waits behind it (issue 32, item 8).
		s.withdraw(ctx, sess)
		return withdrawn
	}
	if !s.n.take(s) {
		// Won while full (another seat of this process won meanwhile):
		// resign before ever acting, for one that has room.
		s.resign(ctx, sess, el)
		return true
	}
	s.mu.Lock()
	s.leader, s.key, s.rev, s.since = true, el.Key(), el.Rev(), time.Now()
	s.current, s.curRev = s.n.me, el.Rev()
	failover := s.sawOther
	s.written = nil
	s.mu.Unlock()
	s.n.metrics.setLeader(s.account, true)
	select {
	case s.won <- struct{}{}:
	default: // a signal not yet taken wakes the engine all the same
	}
	if failover {
		s.n.metrics.failover()
	}
	s.n.event(s.account, "warning", fmt.Sprintf("ha: %s leads account %s (term %d)", s.n.cfg.Host, s.account, el.Rev()))
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	gone := s.n.cli.Watch(wctx, el.Key(), clientv3.WithRev(el.Rev()))
	lead := true
	for lead {
		select {
		case <-ctx.Done():
			lead = false
		case <-s.release:
			if s.n.holds(s) {
				// Asked of a leadership that has ended: this one is
				// counted. The question is whether the spread still
				// counts this leadership, not whether a signal came: a
				// hand-over asked between take and here is not lost.
				continue
			}
			// MayAct answers false from now on (the same lock), so no
			// call starts; one that passed the check before is bounded
			// by engine.action_timeout, and the margin is the same wait
			// a lapsing lease gives (docs/ha.md, fencing). The state
			// writes still go through meanwhile (fenced on the key).
			s.mu.Lock()
			s.handing = true
			s.current.HandingOver = true
			s.mu.Unlock()
			stopped := time.Now()
			s.n.metrics.setLeader(s.account, false)
			s.n.metrics.handedOver(s.account, 1)
			s.proclaimHandingOver(ctx, el)
			wait(ctx, s.n.margin-time.Since(stopped))
			lead = false
		case wr, ok := <-gone:
			if !ok {
				gone = nil // the watch ended with its context
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					lead = false
				}
			}
		}
	}
	s.mu.Lock()
	s.leader, s.handing, s.key, s.rev = false, false, "", 0
	s.mu.Unlock()
	s.n.drop(s)
	s.n.metrics.setLeader(s.account, false)
	s.resign(ctx, sess, el)
	s.n.event(s.account, "warning", fmt.Sprintf("ha: %s no longer leads account %s", s.n.cfg.Host, s.account))
	return true
}

// resign deletes this process's leader key of the account, trying again
// until etcd answers: a key left behind keeps the election on this
// process, which no longer acts for the account, for as long as its lease
// lives — the others would wait behind it for good, and the account would
// have no guard. It stops when ctx is done or the lease has ended (the
// key goes with it). Resign is fenced on the key's revision: a key
// already gone, or another's, is left alone.
func (s *Seat) resign(ctx context.Context, sess *concurrency.Session, el *concurrency.Election) {
	s.untilAnswered(ctx, sess, "resigned the account's leadership", "could not resign the account's leadership",
		func() error { return s.n.resignOnce(el) })
}

// untilAnswered runs once until it succeeds, every 200 ms, while ctx and
// the session last: a write etcd did not answer is tried again, never
// given up. The first failure is logged as failed, a later success as
// done.
func (s *Seat) untilAnswered(ctx context.Context, sess *concurrency.Session, done, failed string, once func() error) {
	for said := false; ; said = true {
		err := once()
		if err == nil {
			if said {
				s.n.log.Info("ha: "+done, "account", s.account)
			}
			return
		}
		if !said {
			s.n.log.Warn("ha: "+failed+"; trying again until etcd answers", "account", s.account, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// withdraw deletes this lease's key from the account's election, when it
// is there, trying again until etcd answers as resign does: after a
// campaign that did not win, no key of this process may stay in the
// queue. The key is the one Campaign writes (the election prefix and the
// lease in hex), deleted only while it is on this lease.
func (s *Seat) withdraw(ctx context.Context, sess *concurrency.Session) {
	key := fmt.Sprintf("%s/%x", s.electionPrefix(), sess.Lease())
	s.untilAnswered(ctx, sess, "withdrew the account's campaign", "could not withdraw the account's campaign",
		func() error { return s.n.withdrawOnce(key, sess.Lease()) })
}

// putAnswerLost is a campaign whose put etcd applied and whose answer was
// lost (tests: LoseCampaigns): the key Campaign writes, on this lease, and
// an error.
func (s *Seat) putAnswerLost(sess *concurrency.Session, value string) error {
	key := fmt.Sprintf("%s/%x", s.electionPrefix(), sess.Lease())
	// The put lands whether or not the campaign was withdrawn meanwhile.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := s.n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(sess.Lease()))).Commit()
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	return errCampaignLost
}

// Won delivers a value each time this process starts to lead the
// account: the engine ticks at once then (its states are warm from its
// dry-run ticks as a standby), rather than up to an interval later.
func (s *Seat) Won() <-chan struct{} { return s.won }

// proclaimHandingOver rewrites the leader key's value to say the account
// is being handed over, so `riskguard ha status` and the other processes
// see it (Proclaim is fenced on the key: a deposed leader changes
// nothing). Best effort: MayAct is already false.
func (s *Seat) proclaimHandingOver(ctx context.Context, el *concurrency.Election) {
	me := s.n.me
	me.HandingOver = true
	v, _ := json.Marshal(me)
	pctx, cancel := context.WithTimeout(ctx, s.n.margin/2)
	defer cancel()
	if err := el.Proclaim(pctx, string(v)); err != nil {
		s.n.log.Warn("ha: could not say the hand-over in etcd", "account", s.account, "err", err)
	}
}

// handOver asks the leadership to end (spread.go): MayAct turns false at
// once, the key is resigned a margin later.
func (s *Seat) handOver() {
	select {
	case s.release <- struct{}{}:
	default:
	}
}

// HandingOver reports whether this process is handing the account over to
// another (the accounts are spread anew): it starts no call, but may
// still write the state of the calls it made, so the next leader has
// their cooldowns.
func (s *Seat) HandingOver() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handing
}

// observe follows who leads, for a standby's answers and the status.
func (s *Seat) observe(ctx context.Context, el *concurrency.Election) {
	for resp := range el.Observe(ctx) {
		if len(resp.Kvs) == 0 {
			continue
		}
		var m Member
		if json.Unmarshal(resp.Kvs[0].Value, &m) != nil {
			continue
		}
		s.mu.Lock()
		s.current, s.curRev = m, resp.Kvs[0].CreateRevision
		if m.Host != s.n.cfg.Host {
			s.sawOther = true
		}
		s.mu.Unlock()
	}
}

// MayAct reports whether this process may start a mutating call for the
// account now: it leads, and more than the margin of its lease is left by
// its own monotonic clock, counted from the send time of the last renewal
// etcd acknowledged. now is the caller's time and is not used for the
// lease: a replayed or adjusted clock must not stretch it.
func (s *Seat) MayAct(now time.Time) (bool, string) {
	s.mu.Lock()
	leader, handing, cur := s.leader, s.handing, s.current
	s.mu.Unlock()
	if !leader {
		return false, "standby: " + s.whereLeader(cur)
	}
	if handing {
		return false, fmt.Sprintf("handing account %s over: the accounts are spread anew over the live processes", s.account)
	}
	left, age, leased := s.n.leaseLeft()
	if !leased || left <= 0 {
		return false, fmt.Sprintf("the lease was last renewed %s ago (etcd unreachable?): less than %s of lease_ttl %s left, so no call may start", age.Round(time.Millisecond), s.n.margin, s.n.ttl)
	}
	return true, ""
}

func (s *Seat) whereLeader(cur Member) string {
	switch {
	case cur.Host == "":
		return fmt.Sprintf("no leader of account %s seen yet", s.account)
	case cur.Advertise != "":
		return fmt.Sprintf("account %s is led by %s (http://%s)", s.account, cur.Host, cur.Advertise)
	default:
		return fmt.Sprintf("account %s is led by %s", s.account, cur.Host)
	}
}

// Term is the leader key's create revision while this process leads, 0
// otherwise: it grows with every election won.
func (s *Seat) Term() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// Leader is the leader as last observed and whether it is this process.
func (s *Seat) Leader() (Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current, s.leader
}

// The roles of a process for an account.
const (
	// RoleLeader sends the account's calls.
	RoleLeader = "leader"
	// RoleHandingOver still holds the leader key but sends no call: the
	// accounts are spread anew and the key is resigned a margin later.
	RoleHandingOver = "handing-over"
	// RoleStandby evaluates in dry run and follows the leader.
	RoleStandby = "standby"
)

// Status is a seat as the status page shows it.
type Status struct {
	Account string `json:"account"`
	// Role is RoleLeader, RoleHandingOver or RoleStandby.
	Role string `json:"role"`
	Host string `json:"host"`
	// Term is the leadership's term (the leader key's revision) when
	// this process leads, else the observed leader's.
	Term int64 `json:"term"`
	// LeaseAge is how long ago the last acknowledged renewal was sent.
	LeaseAge time.Duration `json:"leaseAgeNs"`
	// LeaseAgeText is LeaseAge for people.
	LeaseAgeText string   `json:"leaseAge"`
	Leader       Member   `json:"leader"`
	Members      []Member `json:"members"`
	EtcdUp       bool     `json:"etcdUp"`
}

// Status says the seat's role, term, lease age and the other members.
func (s *Seat) Status() Status {
	s.mu.Lock()
	st := Status{Account: s.account, Role: RoleStandby, Host: s.n.cfg.Host, Term: s.curRev, Leader: s.current}
	switch {
	case s.leader && s.handing:
		st.Role, st.Term = RoleHandingOver, s.rev
	case s.leader:
		st.Role, st.Term = RoleLeader, s.rev
	}
	s.mu.Unlock()
	_, age, _ := s.n.leaseLeft()
	st.LeaseAge, st.LeaseAgeText = age, age.Round(time.Millisecond).String()
	st.Members, st.EtcdUp = s.n.Members(), s.n.EtcdUp()
	return st
}

// LoadState reads the account's shared state parts, by name. A leader
// takes them as the base of its next writes.
func (s *Seat) LoadState(ctx context.Context) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.n.margin)
	defer cancel()
	resp, err := s.n.cli.Get(ctx, s.statePrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("ha: load state of account %s: %w", s.account, err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	base := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), s.statePrefix())
		out[name] = kv.Value
		base[name] = string(kv.Value)
	}
	s.mu.Lock()
	if s.leader {
		s.written = base
	}
	s.mu.Unlock()
	return out, nil
}

// SaveState writes the parts that differ from those last written (and
// deletes those no longer given), in one transaction conditioned on the
// leader key's create revision: a process that lost the leadership
// writes nothing (ErrNotLeader). It returns how many parts it wrote.
func (s *Seat) SaveState(ctx context.Context, parts map[string][]byte) (int, error) {
	s.mu.Lock()
	leader, key, rev := s.leader, s.key, s.rev
	base := s.written
	s.mu.Unlock()
	if _, _, leased := s.n.leaseLeft(); !leader || !leased {
		// A lease given up on is no leadership, while the seat still
		// waits the margin before it resigns.
		return 0, ErrNotLeader
	}
	var ops []clientv3.Op
	next := make(map[string]string, len(parts))
	for name, v := range parts {
		next[name] = string(v)
		if old, ok := base[name]; !ok || old != string(v) {
			ops = append(ops, clientv3.OpPut(s.statePrefix()+name, string(v)))
		}
	}
	for name := range base {
		if _, ok := parts[name]; !ok {
			ops = append(ops, clientv3.OpDelete(s.statePrefix()+name))
		}
	}
	if len(ops) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.n.margin)
	defer cancel()
	resp, err := s.n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("ha: save state of account %s: %w", s.account, err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("save state of account %s (term %d): %w", s.account, rev, ErrNotLeader)
	}
	s.mu.Lock()
	if s.rev == rev {
		s.written = next
		s.writes += len(ops)
	}
	s.mu.Unlock()
	return len(ops), nil
}

// SaveIntent writes a call's intent (engine.IntentStore) under the
// state's intents/ before the call leaves, in a transaction conditioned on
// the leader key's create revision as SaveState's: a deposed leader writes
// none (ErrNotLeader), and its call does not leave. SaveState neither
// writes nor deletes it: DropIntent does, once the state that counts the
// call's cooldown is saved.
func (s *Seat) SaveIntent(ctx context.Context, id string, intent []byte) error {
	return s.fenced(ctx, "intent "+id, clientv3.OpPut(s.statePrefix()+"intents/"+id, string(intent)))
}

// DropIntent deletes an intent SaveIntent wrote, fenced as it is.
func (s *Seat) DropIntent(ctx context.Context, id string) error {
	name := "intents/" + id
	err := s.fenced(ctx, "drop intent "+id, clientv3.OpDelete(s.statePrefix()+name))
	if err == nil {
		s.mu.Lock()
		delete(s.written, name)
		s.mu.Unlock()
	}
	return err
}

// fenced runs ops in one transaction conditioned on this seat's leader
// key's create revision.
func (s *Seat) fenced(ctx context.Context, what string, ops ...clientv3.Op) error {
	s.mu.Lock()
	leader, key, rev := s.leader, s.key, s.rev
	s.mu.Unlock()
	if _, _, leased := s.n.leaseLeft(); !leader || !leased {
		return ErrNotLeader
	}
	ctx, cancel := context.WithTimeout(ctx, s.n.margin)
	defer cancel()
	resp, err := s.n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("ha: %s of account %s: %w", what, s.account, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%s of account %s (term %d): %w", what, s.account, rev, ErrNotLeader)
	}
	s.mu.Lock()
	s.writes += len(ops)
	s.mu.Unlock()
	return nil
}

// Writes counts the state parts this seat wrote.
func (s *Seat) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes
}

// ErrLeaderUnverified is the error of LiveLeader when etcd's leader value
// is not backed by a live member: no member key of its host, or one on
// another lease, or another advertised address. A value someone wrote by
// hand under the election prefix is such a value.
var ErrLeaderUnverified = errors.New("ha: the leader value in etcd is not a live member's")

// LiveLeader reads the account's leader from etcd and checks it is a live
// member's: the leader key is held by the lease of the member key of the
// host it names (a process's member key and its campaigns share its
// session's lease), and that member advertises the same address. Only
// then may a command be forwarded to the address: one etcd key written by
// someone else must not be enough to receive the account's commands.
func (s *Seat) LiveLeader(ctx context.Context) (Member, error) {
	resp, err := s.n.cli.Get(ctx, s.electionPrefix()+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return Member{}, fmt.Errorf("ha: read the leader of %s: %w", s.account, err)
	}
	if len(resp.Kvs) == 0 {
		return Member{}, fmt.Errorf("%w: account %s has no leader", ErrLeaderUnverified, s.account)
	}
	lk := resp.Kvs[0]
	var m Member
	if err := json.Unmarshal(lk.Value, &m); err != nil || m.Host == "" {
		return Member{}, fmt.Errorf("%w: account %s's leader value is not a member's", ErrLeaderUnverified, s.account)
	}
	mresp, err := s.n.cli.Get(ctx, s.n.memberPrefix()+m.Host)
	if err != nil {
		return Member{}, fmt.Errorf("ha: read the member %s: %w", printableHost(m.Host), err)
	}
	if len(mresp.Kvs) == 0 {
		return Member{}, fmt.Errorf("%w: account %s's leader %s is not a live member", ErrLeaderUnverified, s.account, printableHost(m.Host))
	}
	mk := mresp.Kvs[0]
	var live Member
	switch {
	case lk.Lease == 0 || mk.Lease != lk.Lease:
		return Member{}, fmt.Errorf("%w: account %s's leader key is not held by the lease of member %s", ErrLeaderUnverified, s.account, printableHost(m.Host))
	case json.Unmarshal(mk.Value, &live) != nil || live.Advertise != m.Advertise:
		return Member{}, fmt.Errorf("%w: account %s's leader value names another address than member %s advertises", ErrLeaderUnverified, s.account, printableHost(m.Host))
	}
	return m, nil
}

// printableHost is a host name from etcd as an error may quote it: at most
// 64 characters, control characters escaped.
func printableHost(h string) string { return printable.Bounded(h, 64) }
