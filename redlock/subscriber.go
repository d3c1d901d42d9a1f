package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber owns one node's pub/sub connections for release announcements.
// Subscribe and unsubscribe requests go through one goroutine, in order, so
// that an unsubscribe can never overtake the subscribe before it. Started on
// the first wait; a node that is down only delays its own requests.
//
// A node gets one pub/sub connection, except a Ring: the release script
// publishes on the shard that holds the key, while Ring routes a
// subscription by the channel's name, often to another shard, and a shard's
// pub/sub does not reach the others. So a Ring node subscribes on every
// shard that is up (checked again at each request, so a shard that comes up
// later is added). A Cluster's classic pub/sub reaches every member, and a
// failover client follows its primary.
type subscriber struct {
	c    *Client
	node int
	w    *waitQueues

	start sync.Once
	kick  chan struct{} // buffered 1: want changed
	quit  chan struct{}
	stop  sync.Once

	mu   sync.Mutex      // protects want
	want map[string]bool // channels to subscribe (true) or unsubscribe (false) next
}

type subOp struct {
	channel string
	sub     bool // subscribe; false: unsubscribe
}

func newSubscriber(c *Client, node int, w *waitQueues) *subscriber {
	return &subscriber{c: c, node: node, w: w, kick: make(chan struct{}, 1), quit: make(chan struct{}), want: map[string]bool{}}
}

// send asks for op without blocking: the requests wait, the latest per
// channel, until the subscriber's goroutine applies them all together (one
// SUBSCRIBE for many channels), so none is lost however many keys are
// waited for at once. It reports false once the subscriber stopped.
func (s *subscriber) send(op subOp) bool {
	s.start.Do(func() { s.c.goNode(s.node, s.run) })
	select {
	case <-s.quit:
		return false
	default:
	}
	s.mu.Lock()
	s.want[op.channel] = op.sub
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	return true
}

func (s *subscriber) run() {
	conns := make(map[any]*redis.PubSub) // by server key
	channels := make(map[string]bool)    // subscribed now
	defer func() {
		for _, ps := range conns {
			_ = ps.Close()
		}
	}()
	for {
		select {
		case <-s.kick:
			s.mu.Lock()
			want := s.want
			s.want = map[string]bool{}
			s.mu.Unlock()
			s.apply(want, conns, channels)
		case <-s.quit:
			return
		}
	}
}

// apply subscribes and unsubscribes as want says on every server of the
// node, opening a connection (with every channel subscribed so far) for a
// server seen for the first time.
func (s *subscriber) apply(want map[string]bool, conns map[any]*redis.PubSub, channels map[string]bool) {
	ctx, cancel := context.WithTimeout(context.Background(), s.c.nodeTimeout(5*time.Second))
	defer cancel()
	var sub, unsub []string
	for ch, on := range want {
		if on {
			channels[ch] = true
			sub = append(sub, ch)
		} else {
			delete(channels, ch)
			unsub = append(unsub, ch)
		}
	}
	for _, srv := range s.servers() {
		if ps, ok := conns[srv.key]; ok {
			var err error
			if len(sub) > 0 {
				err = ps.Subscribe(ctx, sub...)
			}
			if len(unsub) > 0 {
				err = errors.Join(err, ps.Unsubscribe(ctx, unsub...))
			}
			if err != nil {
				s.c.nodeErr(s.node, err)
			}
			continue
		}
		if len(channels) == 0 {
			continue
		}
		all := make([]string, 0, len(channels))
		for ch := range channels {
			all = append(all, ch)
		}
		ps, err := subscribe(ctx, srv.rdb, all)
		if err != nil {
			s.c.nodeErr(s.node, err)
		}
		conns[srv.key] = ps
		msgs := ps.ChannelWithSubscriptions()
		s.c.goNode(s.node, func() { s.listen(msgs) })
	}
}

// server is a client to subscribe through, with a comparable key.
type server struct {
	key any // the shard's *redis.Client, or nodeKey for the node itself
	rdb redis.UniversalClient
}

type nodeKey struct{}

// servers are the clients to subscribe through: each shard of a Ring that
// is up, else the node's client itself.
func (s *subscriber) servers() []server {
	rdb := s.c.nodes[s.node].rdb
	ring, ok := rdb.(*redis.Ring)
	if !ok {
		return []server{{key: nodeKey{}, rdb: rdb}}
	}
	var (
		mu     sync.Mutex
		shards []server
	)
	_ = ring.ForEachShard(context.Background(), func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		shards = append(shards, server{key: c, rdb: c})
		mu.Unlock()
		return nil
	})
	return shards
}

// subscribe opens a pub/sub connection on rdb subscribed to channels
// (non-empty). A Client or ClusterClient opens an empty one first, which
// reports the subscribe's error; other kinds (a Ring panics on an empty
// subscription) get the channels at once, and their error shows only as a
// missing confirmation. Either way go-redis subscribes again on reconnect.
func subscribe(ctx context.Context, rdb redis.UniversalClient, channels []string) (*redis.PubSub, error) {
	switch rdb.(type) {
	case *redis.Client, *redis.ClusterClient:
		ps := rdb.Subscribe(ctx)
		return ps, ps.Subscribe(ctx, channels...)
	}
	return rdb.Subscribe(ctx, channels...), nil
}

func (s *subscriber) listen(msgs <-chan any) {
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			s.w.deliver(s.node, m.Channel, m.Payload, false)
		case *redis.Subscription:
			if strings.EqualFold(m.Kind, "subscribe") {
				s.w.deliver(s.node, m.Channel, "", true)
			}
		}
	}
}

func (s *subscriber) close() { s.stop.Do(func() { close(s.quit) }) }
