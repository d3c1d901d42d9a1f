package doctor

import "fmt"

// The persistence check. Fence counters never expire; a node that restarts
// without them (amnesia) can hand out a token that repeats or precedes one
// already issued (docs/protocol.md, "Claims 1–2 under amnesia"). Only the
// append-only file with fsync on every write keeps every acknowledged
// increment through a crash.

const persistenceFix = "CONFIG SET appendonly yes, then CONFIG SET appendfsync always (and the same two lines in redis.conf, or CONFIG REWRITE)"

func checkPersistence(conf config, f *nodeFacts) {
	aof, ok1 := conf.get("appendonly")
	fsync, ok2 := conf.get("appendfsync")
	switch {
	case !ok1 || !ok2:
		err := conf.errs["appendonly"]
		if err == nil {
			err = conf.errs["appendfsync"]
		}
		f.add("persistence", Warn, fmt.Sprintf("cannot read appendonly and appendfsync (%v): without AOF and appendfsync always, a restart brings amnesia", err),
			"check the server's configuration by hand: "+persistenceFix)
	case aof == "yes" && fsync == "always":
		f.add("persistence", OK, "appendonly yes, appendfsync always: fence counters survive a restart", "")
	case aof == "yes":
		f.add("persistence", Warn, fmt.Sprintf("appendonly yes but appendfsync %s: a crash loses the writes of up to the last second, and a restart brings amnesia (fence counters lost: a later token can repeat an earlier one)", fsync),
			"CONFIG SET appendfsync always (and appendfsync always in redis.conf)")
	default:
		f.add("persistence", Warn, "appendonly no: a restart brings amnesia (fence counters lost: a later token can repeat an earlier one)",
			persistenceFix)
	}
}
