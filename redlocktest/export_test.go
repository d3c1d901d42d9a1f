package redlocktest

// PID is the node's process id, or 0 when it is not running.
func (n *Node) PID() int { return n.proc.PID() }

// Dir is the node's data directory.
func (n *Node) Dir() string { return n.proc.Dir() }
