package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/config"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/internal/printable"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/web"
)

// haGuard is a guard's part in the cluster: the process's node and the
// account's seat.
type haGuard struct {
	node *ha.Node
	seat *ha.Seat
}

// newHA makes this process's node and the account's seat for a
// configuration with an ha section (nil without one), and fills the
// engine's dependencies with them. With several accounts, make the node
// once (newHANode) and a seat per account (attachSeat), and run the node
// once (startHA).
func newHA(cfg *config.Config, account string, logger *slog.Logger, reg prometheus.Registerer, n *notifiers, deps *engine.Deps) (*haGuard, error) {
	node, err := newHANode(cfg, logger, reg, n)
	if node == nil || err != nil {
		return nil, err
	}
	return attachSeat(node, account, deps), nil
}

// newHANode is the process's place in the cluster: one etcd client, one
// lease, the ha metrics; nil without an ha section. Its process-wide
// events (etcd unreachable, the lease lost) are notified.
func newHANode(cfg *config.Config, logger *slog.Logger, reg prometheus.Registerer, n *notifiers) (*ha.Node, error) {
	if cfg.HA == nil {
		return nil, nil
	}
	m, err := ha.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	accounts := map[string]string{}
	each := cfg.Accounts
	if len(each) == 0 {
		each = []*config.Config{cfg}
	}
	for _, a := range each {
		name := a.Name
		if name == "" {
			name = cfg.HA.Account
		}
		// The key alone names the exchange account: the processes of a
		// cluster may reach the exchange through different URLs (a proxy,
		// another host name).
		if a.Exchange.APIKey != "" {
			accounts[name] = config.KeyFingerprint(a.Exchange.APIKey)
		}
	}
	return ha.New(cfg.HA.Config, ha.Options{Logger: logger, Metrics: m, Accounts: accounts, OnEvent: func(ev ha.Event) {
		if ev.Account != "" {
			return // a role change: the engine says it (audit, log, notification)
		}
		n.Send(context.Background(), notify.Message{Time: time.Now(), Kind: notify.KindLifecycle, Severity: ev.Severity, Text: ev.Text})
	}})
}

// attachSeat makes the account's seat on node the engine's Leadership and
// SharedState.
func attachSeat(node *ha.Node, account string, deps *engine.Deps) *haGuard {
	seat := node.Seat(account)
	deps.Leadership, deps.Shared, deps.Host = seat, seat, node.Host()
	return &haGuard{node: node, seat: seat}
}

// startHA campaigns until the returned stop is called. Call stop once the
// engine sends no more calls (after Run returned): it resigns, so that a
// standby takes over at once rather than after the lease.
func startHA(h *haGuard) (stop func()) {
	if h == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.node.Run(ctx) //nolint:errcheck // Run returns nil when ctx ends
	}()
	return func() {
		cancel()
		<-done
		h.node.Close()
	}
}

// runHA is `riskguard ha status`: who leads which account, and the live
// members, as etcd has them.
func (m *Main) runHA(ctx context.Context, args []string) error {
	fs := m.newFlags("ha", "ha status --config FILE", commands()["ha"].summary)
	configPath := fs.String("config", "riskguard.yaml", "configuration file")
	switch {
	case len(args) > 0 && args[0] == "status":
		args = args[1:]
	case len(args) > 0 && strings.HasPrefix(args[0], "-"): // -h, --help
	default:
		fs.Usage()
		return exitCode(2)
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, _, err := m.setup("ha status", *configPath, "text", "warn")
	if err != nil {
		return err
	}
	if cfg.HA == nil {
		fmt.Fprintf(m.Stderr, "riskguard ha status: %s has no ha section: one process guards the account\n", *configPath)
		return exitCode(1)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	leads, members, err := ha.Inspect(ctx, cfg.HA.Config)
	if err != nil {
		fmt.Fprintln(m.Stderr, "riskguard ha status:", err)
		return exitCode(1)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tLEADER\tADDRESS\tTERM\tCANDIDATES\tSTATE")
	seen := map[string]bool{}
	for _, l := range leads {
		seen[l.Account] = true
		leader, state := l.Leader.Host, ha.RoleLeader
		switch {
		case leader == "":
			leader, state = "NONE", "no leader"
		case l.Leader.HandingOver:
			state = ha.RoleHandingOver
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", etcdText(l.Account), etcdText(leader), etcdText(l.Leader.Advertise), l.Term, l.Candidates, state)
	}
	if !seen[cfg.HA.Account] {
		fmt.Fprintf(tw, "%s\tNONE\t\t0\t0\tno leader\n", cfg.HA.Account)
	}
	tw.Flush()
	fmt.Fprintf(m.Stdout, "\nmembers (%d):", len(members))
	for _, mb := range members {
		fmt.Fprintf(m.Stdout, " %s", etcdText(mb.Host))
	}
	fmt.Fprintln(m.Stdout)
	return nil
}

// maxEtcdText bounds a value read from etcd as ha status prints it.
const maxEtcdText = 64

// etcdText is a value read from etcd, which anyone with access to the
// cluster's prefix may have written, as a terminal may show it: control
// characters (ESC, BEL, CR LF: a cleared screen, a set title, the
// clipboard, a forged row) as visible escapes, at most maxEtcdText runes.
func etcdText(s string) string { return printable.Bounded(s, maxEtcdText) }

// ClusterStatus is the seat's status as the web surface shows it.
func (h *haGuard) ClusterStatus() web.ClusterStatus {
	st := h.seat.Status()
	cs := web.ClusterStatus{Account: st.Account, Role: st.Role, Host: st.Host, Term: st.Term, LeaseAgeSeconds: st.LeaseAge.Seconds(),
		Leader: st.Leader.Host, LeaderAddress: st.Leader.Advertise, EtcdUp: st.EtcdUp, Members: []string{}}
	for _, m := range st.Members {
		cs.Members = append(cs.Members, m.Host)
	}
	return cs
}

// cluster is the web surface's view of h; nil without ha.
func (h *haGuard) cluster() web.Cluster {
	if h == nil {
		return nil
	}
	return h
}
