// Package checker judges a history of lock operations (package history).
// Check reads a History and nothing else: it derives the interval during
// which each client believed it held the lock, and reports mutual
// exclusion, fencing order, duplicate tokens, stale writes accepted,
// acknowledged writes lost and holds an extension brought back after
// another hold was acquired, each violation attributed to the faults that
// could have caused it, plus the longest stall of a key while a quorum was
// up, the worst wait of one client for a key that others kept getting
// (starvation) and how fast keys went from a release to the clients waiting
// for them (handover), and, when asked (CheckOptions.OrderMargin), clients
// overtaken by one that began waiting after them (order), for locks that
// serve waiters in order, and, from probes of the lock nodes, grants left
// behind, validity ends beyond what a quorum of nodes holds and Unlock
// results the nodes contradict. The verdict has three states: ok, violated
// (a violation no assumption-breaking fault explains) and unknown (the
// history is empty, too short or incomplete, so nothing can be claimed).
// Check never claims ok on a history it cannot read. It takes O(n log n)
// time in the history's length (BenchmarkCheck).
package checker
