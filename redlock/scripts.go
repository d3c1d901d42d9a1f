package redlock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts run through EVALSHA with an EVAL fallback (redis.Script.Run).
var (
	//go:embed scripts/acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed scripts/raise.lua
	raiseLua    string
	raiseScript = redis.NewScript(raiseLua)

	//go:embed scripts/heal.lua
	healLua    string
	healScript = redis.NewScript(healLua)

	//go:embed scripts/extend.lua
	extendLua    string
	extendScript = redis.NewScript(extendLua)

	//go:embed scripts/transfer.lua
	transferLua    string
	transferScript = redis.NewScript(transferLua)

	//go:embed scripts/release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)
