package main

import (
	"fmt"
	"strings"
)

// Why the lock was lost, for the message that says so. The watchdog ends a
// hold only when a quorum of nodes says it is gone or when its validity
// runs out: an extension that failed on node errors is tried again. So
// nodes that die or hang make the supervisor's deadline come first, a
// fifth of --ttl before the validity's end, with the node errors of the
// failed extensions (nodeLog, cleared by each extension that succeeded) as
// the reason.

// lostByDeadline says that the supervisor killed the tree at its deadline:
// no extension succeeded in time.
func (r *runner) lostByDeadline() {
	l := r.lock
	why := fmt.Sprintf("not extended by %v before the end of its validity", 2*killAllowance(r.ttl))
	if failed := r.log.failed(r.addrs); len(failed) > 0 {
		why = fmt.Sprintf("extensions failed (%s) until %v before the end of its validity",
			strings.Join(failed, "; "), 2*killAllowance(r.ttl))
	}
	fmt.Fprintf(r.stderr, "fencedlock: lock %q (token %d) lost while the command ran: %s; the command was killed (SIGKILL)\n",
		l.Key(), l.Token(), why)
}

// lostByDone says that the hold ended (Done) while the tree ran.
func (r *runner) lostByDone() {
	l := r.lock
	why := "an extension found it on fewer than a quorum of nodes (it expired there or was taken over)"
	if l.TTL() <= 0 {
		why = "its validity ran out before an extension succeeded"
	}
	if failed := r.log.failed(r.addrs); len(failed) > 0 {
		why += " (" + strings.Join(failed, "; ") + ")"
	}
	fmt.Fprintf(r.stderr, "fencedlock: lock %q (token %d) lost while the command ran: %s; stopping it: SIGTERM, SIGKILL after %v\n",
		l.Key(), l.Token(), why, r.grace)
}
