package contender

import (
	"context"
	"errors"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// redsync: one goredis/v9 pool per node; each session keeps one Mutex for
// its key (the most favourable use: NewMutex once, not per acquisition) —
// except redsync-failfast, which needs a fresh Mutex per acquisition: with
// FailFast, Unlock returns while its calls to the slower nodes still read the
// Mutex's value, and the next Lock on the same Mutex overwrites it (a data
// race inside redsync that -race reports).
//
// Mutex options: WithExpiry(TTL), WithTries(RedsyncTries), and
// WithTimeoutFactor(NodeTimeout/TTL) when NodeTimeout is set (else its
// default 0.05, i.e. TTL/20). The retry delay is redsync's default, a random
// 50–250ms. FailFast is off by default (redsync then waits for every node
// before deciding), on for the redsync-failfast variant.
type redsyncLib struct {
	name    string
	rs      *redsync.Redsync
	clients []*redis.Client
	cfg     Config
	opts    []redsync.Option
}

func newRedsync(name string, clients []*redis.Client, cfg Config, failFast bool) *redsyncLib {
	pools := make([]redsyncredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	opts := []redsync.Option{
		redsync.WithExpiry(cfg.TTL),
		redsync.WithTries(cfg.RedsyncTries),
	}
	if cfg.NodeTimeout > 0 {
		opts = append(opts, redsync.WithTimeoutFactor(float64(cfg.NodeTimeout)/float64(cfg.TTL)))
	}
	if failFast {
		opts = append(opts, redsync.WithFailFast(true))
	}
	return &redsyncLib{name: name, rs: redsync.New(pools...), clients: clients, cfg: cfg, opts: opts}
}

func (r *redsyncLib) Name() string { return r.name }

func (r *redsyncLib) Session(key string) Session {
	s := &redsyncSession{r: r, key: key, fresh: r.name == RedsyncFailFast}
	if !s.fresh {
		s.m = r.rs.NewMutex(key, r.opts...)
	}
	return s
}

func (r *redsyncLib) Close() error { return closeAll(r.clients) }

type redsyncSession struct {
	r     *redsyncLib
	key   string
	fresh bool // a new Mutex per acquisition
	m     *redsync.Mutex
}

func (s *redsyncSession) mutex() *redsync.Mutex {
	if s.fresh {
		s.m = s.r.rs.NewMutex(s.key, s.r.opts...)
	}
	return s.m
}

func (s *redsyncSession) TryLock(ctx context.Context) error { return s.mutex().TryLockContext(ctx) }

func (s *redsyncSession) Lock(ctx context.Context) error { return s.mutex().LockContext(ctx) }

// Unlock: redsync's Unlock has no timeout of its own; CallTimeout, when set,
// is the deadline a careful user would add. The context is left to expire at
// that deadline rather than cancelled on return: with FailFast, Unlock
// returns at a quorum while the releases to the other nodes still run under
// this context, and cancelling it would strand the lock on those nodes until
// its TTL.
func (s *redsyncSession) Unlock(ctx context.Context) error {
	if d := s.r.cfg.CallTimeout; d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		time.AfterFunc(d, cancel)
	}
	ok, err := s.m.UnlockContext(ctx)
	if !ok && err == nil {
		err = errRedsyncUnlock
	}
	return err
}

var errRedsyncUnlock = errors.New("contender: redsync unlock reached no quorum")
