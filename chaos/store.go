package chaos

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/fencing"
)

// store is the workload's shared store, a log per resource on a Redis
// server of its own. A lock that gives fencing tokens writes through the
// fencing guard (fencing.Redis), which refuses a stale token. A lock that
// gives none writes with no guard at all, a plain RPUSH, as its users
// must: each write then carries the harness's token (the order in which
// the acquisitions returned, see client.acquire) for the checker alone,
// which counts the stale ones that reached the store.
type store struct {
	guard  *fencing.Redis
	rdb    *redis.Client
	fenced bool

	mu  sync.Mutex        // protects top
	top map[string]uint64 // unfenced: the highest token appended per resource
}

func newStore(rdb *redis.Client, fenced bool) *store {
	return &store{guard: fencing.NewRedis(rdb), rdb: rdb, fenced: fenced, top: map[string]uint64{}}
}

// plainKey is the list of resource's unfenced log.
func plainKey(resource string) string { return "chaos:plain:" + resource }

// Append appends entry to resource's log: fenced by token, or unfenced
// (the write lands whatever token it has).
func (s *store) Append(ctx context.Context, resource string, token uint64, entry string) error {
	if s.fenced {
		return s.guard.Append(ctx, resource, token, entry)
	}
	if err := s.rdb.RPush(ctx, plainKey(resource), entry).Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.top[resource] = max(s.top[resource], token)
	s.mu.Unlock()
	return nil
}

// Highest returns the highest token the store took for resource. (An
// unfenced store knows it from this process's writes: locks without a
// token run with in-process clients only.)
func (s *store) Highest(ctx context.Context, resource string) (uint64, error) {
	if s.fenced {
		return s.guard.Highest(ctx, resource)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.top[resource], nil
}

// Log returns resource's entries, oldest first.
func (s *store) Log(ctx context.Context, resource string) ([]string, error) {
	if !s.fenced {
		return s.rdb.LRange(ctx, plainKey(resource), 0, -1).Result()
	}
	log, err := s.guard.Log(ctx, resource)
	if err != nil {
		return nil, err
	}
	entries := make([]string, len(log))
	for i, e := range log {
		entries[i] = e.Data
	}
	return entries, nil
}
