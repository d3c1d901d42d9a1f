package redlocktest

// Option changes how New and Nodes run the nodes.
type Option func(*config)

type config struct {
	binary string   // redis-server executable
	aof    bool     // appendonly yes, appendfsync always
	args   []string // extra redis-server arguments
}

// WithAOF runs each node with the append-only file and appendfsync always,
// as the lock's docs advise for strict fencing: a node that [Node.Restart]
// brings back then keeps every write it acknowledged. Default: no
// persistence, so a restarted node comes back empty (and writes are a few
// times faster).
func WithAOF() Option { return func(c *config) { c.aof = true } }

// WithBinary names the redis-server executable: a path, or a name looked up
// in PATH. Default: "redis-server".
func WithBinary(path string) Option { return func(c *config) { c.binary = path } }

// WithArgs adds redis-server arguments to every node, e.g.
// "--maxmemory-policy", "allkeys-lru". Default: none beyond what the nodes
// need (a loopback port, their own directory, no RDB snapshots).
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}
