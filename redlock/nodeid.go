package redlock

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// What New can tell about a node without I/O. A node is known by the client
// value itself and by the addresses it names: a plain client's Addr, a
// Cluster client's seed addresses, a Ring's shard addresses. Two nodes that
// share either are the same server, or share one, and would count it twice
// toward quorum.
//
// Not detected: two names for one server (localhost and 127.0.0.1, a DNS
// alias), Cluster members that are not among the seeds, and two failover
// clients for one Sentinel master name. go-redis gives every failover client
// the placeholder address "FailoverClient" and keeps the master name to
// itself, so a failover client is known by identity alone: distinct failover
// clients are distinct nodes. Likewise for a Cluster client without seed
// addresses (as from NewFailoverClusterClient).

// failoverAddr is the address go-redis gives every Sentinel failover client.
const failoverAddr = "FailoverClient"

// nodeIdentity returns the name of node n for errors and logs, and what it
// is compared by: the client itself when its type is comparable, and
// "addr:host:port" for each address it names.
func nodeIdentity(n redis.UniversalClient) (name string, ids []any) {
	if reflect.ValueOf(n).Comparable() {
		ids = append(ids, n)
	}
	addrs := func(kind string, list []string) string {
		list = slices.Sorted(slices.Values(list))
		for _, a := range list {
			ids = append(ids, "addr:"+a)
		}
		if len(list) == 0 {
			return fmt.Sprintf("%s@%p", kind, n)
		}
		return kind + "[" + strings.Join(list, " ") + "]"
	}
	switch v := n.(type) {
	case *redis.Client:
		if addr := v.Options().Addr; addr != failoverAddr {
			ids = append(ids, "addr:"+addr)
			return addr, ids
		}
		return fmt.Sprintf("failover@%p", v), ids
	case *redis.ClusterClient:
		return addrs("cluster", v.Options().Addrs), ids
	case *redis.Ring:
		return addrs("ring", slices.Collect(maps.Values(v.Options().Addrs))), ids
	}
	if k := reflect.ValueOf(n).Kind(); k == reflect.Pointer {
		return fmt.Sprintf("%T@%p", n, n), ids
	}
	return fmt.Sprintf("%T", n), ids
}
