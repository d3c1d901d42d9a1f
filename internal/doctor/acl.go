package doctor

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The ACL check: the connected user must be allowed every command the lock
// sends. The lock's commands, from redlock's code and scripts:
//   - on the wire: EVALSHA and EVAL (every step is a script), SUBSCRIBE and
//     UNSUBSCRIBE (a waiter hears releases), PING (a node marked down is
//     probed), WAIT (only with replica acknowledgements);
//   - inside its scripts (redlock/scripts/*.lua): GET, SET, DEL, EXISTS,
//     INCR, PEXPIRE, PTTL, TIME, PUBLISH, ZADD, ZRANGE, ZRANGEBYSCORE, ZREM,
//     ZREMRANGEBYSCORE, ZSCORE;
//   - optional: CONFIG GET (the lock's check of the eviction policy, which
//     only logs).
// Key patterns are not checked (the lock's keys are the user's); the release
// channel prefix is, for PUBLISH and SUBSCRIBE.
//
// The check asks the server itself, from a script: redis.acl_check_cmd
// (Redis 7+) needs no more than EVAL, which the lock needs anyway. Where it
// is missing, ACL DRYRUN (Redis 7+, an admin command) is tried.

// releaseChannel is a channel of the lock's release announcements
// (redlock/slot.go releasePrefix, then the waiter's client id and the key).
const releaseChannel = "fencedlock:released:doctor:key"

// lockCommands are the commands the lock needs, each with the arguments
// its permission is checked with (none but the channel: key patterns are
// the user's).
var lockCommands = [][]string{
	{"EVALSHA"}, {"EVAL"}, {"SUBSCRIBE"}, {"SUBSCRIBE", releaseChannel}, {"UNSUBSCRIBE"}, {"PING"},
	{"GET"}, {"SET"}, {"DEL"}, {"EXISTS"}, {"INCR"}, {"PEXPIRE"}, {"PTTL"}, {"TIME"},
	{"PUBLISH"}, {"PUBLISH", releaseChannel, "m"},
	{"ZADD"}, {"ZRANGE"}, {"ZRANGEBYSCORE"}, {"ZREM"}, {"ZREMRANGEBYSCORE"}, {"ZSCORE"},
}

// waitCommand is needed with replica acknowledgements.
var waitCommand = []string{"WAIT"}

//go:embed acl_check.lua
var aclCheckScript string

func checkACL(ctx context.Context, rdb *redis.Client, acks int, f *nodeFacts) {
	cmds := lockCommands
	if acks > 0 {
		cmds = append(cmds[:len(cmds):len(cmds)], waitCommand)
	}
	denied, err := deniedByScript(ctx, rdb, cmds)
	if err != nil {
		var dryErr error
		if denied, dryErr = deniedByDryRun(ctx, rdb, cmds); dryErr != nil {
			f.add("acl", Warn, fmt.Sprintf("cannot check the user's permissions: redis.acl_check_cmd: %v; ACL DRYRUN: %v", err, dryErr),
				"check by hand that the user may run: "+names(cmds))
			return
		}
	}
	if len(denied) > 0 {
		f.add("acl", Fail, "the user may not run "+strings.Join(denied, ", ")+": the lock fails on this node", grant(denied))
		return
	}
	f.add("acl", OK, "the user may run every command the lock uses", "")
}

// deniedByScript asks redis.acl_check_cmd for each command; the script
// returns the denied ones (acl_check.lua).
func deniedByScript(ctx context.Context, rdb *redis.Client, cmds [][]string) ([]string, error) {
	args := make([]any, len(cmds))
	for i, c := range cmds {
		args[i] = strings.Join(c, " ")
	}
	v, err := rdb.Eval(ctx, aclCheckScript, nil, args...).StringSlice()
	if err != nil {
		return nil, err
	}
	return describeDenied(v), nil
}

// deniedByDryRun asks ACL DRYRUN for the connected user.
func deniedByDryRun(ctx context.Context, rdb *redis.Client, cmds [][]string) ([]string, error) {
	user, err := rdb.Do(ctx, "ACL", "WHOAMI").Text()
	if err != nil {
		return nil, err
	}
	var denied []string
	for _, c := range cmds {
		args := []any{"ACL", "DRYRUN", user}
		for _, a := range c {
			args = append(args, a)
		}
		reply, err := rdb.Do(ctx, args...).Text()
		if err != nil {
			return nil, err
		}
		if reply != "OK" {
			denied = append(denied, strings.Join(c, " "))
		}
	}
	return describeDenied(denied), nil
}

// describeDenied names each denied command, and the channel for a command
// denied only on it.
func describeDenied(denied []string) []string {
	out := make([]string, 0, len(denied))
	for _, d := range denied {
		name, rest, _ := strings.Cut(d, " ")
		if rest == "" {
			out = append(out, name)
		} else if !slices.Contains(denied, name) {
			out = append(out, name+" on channel fencedlock:released:*")
		}
	}
	return out
}

// grant is the ACL SETUSER that allows what was denied.
func grant(denied []string) string {
	fix, channel := "ACL SETUSER <user>", false
	for _, d := range denied {
		if strings.HasSuffix(d, " on channel fencedlock:released:*") {
			channel = true
		} else {
			fix += " +" + strings.ToLower(d)
		}
	}
	if channel {
		fix += " &fencedlock:released:*"
	}
	return fix + " (and the same in the ACL file or redis.conf)"
}

func names(cmds [][]string) string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = c[0]
	}
	return strings.Join(out, ", ")
}
