package contender

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

// fencedlock: redlock.New over all nodes, with WithNodeTimeout(NodeTimeout)
// when that is set; everything else default — blocking Lock waits with ExponentialBackoff(4ms,
// 128ms), never past the holder's PTTL, woken early by releases (pub/sub and
// a local first-come queue).
//
// fencedlock-acks is the same with WithReplicaAcks(replicaAcks): a node's
// acquire, extend or raise counts only once WAIT on the same connection
// reports that many replicas have it.
type fencedlock struct {
	name    string
	c       *redlock.Client
	clients []*redis.Client
	cfg     Config
}

// replicaAcks is what fencedlock-acks asks of each node: one replica, the
// one the replicas scenario attaches to every node.
const replicaAcks = 1

func newFencedlock(name string, clients []*redis.Client, cfg Config, acks int) (*fencedlock, error) {
	nodes := make([]redis.UniversalClient, len(clients))
	for i, c := range clients {
		nodes[i] = c
	}
	var opts []redlock.Option
	if cfg.NodeTimeout > 0 {
		opts = append(opts, redlock.WithNodeTimeout(cfg.NodeTimeout))
	}
	if acks > 0 {
		opts = append(opts, redlock.WithReplicaAcks(acks))
	}
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		return nil, err
	}
	return &fencedlock{name: name, c: c, clients: clients, cfg: cfg}, nil
}

func (f *fencedlock) Name() string { return f.name }

func (f *fencedlock) Session(key string) Session { return &fencedSession{f: f, key: key} }

func (f *fencedlock) Close() error {
	return errors.Join(f.c.Close(), closeAll(f.clients))
}

type fencedSession struct {
	f   *fencedlock
	key string
	l   *redlock.Lock
}

func (s *fencedSession) TryLock(ctx context.Context) error {
	l, err := s.f.c.TryLock(ctx, s.key, s.f.cfg.TTL)
	s.l = l
	return err
}

func (s *fencedSession) Lock(ctx context.Context) error {
	l, err := s.f.c.Lock(ctx, s.key, s.f.cfg.TTL)
	s.l = l
	return err
}

func (s *fencedSession) Unlock(ctx context.Context) error {
	if s.l == nil {
		return errNotHeld
	}
	l := s.l
	s.l = nil
	return l.Unlock(ctx)
}

var errNotHeld = errors.New("contender: unlock without a hold")
