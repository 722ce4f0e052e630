package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/internal/printable"
	"github.com/riskguard/riskguard/internal/yamlnode"
	"github.com/riskguard/riskguard/notify"
	"github.com/riskguard/riskguard/web"
	"gopkg.in/yaml.v3"
)

// haConfig is the ha section: the cluster's etcd and this process's name,
// and the account name of a configuration without accounts.
type haConfig struct {
	ha.Config
	// Account names the single account's election ("default").
	Account string
}

// haKeys are the ha section's keys, and those of its etcd mapping.
var (
	haKeys   = []string{"etcd", "lease_ttl", "prefix", "host", "advertise", "account"}
	etcdKeys = []string{"endpoints", "ca_file", "cert_file", "key_file", "username", "password_file"}
)

// haSection reads the ha section (n is its value node), with the
// RISKGUARD_HA_HOST, _ENDPOINTS (comma-separated), _ADVERTISE,
// _LEASE_TTL and _CA_FILE, _CERT_FILE, _KEY_FILE overrides, so that every host runs one file. listen is
// engine.listen, the default advertised address.
func (l *loader) haSection(n *yaml.Node, listen string) *haConfig {
	c := &haConfig{Config: ha.DefaultConfig(), Account: "default"}
	c.Host, _ = os.Hostname()
	c.Advertise = listen
	if n.Kind != yaml.MappingNode {
		l.errorf(n, "ha: expected a mapping")
		return nil
	}
	str := func(k, v *yaml.Node, dst *string) {
		if v.Kind != yaml.ScalarNode {
			l.errorf(v, "ha.%s: expected a string", k.Value)
			return
		}
		*dst = v.Value
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "etcd":
			if v.Kind != yaml.MappingNode {
				l.errorf(v, "ha.etcd: expected a mapping")
				continue
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				ek, ev := v.Content[j], v.Content[j+1]
				switch ek.Value {
				case "endpoints":
					if err := ev.Decode(&c.Endpoints); err != nil {
						l.errorf(ev, "ha.etcd.endpoints: expected a list of URLs")
					}
				case "ca_file":
					str(ek, ev, &c.CAFile)
				case "cert_file":
					str(ek, ev, &c.CertFile)
				case "key_file":
					str(ek, ev, &c.KeyFile)
				case "username":
					str(ek, ev, &c.Username)
				case "password_file":
					str(ek, ev, &c.PasswordFile)
				default:
					l.unknownKey(ek, "ha.etcd.", etcdKeys)
				}
			}
		case "lease_ttl":
			d, err := yamlnode.ParseDuration(v.Value)
			if err != nil {
				l.errorf(v, "ha.lease_ttl: %v", err)
				continue
			}
			c.LeaseTTL = d
		case "prefix":
			str(k, v, &c.Prefix)
		case "host":
			str(k, v, &c.Host)
		case "advertise":
			str(k, v, &c.Advertise)
		case "account":
			str(k, v, &c.Account)
		default:
			l.unknownKey(k, "ha.", haKeys)
		}
	}
	if v := l.getenv("RISKGUARD_HA_HOST"); v != "" {
		c.Host = v
	}
	if v := l.getenv("RISKGUARD_HA_ENDPOINTS"); v != "" {
		c.Endpoints = strings.Split(v, ",")
	}
	if v := l.getenv("RISKGUARD_HA_ADVERTISE"); v != "" {
		c.Advertise = v
	}
	for env, dst := range map[string]*string{"RISKGUARD_HA_CA_FILE": &c.CAFile, "RISKGUARD_HA_CERT_FILE": &c.CertFile, "RISKGUARD_HA_KEY_FILE": &c.KeyFile} {
		if v := l.getenv(env); v != "" {
			*dst = v
		}
	}
	if v := l.getenv("RISKGUARD_HA_LEASE_TTL"); v != "" {
		d, err := yamlnode.ParseDuration(v)
		if err != nil {
			l.errorf(nil, "ha.lease_ttl (from RISKGUARD_HA_LEASE_TTL): %v", err)
		} else {
			c.LeaseTTL = d
		}
	}
	if err := c.Validate(); err != nil {
		for _, e := range strings.Split(err.Error(), "\n") {
			l.errorf(n, "%s", e)
		}
		return nil
	}
	if c.Account == "" || strings.ContainsAny(c.Account, "/ ") {
		l.errorf(n, "ha.account: %q: a name without / or spaces", c.Account)
		return nil
	}
	return c
}

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
func newHA(cfg *config, account string, logger *slog.Logger, reg prometheus.Registerer, n *notifiers, deps *engine.Deps) (*haGuard, error) {
	node, err := newHANode(cfg, logger, reg, n)
	if node == nil || err != nil {
		return nil, err
	}
	return attachSeat(node, account, deps), nil
}

// newHANode is the process's place in the cluster: one etcd client, one
// lease, the ha metrics; nil without an ha section. Its process-wide
// events (etcd unreachable, the lease lost) are notified.
func newHANode(cfg *config, logger *slog.Logger, reg prometheus.Registerer, n *notifiers) (*ha.Node, error) {
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
		each = []*config{cfg}
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
			accounts[name] = keyFingerprint(a.Exchange.APIKey)
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
