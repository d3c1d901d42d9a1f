package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

// The holder record: `fencedlock run` says who it is next to the lock, so
// that `fencedlock status` can show the host and pid of the holder. The
// lock's own value stays what redlock makes it (a UUID that orders waiters);
// the record is a key of its own on every node, "host pid token value",
// that lasts as long as the hold's validity and is refreshed with each
// extension. status trusts a record only when its value is the value a
// quorum holds: a record that a former holder's late refresh left behind,
// or one from a hold that ended, is not shown as the holder.

// holderKey is the key of KEY's holder record. Its hash tag is KEY, so for a
// KEY without braces it is in KEY's hash slot.
func holderKey(key string) string { return "fencedlock:holder:{" + key + "}" }

// holderRecord is who holds a lock, as `fencedlock run` records it.
type holderRecord struct {
	Host  string `json:"host"`
	PID   int    `json:"pid"`
	Token uint64 `json:"token"`
	Value string `json:"value"` // the hold's value on the lock key
}

func (r holderRecord) String() string {
	return fmt.Sprintf("%s %d %d %s", r.Host, r.PID, r.Token, r.Value)
}

// parseHolderRecord parses what holderRecord.String wrote.
func parseHolderRecord(s string) (holderRecord, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return holderRecord{}, fmt.Errorf("holder record %q: want host, pid, token and value", s)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		return holderRecord{}, fmt.Errorf("holder record %q: bad pid", s)
	}
	token, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		return holderRecord{}, fmt.Errorf("holder record %q: bad token", s)
	}
	return holderRecord{Host: f[0], PID: pid, Token: token, Value: f[3]}, nil
}

// thisHolder is the record of this process holding l.
func thisHolder(l *redlock.Lock) holderRecord {
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, " \t\n") {
		host = "unknown-host"
	}
	return holderRecord{Host: host, PID: os.Getpid(), Token: l.Token(), Value: l.Value()}
}

// deleteRecord deletes the record only while it is this hold's: after the
// lock is released, the next holder may have written its own.
var deleteRecord = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// recordHolder writes l's holder record on every node now and after each
// value on refresh (an extension), until ctx ends; then it deletes it. The
// returned channel is closed when it is done. Writes are best effort: a
// node that fails them only shows no holder in status.
func recordHolder(ctx context.Context, clients []*redis.Client, l *redlock.Lock, refresh <-chan struct{},
	timeout time.Duration) <-chan struct{} {
	rec := thisHolder(l)
	key, value := holderKey(l.Key()), rec.String()
	each := func(call func(ctx context.Context, rdb *redis.Client)) {
		var wg sync.WaitGroup
		for _, rdb := range clients {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
				defer cancel()
				call(ctx, rdb)
			})
		}
		wg.Wait()
	}
	write := func() {
		// The record lasts no longer than the hold may: l.Until() is on
		// the real clock here (the CLI's lock client uses it).
		px := time.Until(l.Until())
		if px < time.Millisecond {
			return
		}
		each(func(ctx context.Context, rdb *redis.Client) { _ = rdb.Set(ctx, key, value, px).Err() })
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		write()
		for {
			select {
			case <-refresh:
				write()
			case <-ctx.Done():
				each(func(ctx context.Context, rdb *redis.Client) {
					_ = deleteRecord.Run(ctx, rdb, []string{key}, value).Err()
				})
				return
			}
		}
	}()
	return done
}
