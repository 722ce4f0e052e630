package ha

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lead is who leads one account, as etcd has it.
type Lead struct {
	Account string
	// Leader is empty when no process leads the account.
	Leader Member
	Term   int64
	// Candidates counts the processes campaigning, the leader included.
	Candidates int
}

// Inspect reads, without campaigning, who leads which account and the
// live members: `riskguard ha status`.
func Inspect(ctx context.Context, cfg Config) ([]Lead, []Member, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	cc, err := cfg.clientConfig()
	if err != nil {
		return nil, nil, err
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, nil, fmt.Errorf("ha: etcd client: %w", err)
	}
	defer cli.Close()
	root := strings.TrimSuffix(cfg.Prefix, "/")
	resp, err := cli.Get(ctx, root+"/accounts/", clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("ha: read %s/accounts/: %w", root, err)
	}
	byAccount := map[string]*Lead{}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), root+"/accounts/")
		account, tail, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		l := byAccount[account]
		if l == nil {
			l = &Lead{Account: account}
			byAccount[account] = l
		}
		if !strings.HasPrefix(tail, "leader/") {
			continue
		}
		l.Candidates++
		if l.Term == 0 || kv.CreateRevision < l.Term {
			var m Member
			if json.Unmarshal(kv.Value, &m) == nil {
				l.Leader, l.Term = m, kv.CreateRevision
			}
		}
	}
	var leads []Lead
	for _, l := range byAccount {
		leads = append(leads, *l)
	}
	sort.Slice(leads, func(i, j int) bool { return leads[i].Account < leads[j].Account })
	mresp, err := cli.Get(ctx, root+"/members/", clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("ha: read %s/members/: %w", root, err)
	}
	var members []Member
	for _, kv := range mresp.Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) == nil {
			members = append(members, m)
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Host < members[j].Host })
	return leads, members, nil
}
