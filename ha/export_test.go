package ha

// FailResigns makes n's next k resignations fail before they reach etcd,
// as a slow or briefly unreachable etcd's would.
func FailResigns(n *Node, k int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failResigns = k
}

// EndSession ends n's current lease session on the client's side, as when
// the client closes its keep-alive (etcd changing its leader) while the
// lease still holds on etcd.
func EndSession(n *Node) bool {
	n.mu.Lock()
	sess := n.sess
	n.mu.Unlock()
	if sess == nil {
		return false
	}
	sess.Orphan()
	return true
}

// LoseCampaigns makes the next k campaigns of account on n put their key
// in etcd and lose the answer, as a campaign withdrawn while its put was on
// its way does.
func LoseCampaigns(n *Node, account string, k int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.loseCampaigns == nil {
		n.loseCampaigns = map[string]int{}
	}
	n.loseCampaigns[account] = k
}
