package ha

// FailResigns makes n's next k resignations fail before they reach etcd,
// as a slow or briefly unreachable etcd's would.
func FailResigns(n *Node, k int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failResigns = k
}
