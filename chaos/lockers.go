package chaos

import (
	"fmt"
	"strings"

	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/chaos/locker/fenced"
	"github.com/fencedlock/fencedlock/chaos/locker/redislock"
	"github.com/fencedlock/fencedlock/chaos/locker/redsync"
	"github.com/fencedlock/fencedlock/chaos/locker/sentinel"
	"github.com/fencedlock/fencedlock/redlock"
)

// The locks a run can drive (Config.Lock), each through a locker adapter.
const (
	// LockFencedlock is fencedlock's quorum lock on every node (the default).
	LockFencedlock = "fencedlock"
	// LockFencedlockAcks is fencedlock with redlock.WithReplicaAcks(1):
	// each node's answer counts once its replica has the write. Its nodes
	// need a replica (Config.Replicas).
	LockFencedlockAcks = "fencedlock-acks"
	// LockFencedlockReacquire is fencedlock with
	// redlock.WithReacquireOnExtend(): an extension re-creates the hold's
	// key on a node that lost it, within the validity (the rolling
	// restarts of ProfileRolling).
	LockFencedlockReacquire = "fencedlock-reacquire"
	// LockRedsync is go-redsync/redsync on every node: no fencing token.
	LockRedsync = "redsync"
	// LockRedislock is bsm/redislock on node 0 alone: no fencing token (its
	// token is random, not ordered).
	LockRedislock = "redislock"
	// LockSentinel is a single-instance SET NX PX lock with an INCR'd
	// token on node 0, a primary with a replica under Sentinel (Config.Replicas).
	LockSentinel = "sentinel"
)

// lockSpec is what the workload knows about a lock.
type lockSpec struct {
	build func(locker.Config) (locker.Locker, error)
	// fencedlock: the workload's fencedlock-only features apply (probes of
	// the nodes' state, which read redlock's hold values; several lanes on
	// one client's local wait queue; client processes; a skewed client
	// clock, which only redlock takes).
	fencedlock bool
	replicas   bool // needs Config.Replicas
	// single: the lock lives on node 0 alone (awaitFree asks that node).
	single bool
}

var lockSpecs = map[string]lockSpec{
	LockFencedlock: {fencedlock: true, build: func(c locker.Config) (locker.Locker, error) { return fenced.New(c) }},
	LockFencedlockAcks: {fencedlock: true, replicas: true, build: func(c locker.Config) (locker.Locker, error) {
		return fenced.New(c, redlock.WithReplicaAcks(1))
	}},
	LockFencedlockReacquire: {fencedlock: true, build: func(c locker.Config) (locker.Locker, error) {
		return fenced.New(c, redlock.WithReacquireOnExtend())
	}},
	LockRedsync:   {build: func(c locker.Config) (locker.Locker, error) { return redsync.New(c) }},
	LockRedislock: {single: true, build: func(c locker.Config) (locker.Locker, error) { return redislock.New(c) }},
	LockSentinel:  {single: true, replicas: true, build: func(c locker.Config) (locker.Locker, error) { return sentinel.New(c) }},
}

// Locks returns the names Config.Lock takes: those a comparison runs
// (CompareLocks), then fencedlock-reacquire.
func Locks() []string { return append(CompareLocks(), LockFencedlockReacquire) }

// CompareLocks returns the locks a comparison runs (Compare with no list,
// the CLI's --lock all), in its order. fencedlock-reacquire is left out:
// under the comparison's faults it differs from fencedlock only when a
// restarted node loses a hold's key, and a sixth run would make every
// comparison a sixth longer; compare it by naming it.
func CompareLocks() []string {
	return []string{LockFencedlock, LockFencedlockAcks, LockRedsync, LockRedislock, LockSentinel}
}

// IsFencedlock reports whether lock is one of fencedlock's variants.
func IsFencedlock(lock string) bool { return lockSpecs[lock].fencedlock }

func lockSpecOf(lock string) (lockSpec, error) {
	s, ok := lockSpecs[lock]
	if !ok {
		return s, fmt.Errorf("%w: lock %q (want one of %s)", ErrConfig, lock, strings.Join(Locks(), ", "))
	}
	return s, nil
}

// HasToken reports whether lock gives a fencing token: its holds write
// through the fencing guard; the others write unfenced, and their history
// carries the harness's numbering of the holds in its place.
func HasToken(lock string) bool { return lock != LockRedsync && lock != LockRedislock }
