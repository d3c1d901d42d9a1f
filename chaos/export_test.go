package chaos

import (
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// WithProcHooks returns cfg with the client-process test hooks set (see
// Config.onProcOp, Config.onProcStop).
func WithProcHooks(cfg Config, onOp func(client, pid int, op history.Op),
	onStop func(client, pid int, validUntil, now time.Duration)) Config {
	cfg.onProcOp, cfg.onProcStop = onOp, onStop
	return cfg
}

// ClientFaults is clientFaults, for its test.
var ClientFaults = clientFaults
