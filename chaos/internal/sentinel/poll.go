package sentinel

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Poll calls check every period until it returns nil, and fails with its
// last error once bound has passed or ctx ended. wake (if not nil) gives
// a channel that also triggers a check.
func Poll(ctx context.Context, period, bound time.Duration, check func() error, wake func() <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		var woken <-chan struct{}
		if wake != nil {
			woken = wake()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		case <-woken:
		}
	}
}

// Sleep waits d (a failover's lag) or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Command runs one command on the server at addr.
func Command(ctx context.Context, addr string, timeout time.Duration, args ...any) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout})
	defer c.Close()
	return c.Do(ctx, args...).Err()
}

// ReplicationInfo is the server's INFO replication, as key: value.
func ReplicationInfo(ctx context.Context, addr string) (map[string]string, error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, MaxRetries: -1})
	defer c.Close()
	s, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return nil, err
	}
	info := map[string]string{}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			info[k] = v
		}
	}
	return info, nil
}

// ReplicaState is the state= of the replica at host:port in a primary's
// INFO replication ("online" once in sync), "" if it is not attached.
func ReplicaState(info map[string]string, host, port string) string {
	for k, v := range info {
		f := "," + v + ","
		if strings.HasPrefix(k, "slave") && strings.Contains(f, ",ip="+host+",") && strings.Contains(f, ",port="+port+",") {
			for kv := range strings.SplitSeq(v, ",") {
				if s, ok := strings.CutPrefix(kv, "state="); ok {
					return s
				}
			}
		}
	}
	return ""
}
