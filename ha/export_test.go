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
