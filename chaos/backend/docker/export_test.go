package docker

import "context"

// ReplicaAddr is the published address of node i's replica, for tests to
// read what replication brought it.
func ReplicaAddr(b *Backend, i int) string {
	p := b.nodes[i].pair
	return p.publishedAddr(1 - p.primaryIndex())
}

// WaitWhole waits until node i is a whole pair again (see pair.whole),
// for at most Sentinel's settle time.
func WaitWhole(b *Backend, i int) error {
	n := b.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	t := b.timing
	return n.pair.waitWhole(context.Background(), b.sentinel.Client, t, t.Settle())
}

// HasFaketime reports whether the nodes' image has libfaketime.
func HasFaketime(b *Backend) bool { return b.faketime }
