package contender_test

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/bench/contender"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func addrs(t *testing.T) []string {
	t.Helper()
	var as []string
	for _, p := range redistest.StartN(t, 5) {
		as = append(as, p.Addr())
	}
	return as
}

// The raw floor must send fencedlock's own scripts, byte for byte, and the
// command counter must know their hashes.
func TestScriptsAreFencedlocks(t *testing.T) {
	for _, name := range []string{"waiting.lua", "acquire.lua", "release.lua", "withdraw.lua", "counter.lua", "raise.lua", "heal.lua", "extend.lua"} {
		t.Run(name, func(t *testing.T) {
			ours, err := os.ReadFile("scripts/" + name)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := os.ReadFile("../../redlock/scripts/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(ours, theirs) {
				t.Errorf("scripts/%s differs from redlock/scripts/%s: copy it again", name, name)
			}
		})
	}
}

// The raw floor must touch the fence counter that fencedlock touches.
func TestRawUsesFencedlocksCounter(t *testing.T) {
	as := addrs(t)
	ctx := t.Context()
	const key = "counter-check"
	for _, lib := range []string{contender.Fencedlock, contender.Raw} {
		l, err := contender.New(lib, as, contender.Config{})
		if err != nil {
			t.Fatal(err)
		}
		s := l.Session(key)
		if err := s.TryLock(ctx); err != nil {
			t.Fatalf("%s: %v", lib, err)
		}
		if err := s.Unlock(ctx); err != nil {
			t.Fatalf("%s: %v", lib, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Two acquisitions of one key, one counter: every node counted both.
	c := redis.NewClient(&redis.Options{Addr: as[0]})
	defer c.Close()
	keys, err := c.Keys(ctx, "fencedlock:fence:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 {
		t.Fatalf("fence counter keys %v, want exactly one shared by both", keys)
	}
	if n, _ := c.Get(ctx, keys[0]).Int(); n != 2 {
		t.Errorf("counter %s = %d, want 2", keys[0], n)
	}
}

// replicated starts 5 nodes with a replica each, caught up, and returns
// the nodes' addresses: fencedlock-acks needs them, the others do not mind.
func replicated(t *testing.T) []string {
	t.Helper()
	// Without the delay a primary's first sync starts at once, instead of
	// waiting 5s for more replicas to share it.
	procs := redistest.StartN(t, 5, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	var as []string
	for _, p := range procs {
		r := redistest.Start(t, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(p.Port())))
		rc := redistest.Client(t, r)
		deadline := time.Now().Add(10 * time.Second) // as long as a node may take to start (redisproc)
		for {
			info, err := rc.Info(t.Context(), "replication").Result()
			if err == nil && strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica of %s not synced: %v\n%s", p.Addr(), err, info)
			}
			time.Sleep(10 * time.Millisecond) // polling a condition, bounded by deadline
		}
		as = append(as, p.Addr())
	}
	return as
}

func TestEveryLibraryLocksAndUnlocks(t *testing.T) {
	as := replicated(t)
	for _, lib := range contender.Names() {
		t.Run(lib, func(t *testing.T) {
			ctx := t.Context()
			// A node timeout roomy for a loaded machine: the test is about
			// what each library does, not how fast; fencedlock-acks's WAIT
			// gets half of it for the replicas' acknowledgements.
			l, err := contender.New(lib, as, contender.Config{TTL: 5 * time.Second, NodeTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := l.Close(); err != nil {
					t.Error(err)
				}
			})
			if l.Name() != lib {
				t.Errorf("Name() = %q", l.Name())
			}
			key := "every:" + lib
			a, b := l.Session(key), l.Session(key)
			if err := a.TryLock(ctx); err != nil {
				t.Fatalf("TryLock: %v", err)
			}
			if err := b.TryLock(ctx); err == nil {
				t.Fatal("second TryLock of a held key succeeded")
			}
			if err := a.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			err = b.Lock(ctx)
			if lib == contender.Raw {
				if !errors.Is(err, contender.ErrNoWait) {
					t.Fatalf("raw Lock: %v, want ErrNoWait", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			if err := b.Unlock(ctx); err != nil {
				t.Fatalf("Unlock after Lock: %v", err)
			}
		})
	}
}

// fencedlock-acks counts a node's grant only once WAIT reported its replica:
// with replicas, a TryLock's WAIT replies report at least a quorum of them;
// without, WAITs go out, report none, and no TryLock succeeds. fencedlock
// sends no WAIT.
func TestFencedlockAcksWaitsForReplicas(t *testing.T) {
	const quorum = 3 // of 5 nodes
	for _, tc := range []struct {
		name     string
		nodes    func(*testing.T) []string
		lib      string
		acquires bool
		waits    bool
	}{
		{"replicas", replicated, contender.FencedlockAcks, true, true},
		{"no replicas", addrs, contender.FencedlockAcks, false, true},
		{"without the option", replicated, contender.Fencedlock, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			l, err := contender.New(tc.lib, tc.nodes(t), contender.Config{NodeTimeout: time.Second}) // roomy, as above
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			s := l.Session("acks")
			err = s.TryLock(ctx)
			switch {
			case tc.acquires && err != nil:
				t.Fatalf("TryLock: %v", err)
			case !tc.acquires && !errors.Is(err, redlock.ErrNotAcquired):
				t.Fatalf("TryLock: %v, want ErrNotAcquired", err)
			case tc.acquires:
				if err := s.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
			}
			n := l.Counts()
			waits := n.Commands["wait"]
			switch {
			case !tc.waits && (waits != 0 || n.ReplicaAcks != 0):
				t.Errorf("%d WAITs reporting %d replicas, want none", waits, n.ReplicaAcks)
			case tc.waits && waits < quorum:
				t.Errorf("%d WAITs, want at least %d", waits, quorum)
			case tc.waits && tc.acquires && n.ReplicaAcks < quorum:
				t.Errorf("WAITs reported %d replicas, want at least %d", n.ReplicaAcks, quorum)
			case tc.waits && !tc.acquires && n.ReplicaAcks != 0:
				t.Errorf("WAITs reported %d replicas of nodes that have none", n.ReplicaAcks)
			}
		})
	}
}

func TestUnknownLibrary(t *testing.T) {
	if _, err := contender.New("nope", []string{"127.0.0.1:1"}, contender.Config{}); err == nil {
		t.Fatal("New accepted an unknown library")
	}
	if _, err := contender.New(contender.Raw, nil, contender.Config{}); err == nil {
		t.Fatal("New accepted no nodes")
	}
}
