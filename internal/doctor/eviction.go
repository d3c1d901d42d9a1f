package doctor

import (
	"fmt"
	"strings"
)

// The eviction check. Under maxmemory, Redis evicts keys by its
// maxmemory-policy. An allkeys-* policy can evict fence counters, which
// never expire: a counter evicted restarts at 1 and tokens go backwards. A
// volatile-* policy evicts only keys with a TTL: lock keys, so a full node
// ends holds before their TTL. noeviction refuses writes instead: the node
// fails acquisitions, which the quorum tolerates.

const evictionFix = "CONFIG SET maxmemory-policy noeviction (and maxmemory-policy noeviction in redis.conf)"

func checkEviction(conf config, f *nodeFacts) {
	policy, ok1 := conf.get("maxmemory-policy")
	limit, ok2 := conf.get("maxmemory")
	switch {
	case !ok1 || !ok2:
		err := conf.errs["maxmemory-policy"]
		if err == nil {
			err = conf.errs["maxmemory"]
		}
		f.add("eviction", Warn, fmt.Sprintf("cannot read maxmemory and maxmemory-policy (%v)", err),
			"check by hand that the policy is noeviction: "+evictionFix)
	case strings.HasPrefix(policy, "allkeys-"):
		f.add("eviction", Fail, fmt.Sprintf("maxmemory-policy %s (maxmemory %s) can evict fence counters: a counter evicted restarts at 1 and tokens go backwards; lock keys can go before their TTL", policy, limit),
			evictionFix)
	case strings.HasPrefix(policy, "volatile-") && limit != "0":
		f.add("eviction", Warn, fmt.Sprintf("maxmemory-policy %s with maxmemory %s: a full node evicts lock keys before their TTL, ending holds early", policy, limit),
			evictionFix)
	case policy == "noeviction":
		f.add("eviction", OK, "maxmemory-policy noeviction: a full node refuses writes, it evicts nothing", "")
	default:
		f.add("eviction", OK, fmt.Sprintf("maxmemory-policy %s with maxmemory 0: nothing is evicted (a maxmemory set later would evict lock keys)", policy), "")
	}
}
