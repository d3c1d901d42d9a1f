package contender

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

// The raw protocol floor sends exactly the commands fencedlock sends on the
// fast path, with no library logic around them:
//
//	acquire: EVALSHA waiting.lua+acquire.lua 4 key fencekey order leases value ttl_ms since id 0 0 on every node in parallel, wait for ALL replies
//	release: EVALSHA waiting.lua+release.lua 3 key order leases value '' ''                  on every node in parallel, wait for ALL replies
//
// The scripts are fencedlock's own, byte for byte (a test checks), as a
// TryLock sends them (it never enters the waiting set: lease 0). The value
// is 16 random bytes (crypto/rand.Text), like fencedlock's UUID v4. Each
// round fans out with one goroutine per node but the first, which the caller
// runs itself. There is no quorum decision before the last reply, no retry,
// no batching, no pub/sub, no per-node deadline unless CallTimeout is set:
// on healthy nodes waiting for all 5 costs next to nothing over waiting for
// 3, which is why this is a floor and not a lock.
var (
	//go:embed scripts/waiting.lua
	waitingLua string
	//go:embed scripts/acquire.lua
	acquireLua string
	rawAcquire = redis.NewScript(waitingLua + acquireLua)
	//go:embed scripts/release.lua
	releaseLua string
	rawRelease = redis.NewScript(waitingLua + releaseLua)
)

var errRawNotAcquired = errors.New("contender: raw: no quorum of grants")

type raw struct {
	clients []*redis.Client
	cfg     Config
	quorum  int
}

func newRaw(clients []*redis.Client, cfg Config) *raw {
	return &raw{clients: clients, cfg: cfg, quorum: len(clients)/2 + 1}
}

func (r *raw) Name() string { return Raw }

func (r *raw) Close() error { return closeAll(r.clients) }

func (r *raw) Session(key string) Session {
	n := len(r.clients)
	tag := strings.TrimPrefix(redlock.FenceKey(key), "fencedlock:fence:")
	return &rawSession{
		r:       r,
		keys:    []string{key, redlock.FenceKey(key), "fencedlock:wait:" + tag + ":" + key, "fencedlock:lease:" + tag + ":" + key},
		ttlMS:   r.cfg.TTL.Milliseconds(),
		replies: make([]rawReply, n),
	}
}

type rawReply struct {
	v   any
	err error
}

type rawSession struct {
	r       *raw
	keys    []string // lock key, fence counter key, waiting order, leases
	ttlMS   int64
	value   string
	token   uint64
	replies []rawReply // per node, reused by each round
	wg      sync.WaitGroup
}

// round runs one script on every node in parallel and waits for all.
func (s *rawSession) round(ctx context.Context, script *redis.Script, keys []string, args ...any) {
	call := func(i int) {
		cctx, cancel := withTimeout(ctx, s.r.cfg.CallTimeout)
		v, err := script.EvalSha(cctx, s.r.clients[i], keys, args...).Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			v, err = script.Eval(cctx, s.r.clients[i], keys, args...).Result()
		}
		cancel()
		s.replies[i] = rawReply{v, err}
	}
	for i := 1; i < len(s.r.clients); i++ {
		s.wg.Go(func() { call(i) })
	}
	call(0)
	s.wg.Wait()
}

func (s *rawSession) TryLock(ctx context.Context) error {
	s.value = rand.Text()
	s.round(ctx, rawAcquire, s.keys, s.value, s.ttlMS, 0, "00000000", 0, 0)
	grants := 0
	var token uint64
	for _, r := range s.replies {
		res, ok := r.v.([]any)
		if r.err != nil || !ok || len(res) != 2 || asInt(res[0]) != 1 {
			continue
		}
		grants++
		counter, _ := res[1].(string) // a decimal string: exact past 2^53
		n, err := strconv.ParseUint(counter, 10, 64)
		if err != nil {
			continue
		}
		token = max(token, n)
	}
	if grants < s.r.quorum {
		s.round(ctx, rawRelease, s.releaseKeys(), s.value, "", "", "", 0)
		return errRawNotAcquired
	}
	s.token = token
	return nil
}

func (s *rawSession) Lock(context.Context) error { return ErrNoWait }

func (s *rawSession) Unlock(ctx context.Context) error {
	s.round(ctx, rawRelease, s.releaseKeys(), s.value, "", "", "", 0)
	released := 0
	for _, r := range s.replies {
		if res, ok := r.v.([]any); r.err == nil && ok && len(res) > 0 && asInt(res[0]) == 1 { // {1, announcement}
			released++
		}
	}
	if released < s.r.quorum {
		return errRawNotAcquired
	}
	return nil
}

// releaseKeys are release.lua's keys: the lock key and its waiting set.
func (s *rawSession) releaseKeys() []string { return []string{s.keys[0], s.keys[2], s.keys[3]} }

func asInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
