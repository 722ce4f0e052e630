package ha

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// The spread: with A accounts and N live members (the member keys, each
// on its process's lease), a process leads at most ⌈A/N⌉ accounts. It
// campaigns for an account only while it leads fewer; a won election that
// finds it already full is resigned before it ever acts. When a member
// joins, ⌈A/N⌉ drops and each process hands over its surplus: the
// leaderships it won last (the oldest stay where they are). A member that
// leaves (its lease expires with its leader keys) raises ⌈A/N⌉ at once,
// so the others campaign for its accounts within one renewal (TTL/6); a
// lower quota waits out Settle first, so a member that flaps does not
// move accounts back and forth.

// Settle is how long a lower quota (a member joined) must hold before
// this process hands accounts over: half the lease.
func (c Config) Settle() time.Duration { return c.LeaseTTL / 2 }

// Quota is how many accounts this process may lead now, and how many live
// members it counts (itself included).
func (n *Node) Quota() (quota, live int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.quota, n.liveLocked()
}

// liveLocked counts the members as last read, this process included even
// when its key was not read yet.
func (n *Node) liveLocked() int {
	live := len(n.members)
	if !slices.ContainsFunc(n.members, func(m Member) bool { return m.Host == n.cfg.Host }) {
		live++
	}
	return live
}

// rebalance sets the quota from the live members: a higher one at once, a
// lower one once it has held for Settle (or at once when start is set: a
// new lease leads nothing yet). It hands over the surplus, last won first.
func (n *Node) rebalance(now time.Time, start bool) {
	n.mu.Lock()
	accounts := len(n.seats)
	live := n.liveLocked()
	target := (accounts + live - 1) / live
	old := n.quota
	switch {
	case start || target >= n.quota:
		n.quota, n.lowerSince = target, time.Time{}
	case n.lowerSince.IsZero() || n.lower != target:
		n.lower, n.lowerSince = target, now
	case now.Sub(n.lowerSince) >= n.cfg.Settle():
		n.quota, n.lowerSince = target, time.Time{}
	}
	var surplus []*Seat
	if extra := len(n.held) - n.quota; extra > 0 {
		for s := range n.held {
			surplus = append(surplus, s)
		}
		// Last won first; the account name breaks a tie, so the choice
		// is the same on every run.
		slices.SortFunc(surplus, func(a, b *Seat) int {
			if c := n.held[b].Compare(n.held[a]); c != 0 {
				return c
			}
			return cmp.Compare(a.account, b.account)
		})
		surplus = surplus[:extra]
		for _, s := range surplus {
			delete(n.held, s)
		}
	}
	if n.quota != old || len(surplus) > 0 {
		n.wakeLocked()
	}
	quota := n.quota
	n.mu.Unlock()
	if quota != old && !start {
		n.log.Info("ha: accounts spread anew", "live", live, "accounts", accounts, "quota", quota)
	}
	for _, s := range surplus {
		n.event(s.account, "info", fmt.Sprintf("ha: %s hands account %s over: %d live processes share %d accounts, at most %d each", n.cfg.Host, s.account, live, accounts, quota))
		s.handOver()
	}
}

// wakeLocked wakes the seats waiting for a change of quota or held.
func (n *Node) wakeLocked() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// take counts a won election as led if this process has room for it.
func (n *Node) take(s *Seat) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.held) >= n.quota {
		return false
	}
	n.held[s] = time.Now()
	n.wakeLocked()
	return true
}

// drop forgets a leadership that ended.
func (n *Node) drop(s *Seat) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.held[s]; ok {
		delete(n.held, s)
		n.wakeLocked()
	}
}

// holds reports whether the spread counts s as led by this process: false
// once a hand-over took it off (rebalance).
func (n *Node) holds(s *Seat) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.held[s]
	return ok
}

// room reports whether this process may lead one more account, and the
// channel closed at the next change.
func (n *Node) room() (bool, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.held) < n.quota, n.changed
}

// waitRoom waits until this process may lead one more account; false
// when ctx is done first.
func (n *Node) waitRoom(ctx context.Context) bool {
	for {
		ok, changed := n.room()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}

// whileRoom cancels a campaign (cancel) once this process is full, so a
// full process is in no election's queue and a handed-over account goes
// to one that has room. It returns when ctx is done.
func (n *Node) whileRoom(ctx context.Context, cancel context.CancelFunc) {
	for {
		ok, changed := n.room()
		if !ok {
			cancel()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
