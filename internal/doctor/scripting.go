package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The version and scripting check. Every step of the lock on a node is a
// Lua script, sent with EVALSHA and, when the node does not have it yet
// (NOSCRIPT), with EVAL, which also caches it: the check does the same with
// a trivial script (EVAL, then EVALSHA of its SHA-1), not SCRIPT LOAD, which
// the lock never sends. It also says which native compare-and-delete the
// node offers (DELEX from Redis 8.4, DELIFEQ on Valkey); the lock releases
// with its own script either way.

// probeScript is a trivial script: it returns 1.
var probeScript = redis.NewScript("return 1")

func checkScripting(ctx context.Context, rdb *redis.Client, in info, f *nodeFacts) {
	server := "unknown server"
	if in.err == nil {
		server = in.server()
	}
	if v, err := probeScript.Eval(ctx, rdb, nil).Int(); err != nil || v != 1 {
		f.add("scripting", Fail, fmt.Sprintf("%s: EVAL failed: %s", server, errOr(err, v)),
			"enable Lua scripting and allow the user EVAL (+eval): the lock runs every step as a script, and sends it with EVAL when the node does not have it yet")
		return
	}
	v, err := probeScript.EvalSha(ctx, rdb, nil).Int()
	switch {
	case err != nil && redis.HasErrorPrefix(err, "NOSCRIPT"):
		f.add("scripting", Warn, fmt.Sprintf("%s: EVALSHA does not find the script EVAL just ran (%v): every step of the lock costs a second round trip", server, err),
			"let the server keep the scripts EVAL runs in its script cache")
	case err != nil || v != 1:
		f.add("scripting", Fail, fmt.Sprintf("%s: EVALSHA failed: %s", server, errOr(err, v)),
			"allow the user EVALSHA (+evalsha): the lock sends every script with it")
	default:
		f.add("scripting", OK, fmt.Sprintf("%s: EVAL and EVALSHA work; %s", server, nativeDelete(ctx, rdb)), "")
	}
}

// nativeDelete says which compare-and-delete command the node has.
func nativeDelete(ctx context.Context, rdb *redis.Client) string {
	var have []string
	for _, name := range []string{"DELEX", "DELIFEQ"} {
		// COMMAND INFO answers nil for a command the server does not have.
		v, err := rdb.Do(ctx, "COMMAND", "INFO", name).Slice()
		if err == nil && len(v) == 1 && v[0] != nil {
			have = append(have, name)
		}
	}
	if len(have) == 0 {
		return "no native compare-and-delete (DELEX: Redis 8.4+, DELIFEQ: Valkey); the lock releases by script"
	}
	return "native compare-and-delete: " + strings.Join(have, ", ") + " (the lock releases by script all the same)"
}

func errOr(err error, v int) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("returned %d, not 1", v)
}
