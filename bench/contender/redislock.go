package contender

import (
	"context"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// redislock: a single node (the first), for reference — it is not a
// quorum lock. TryLock is Obtain with its default NoRetry; the blocking Lock
// is Obtain with LinearBackoff(RetryDelay) under the caller's ctx deadline.
type redislockLib struct {
	c      *redislock.Client
	client *redis.Client
	cfg    Config
	wait   *redislock.Options
}

func newRedislock(client *redis.Client, cfg Config) *redislockLib {
	return &redislockLib{
		c:      redislock.New(client),
		client: client,
		cfg:    cfg,
		// LinearBackoff is stateless, so one Options serves every call.
		wait: &redislock.Options{RetryStrategy: redislock.LinearBackoff(cfg.RetryDelay)},
	}
}

func (r *redislockLib) Name() string { return Redislock }

func (r *redislockLib) Session(key string) Session { return &redislockSession{r: r, key: key} }

func (r *redislockLib) Close() error { return r.client.Close() }

type redislockSession struct {
	r   *redislockLib
	key string
	l   *redislock.Lock
}

func (s *redislockSession) TryLock(ctx context.Context) error {
	l, err := s.r.c.Obtain(ctx, s.key, s.r.cfg.TTL, nil)
	s.l = l
	return err
}

func (s *redislockSession) Lock(ctx context.Context) error {
	l, err := s.r.c.Obtain(ctx, s.key, s.r.cfg.TTL, s.r.wait)
	s.l = l
	return err
}

func (s *redislockSession) Unlock(ctx context.Context) error {
	if s.l == nil {
		return errNotHeld
	}
	l := s.l
	s.l = nil
	return l.Release(ctx)
}
