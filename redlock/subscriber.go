package redlock

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber owns one node's pub/sub connection for release announcements.
// Subscribe and unsubscribe requests go through one goroutine, in order, so
// that an unsubscribe can never overtake the subscribe before it. Started on
// the first wait; a node that is down only delays its own requests.
type subscriber struct {
	c    *Client
	node int
	w    *waitQueues

	start sync.Once
	ops   chan subOp
	quit  chan struct{}
	stop  sync.Once
}

type subOp struct {
	channel string
	sub     bool // subscribe; false: unsubscribe
}

const subQueue = 256

func newSubscriber(c *Client, node int, w *waitQueues) *subscriber {
	return &subscriber{c: c, node: node, w: w, ops: make(chan subOp, subQueue), quit: make(chan struct{})}
}

// send queues op without blocking; when the queue is full the op is dropped
// (a waiter then relies on backoff, and a stale subscription costs little).
func (s *subscriber) send(op subOp) {
	s.start.Do(func() { s.c.goBackground(s.run) })
	select {
	case s.ops <- op:
	case <-s.quit:
	default:
	}
}

func (s *subscriber) run() {
	ps := s.c.nodes[s.node].rdb.Subscribe(context.Background())
	defer ps.Close()
	listening := false
	for {
		select {
		case op := <-s.ops:
			ctx, cancel := context.WithTimeout(context.Background(), s.c.nodeTimeout(5*time.Second))
			var err error
			if op.sub {
				err = ps.Subscribe(ctx, op.channel)
			} else {
				err = ps.Unsubscribe(ctx, op.channel)
			}
			cancel()
			if err != nil {
				s.c.nodeErr(s.node, err)
			}
			if !listening && op.sub {
				listening = true
				msgs := ps.ChannelWithSubscriptions()
				s.c.goBackground(func() { s.listen(msgs) })
			}
		case <-s.quit:
			return
		}
	}
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
