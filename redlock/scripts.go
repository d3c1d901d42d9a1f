package redlock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run through EVALSHA with an EVAL fallback (redis.Script.Run).
// Those that read or change a key's waiting set have waiting.lua's
// functions prepended; those that lift a fence counter, counter.lua's.
var (
	//go:embed scripts/counter.lua
	counterLua string

	//go:embed scripts/waiting.lua
	waitingLua string

	//go:embed scripts/acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(waitingLua + acquireLua)

	//go:embed scripts/release.lua
	releaseLua    string
	releaseScript = redis.NewScript(waitingLua + releaseLua)

	//go:embed scripts/withdraw.lua
	withdrawLua    string
	withdrawScript = redis.NewScript(waitingLua + withdrawLua)

	//go:embed scripts/raise.lua
	raiseLua    string
	raiseScript = redis.NewScript(counterLua + raiseLua)

	//go:embed scripts/heal.lua
	healLua    string
	healScript = redis.NewScript(counterLua + healLua)

	//go:embed scripts/extend.lua
	extendLua    string
	extendScript = redis.NewScript(extendLua)

	//go:embed scripts/reacquire.lua
	reacquireLua    string
	reacquireScript = redis.NewScript(counterLua + reacquireLua)
)
