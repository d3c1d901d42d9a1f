// Package backend runs the Redis nodes of the chaos harness and injects node
// faults into them. A Backend owns N nodes; clients reach node i at one
// stable address (Node.Addr) for the Backend's whole life, across kills,
// restarts and clock changes, while the Backend kills, starts, restarts,
// pauses, partitions, slows and clock-skews nodes on demand. Each fault is a
// small Fault value whose Inject applies it and returns how to undo it; NewPlan draws a seeded, reproducible fault schedule that never has
// more than a chosen number of nodes under a fault at once (a minority by
// default), and Run executes it, reporting every fault's start and end to a
// callback. Trigger is a go-redis hook that fires a callback (kill a node,
// say) at the moment a chosen command is about to be sent, so faults can hit
// an acquisition in flight. NewProcess is the embedded backend: redis-server
// processes behind in-process toxiproxy proxies. NewDocker runs the nodes as
// containers (testcontainers-go) on a private network, behind the same
// proxies. A Backend is safe for
// concurrent use; operations on one node are serialised. Nothing here makes a
// faulty node behave like a particular real failure beyond what each method
// documents: a partition drops bytes rather than delaying them, and clock
// skew restarts the node.
package backend
