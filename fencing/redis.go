package fencing

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/fence.lua
	fenceLua    string
	fenceScript = redis.NewScript(fenceLua)

	//go:embed scripts/read.lua
	readLua    string
	readScript = redis.NewScript(readLua)
)

// Redis is a Guard and Appender that keeps its state in Redis. Each check and
// the write it guards run as one Lua script, so there is no window between
// them. It is safe for concurrent use.
//
// A call that returns an error other than a lost connection changed nothing:
// the script checks all that can fail (a key of the wrong type, a corrupt
// high-water mark) before its first write, because Redis does not roll a
// script back. A lost connection leaves the outcome unknown, all or nothing:
// read it back with Highest or Log before deciding to call again.
//
// Retries are harmless. Each call carries a random op id that the script
// records with its writes; a client that runs the call again because the
// reply was lost (go-redis retries up to MaxRetries times by default) gets
// the first run's outcome — nil — instead of a second append, an overwrite of
// a later Set with the same token, or ErrStaleToken because a newer holder
// got in between. The op id is kept for the retry window (WithRetryWindow);
// a call the caller itself makes again is a new operation.
//
// Keys: the high-water mark of resource R is the string "fencing:{R}:token",
// its log the list "fencing:{R}:log", the op ids "fencing:{R}:op:ID" (expiring
// after the retry window). Every key that begins with "fencing:{" is the
// guard's: Set refuses to write one. The {R} hash tag keeps a resource's keys
// in one slot, so the client may be a Redis Cluster client; for the same
// reason a resource must not begin with '}'. The mark and the log never
// expire: a high-water mark that vanished would admit stale tokens again, and
// so would a node that restarts without its data (use AOF with appendfsync
// always where that matters).
type Redis struct {
	client redis.Scripter
	window time.Duration
	obs    GuardObserver // nil: none
}

var _ Appender = (*Redis)(nil)

// RedisOption configures NewRedis; every [Option] is one.
type RedisOption interface{ applyRedis(*Redis) }

type redisOptionFunc func(*Redis)

func (f redisOptionFunc) applyRedis(g *Redis) { f(g) }

// WithRetryWindow sets how long the guard remembers that a call was applied,
// so that a retry of it is recognised. It must outlast the client's retries of
// one call: about MaxRetries × (ReadTimeout + MaxRetryBackoff). Default 1
// minute. Memory: one small key per call made within the window.
func WithRetryWindow(d time.Duration) RedisOption {
	return redisOptionFunc(func(g *Redis) {
		if d > 0 {
			g.window = d
		}
	})
}

// NewRedis returns a Guard on client (a *redis.Client, *redis.ClusterClient or
// any redis.UniversalClient). Scripts run with EVALSHA, falling back to EVAL.
// The client may retry (see Redis).
func NewRedis(client redis.Scripter, opts ...RedisOption) *Redis {
	g := &Redis{client: client, window: time.Minute}
	for _, o := range opts {
		if o != nil {
			o.applyRedis(g)
		}
	}
	return g
}

// Admit records token for resource if it is not stale.
func (g *Redis) Admit(ctx context.Context, resource string, token uint64) error {
	return g.fence(ctx, resource, token, "admit", "", "")
}

// Set admits token and, in the same step, sets the string key to value. On a
// Redis Cluster key must be in the resource's hash slot: include "{resource}"
// in it (e.g. "orders:{acct-7}" for resource "acct-7"). A key of the guard's
// own (beginning with "fencing:{") is refused with ErrInvalidArgument.
func (g *Redis) Set(ctx context.Context, resource string, token uint64, key, value string) error {
	if key == "" || strings.HasPrefix(key, namespace) {
		return invalidf("key %q: empty, or in the guard's namespace %q", key, namespace+"…")
	}
	return g.fence(ctx, resource, token, "set", key, value)
}

// Append admits token and, in the same step, appends entry to the resource's
// log.
func (g *Redis) Append(ctx context.Context, resource string, token uint64, entry string) error {
	return g.fence(ctx, resource, token, "append", logKey(resource), entry)
}

func (g *Redis) fence(ctx context.Context, resource string, token uint64, op, key, value string) error {
	if err := validateRedis(resource, token); err != nil {
		return err
	}
	return observe(g.obs, resource, token, g.run(ctx, resource, token, op, key, value))
}

// run is fence's script call and the reading of its reply.
func (g *Redis) run(ctx context.Context, resource string, token uint64, op, key, value string) error {
	keys := []string{tokenKey(resource), opKey(resource, rand.Text())}
	if key != "" {
		keys = append(keys, key)
	}
	res, err := fenceScript.Run(ctx, g.client, keys, strconv.FormatUint(token, 10), op, value,
		max(g.window.Milliseconds(), 1)).Slice()
	if err != nil {
		return fmt.Errorf("fencing: redis: %w", err)
	}
	if len(res) == 1 && res[0] == int64(1) {
		return nil
	}
	if len(res) == 2 && res[0] == int64(0) {
		if s, ok := res[1].(string); ok {
			h, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return fmt.Errorf("fencing: redis: high-water mark of %q: %w", resource, err)
			}
			return &StaleTokenError{Resource: resource, Token: token, Highest: h}
		}
	}
	return fmt.Errorf("fencing: redis: unexpected script reply %v", res)
}

// Highest returns the highest token admitted for resource, or 0.
func (g *Redis) Highest(ctx context.Context, resource string) (uint64, error) {
	if err := validateRedis(resource, 1); err != nil {
		return 0, err
	}
	s, err := readScript.Run(ctx, g.client, resourceKeys(resource), "highest").Text()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("fencing: redis: %w", err)
	}
	h, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("fencing: redis: high-water mark of %q: %w", resource, err)
	}
	return h, nil
}

// Log returns the resource's log, oldest entry first.
func (g *Redis) Log(ctx context.Context, resource string) ([]Entry, error) {
	if err := validateRedis(resource, 1); err != nil {
		return nil, err
	}
	raw, err := readScript.Run(ctx, g.client, resourceKeys(resource), "log").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("fencing: redis: %w", err)
	}
	log := make([]Entry, len(raw))
	for i, r := range raw {
		tok, data, _ := strings.Cut(r, " ")
		t, err := strconv.ParseUint(tok, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("fencing: redis: log of %q, entry %d: %w", resource, i, err)
		}
		log[i] = Entry{Token: t, Data: data}
	}
	return log, nil
}

func validateRedis(resource string, token uint64) error {
	if err := validate(resource, token); err != nil {
		return err
	}
	// "{}..." is an empty hash tag, which Redis ignores: the keys of such a
	// resource would land in different slots.
	if strings.HasPrefix(resource, "}") {
		return invalidf("resource %q begins with '}', which breaks its Redis hash tag", resource)
	}
	return nil
}

// namespace begins every key of the guard's.
const namespace = "fencing:{"

func tokenKey(resource string) string  { return namespace + resource + "}:token" }
func logKey(resource string) string    { return namespace + resource + "}:log" }
func opKey(resource, id string) string { return namespace + resource + "}:op:" + id }

func resourceKeys(resource string) []string {
	return []string{tokenKey(resource), logKey(resource)}
}
