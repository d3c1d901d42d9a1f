package docker

// ReplicaAddr is the published address of node i's replica, for tests to
// read what replication brought it.
func ReplicaAddr(b *Backend, i int) string {
	p := b.nodes[i].pair
	return p.publishedAddr(1 - p.primaryIndex())
}
