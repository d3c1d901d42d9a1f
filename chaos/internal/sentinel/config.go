package sentinel

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Monitor is one pair Sentinel watches: its name, the address of its
// primary as Sentinel reaches it, and the ACL user (with any password:
// the servers' users have none) Sentinel authenticates as, "" for the
// default user.
type Monitor struct {
	Name     string
	Host     string
	Port     string
	AuthUser string
}

// Config is the content of a Sentinel configuration file that monitors
// each of ms with quorum 1 and timing t. Sentinel rewrites the file as it
// learns: it must be writable, in a writable directory.
func Config(ms []Monitor, t Timing) string {
	var conf strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&conf, "sentinel monitor %s %s %s 1\n", m.Name, m.Host, m.Port)
		fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", m.Name, t.DownAfter.Milliseconds())
		fmt.Fprintf(&conf, "sentinel failover-timeout %s %d\n", m.Name, t.FailoverTimeout.Milliseconds())
		if m.AuthUser != "" {
			fmt.Fprintf(&conf, "sentinel auth-user %s %s\n", m.Name, m.AuthUser)
			fmt.Fprintf(&conf, "sentinel auth-pass %s %s\n", m.Name, AnyPassword)
		}
	}
	return conf.String()
}

// AnyPassword is what a server of a pair is sent for an ACL user of its
// that has no password (nopass accepts any): Redis sends AUTH for a user
// only with a password.
const AnyPassword = "nopass"

// SetPeriods sets the periods of t on the Sentinel at addr, which its
// configuration file cannot hold (SENTINEL DEBUG).
func SetPeriods(ctx context.Context, addr string, t Timing, timeout time.Duration) error {
	ms := strconv.FormatInt(t.Period.Milliseconds(), 10)
	err := Command(ctx, addr, timeout, "SENTINEL", "DEBUG", "info-period", ms,
		"ping-period", strconv.FormatInt(t.Ping.Milliseconds(), 10), "publish-period", ms, "ask-period", ms, "min-link-reconnect-period", ms)
	if err != nil {
		return fmt.Errorf("sentinel: set its periods: %w", err)
	}
	return nil
}
