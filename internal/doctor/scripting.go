package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The version and scripting check. Every step of the lock on a node is a
// Lua script, sent with EVALSHA and, when the node does not have it yet
// (NOSCRIPT), with EVAL: both must work. The check also says which native
// compare-and-delete the node offers (DELEX from Redis 8.4, DELIFEQ on
// Valkey); the lock releases with its own script either way.

// probeScript is a trivial script: it returns 1.
const probeScript = "return 1"

func checkScripting(ctx context.Context, rdb *redis.Client, in info, f *nodeFacts) {
	server := "unknown server"
	if in.err == nil {
		server = in.server()
	}
	sha, err := rdb.ScriptLoad(ctx, probeScript).Result()
	if err != nil {
		f.add("scripting", Fail, fmt.Sprintf("%s: SCRIPT LOAD failed: %v", server, err),
			"enable Lua scripting (the lock runs every step as a script) and allow the user SCRIPT LOAD, EVAL and EVALSHA")
		return
	}
	if v, err := rdb.EvalSha(ctx, sha, nil).Int(); err != nil || v != 1 {
		f.add("scripting", Fail, fmt.Sprintf("%s: EVALSHA of a loaded script failed: %v", server, errOr(err, v)),
			"allow the user EVALSHA (+evalsha): the lock sends every script with it")
		return
	}
	if v, err := rdb.Eval(ctx, probeScript, nil).Int(); err != nil || v != 1 {
		f.add("scripting", Fail, fmt.Sprintf("%s: EVAL failed: %v", server, errOr(err, v)),
			"allow the user EVAL (+eval): the lock sends a script with it when the node does not have it yet")
		return
	}
	f.add("scripting", OK, fmt.Sprintf("%s: EVALSHA and EVAL work; %s", server, nativeDelete(ctx, rdb)), "")
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
