package contender

import (
	"context"
	_ "embed"
	"net"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// A counter is a go-redis hook on every client a library gets: it counts
// round trips (one per command sent alone, one per pipeline) and commands by
// kind, so that the report can say what each library sends per operation,
// and adds up the replicas that WAIT replies reported (fencedlock-acks), so
// that it can say whether they were waited for. It does not allocate, and it
// costs every library the same per command.
type counter struct {
	trips       atomic.Int64
	kinds       [numKinds]atomic.Int64
	replicaAcks atomic.Int64 // replicas reported by WAIT replies, summed
}

// Command kinds: fencedlock's scripts by name, the rest by command.
var kindNames = [...]string{
	"evalsha acquire.lua", "evalsha release.lua", "evalsha raise.lua", "evalsha heal.lua", "evalsha extend.lua",
	"evalsha withdraw.lua", "evalsha (other script)", "eval", "set", "wait", "other",
}

const (
	kindOtherScript = 6 + iota
	kindEval
	kindSet
	kindWait
	kindOther
	numKinds
)

var (
	//go:embed scripts/counter.lua
	counterLua string
	//go:embed scripts/raise.lua
	raiseLua string
	//go:embed scripts/heal.lua
	healLua string
	//go:embed scripts/extend.lua
	extendLua string
	//go:embed scripts/withdraw.lua
	withdrawLua string

	// knownScripts are fencedlock's script hashes, in kindNames order.
	knownScripts = [...]string{
		rawAcquire.Hash(), rawRelease.Hash(),
		redis.NewScript(counterLua + raiseLua).Hash(), redis.NewScript(counterLua + healLua).Hash(), redis.NewScript(extendLua).Hash(),
		redis.NewScript(waitingLua + withdrawLua).Hash(),
	}
)

// count counts cmd before it is sent, and reports whether it is a WAIT.
func (c *counter) count(cmd redis.Cmder) bool {
	k := kindOf(cmd)
	c.kinds[k].Add(1)
	return k == kindWait
}

// acknowledged adds the replicas that the answered WAIT cmd reported.
func (c *counter) acknowledged(cmd redis.Cmder) {
	if w, ok := cmd.(*redis.Cmd); ok && cmd.Name() == "wait" {
		if n, err := w.Int64(); err == nil {
			c.replicaAcks.Add(n)
		}
	}
}

func kindOf(cmd redis.Cmder) int {
	switch cmd.Name() {
	case "evalsha":
		if args := cmd.Args(); len(args) > 1 {
			if sha, ok := args[1].(string); ok {
				for i, k := range knownScripts {
					if sha == k {
						return i
					}
				}
			}
		}
		return kindOtherScript
	case "eval":
		return kindEval
	case "set":
		return kindSet
	case "wait":
		return kindWait
	}
	return kindOther
}

// Counts is a snapshot: round trips, commands by kind, and the replicas
// that WAIT replies reported, summed (a reply of 1 adds 1).
type Counts struct {
	Trips       int64
	Commands    map[string]int64
	ReplicaAcks int64
}

// Total is the number of commands.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c.Commands {
		n += v
	}
	return n
}

// Sub returns c − o.
func (c Counts) Sub(o Counts) Counts {
	d := Counts{Trips: c.Trips - o.Trips, Commands: map[string]int64{}, ReplicaAcks: c.ReplicaAcks - o.ReplicaAcks}
	for k, v := range c.Commands {
		if v -= o.Commands[k]; v != 0 {
			d.Commands[k] = v
		}
	}
	return d
}

func (c *counter) snapshot() Counts {
	s := Counts{Trips: c.trips.Load(), Commands: map[string]int64{}, ReplicaAcks: c.replicaAcks.Load()}
	for i := range c.kinds {
		if v := c.kinds[i].Load(); v != 0 {
			s.Commands[kindNames[i]] = v
		}
	}
	return s
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.trips.Add(1)
		wait := c.count(cmd)
		err := next(ctx, cmd)
		if wait {
			c.acknowledged(cmd)
		}
		return err
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.trips.Add(1)
		waits := false
		for _, cmd := range cmds {
			waits = c.count(cmd) || waits
		}
		err := next(ctx, cmds)
		if waits {
			for _, cmd := range cmds {
				c.acknowledged(cmd)
			}
		}
		return err
	}
}
