package doctor

import (
	"fmt"
	"strconv"
	"strings"
)

// The role check: each node must be an independent primary. A replica
// refuses the lock's writes (READONLY), so it never grants; a primary with
// replicas answers before they have the write, and a failover can promote
// one without the newest grant or counter (docs/protocol.md, "Failover, and
// replica acknowledgements") unless the lock waits for them (ReplicaAcks).

func checkRole(in info, conf config, acks int, t timing, f *nodeFacts) {
	if in.err != nil {
		f.add("role", Warn, fmt.Sprintf("cannot read INFO: %v", in.err), "allow the user INFO (+info)")
		return
	}
	f.runID = in.fields["run_id"]
	role := in.fields["role"]
	replicas, _ := strconv.Atoi(in.fields["connected_slaves"])
	switch {
	case role == "slave" || role == "replica":
		f.add("role", Warn, fmt.Sprintf("a replica of %s:%s: it refuses the lock's writes, so it never grants and counts as a failed node",
			in.fields["master_host"], in.fields["master_port"]),
			"give the lock independent primaries: use the primary's address, or REPLICAOF NO ONE on a server of its own")
	case role != "master":
		f.add("role", Warn, fmt.Sprintf("unknown role %q", role), "give the lock independent primaries")
	case acks > replicas:
		f.add("role", Fail, fmt.Sprintf("a primary with %s, but the lock waits for %d (--replica-acks): every grant on it fails",
			plural(replicas, "connected replica"), acks),
			fmt.Sprintf("lower --replica-acks (WithReplicaAcks) to at most %d, or connect the missing replicas", replicas))
	case replicas > 0 && acks == 0:
		f.add("role", Warn, fmt.Sprintf("a primary with %s: replication is asynchronous, and a failover can lose grants and counter increments",
			plural(replicas, "connected replica")),
			fmt.Sprintf("have the lock wait for the replicas (WithReplicaAcks(%d), --replica-acks %d), or use primaries without replicas", replicas, replicas))
	case replicas > 0:
		checkReplicaHz(conf, acks, replicas, t, f)
	default:
		f.add("role", OK, "an independent primary (no replicas)", "")
	}
}

// checkReplicaHz: WAIT's timeout is noticed on the server's timer, every
// 1000/hz ms; with a node timeout under twice that period, replicas that
// fall short show as a timeout and the node is marked down
// (docs/protocol.md: hz of at least 2000 / node timeout in ms).
func checkReplicaHz(conf config, acks, replicas int, t timing, f *nodeFacts) {
	base := fmt.Sprintf("a primary with %s; the lock waits for %d of them", plural(replicas, "connected replica"), acks)
	hz, ok := conf.get("hz")
	n, err := strconv.Atoi(hz)
	if !ok || err != nil {
		f.add("role", OK, base+" (hz unreadable: it should be at least 2000 / node timeout in ms)", "")
		return
	}
	need := int((2000 + t.nodeTimeout.Milliseconds() - 1) / max(t.nodeTimeout.Milliseconds(), 1))
	if n < need {
		f.add("role", Warn, fmt.Sprintf("%s, but hz %d notices a WAIT timeout only every %dms: replicas that fall short show as node timeouts (node timeout %v)",
			base, n, 1000/max(n, 1), t.nodeTimeout),
			fmt.Sprintf("CONFIG SET hz %d (and hz %d in redis.conf)", need, need))
		return
	}
	f.add("role", OK, base, "")
}

// sameServerFindings fails the set when two addresses reach one server
// (the same run_id): it would count twice toward the quorum.
func sameServerFindings(facts []*nodeFacts) []Finding {
	byID := make(map[string][]string)
	var order []string
	for _, f := range facts {
		if f.runID == "" {
			continue
		}
		if byID[f.runID] == nil {
			order = append(order, f.runID)
		}
		byID[f.runID] = append(byID[f.runID], f.addr)
	}
	var out []Finding
	for _, id := range order {
		if addrs := byID[id]; len(addrs) > 1 {
			out = append(out, Finding{Check: "role", Status: Fail,
				Reason: fmt.Sprintf("%s are the same server (run_id %s): it counts %d times toward the quorum",
					strings.Join(addrs, " and "), id, len(addrs)),
				Fix: "list each server once in --nodes, and give the lock independent servers"})
		}
	}
	return out
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
