// Package backend is the interface between the chaos harness and the Redis
// nodes it injects faults into, and the faults themselves. A Backend owns N
// nodes; clients reach node i at one stable address (Node.Addr) for the
// Backend's whole life, across kills, restarts and clock changes, while the
// Backend kills, starts, restarts, pauses, partitions, slows and clock-skews
// nodes on demand. Two packages implement it: backend/process (local
// redis-server processes) and backend/docker (containers), each behind
// in-process fault proxies.
//
// Each fault is a small Fault value, one per file (kill.go, pause.go, ...),
// whose Inject applies it and returns how to undo it. When to inject which
// fault is package schedule's job; faults injected from inside a client's
// connection (at the moment a command is sent) are package hook's.
//
// Nothing here makes a faulty node behave like a particular real failure
// beyond what each method documents: a partition drops bytes rather than
// delaying them, and clock skew restarts the node.
package backend
