package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Reach sends PING to rdb. It returns nil when the node answered PONG, and
// the error otherwise: [Unreachable] tells a node that did not answer at
// all from one that answered with an error (a wrong password, say).
func Reach(ctx context.Context, rdb *redis.Client) error {
	return rdb.Ping(ctx).Err()
}

// Unreachable reports whether err says that the node did not answer: the
// dial failed (refused, no such host, no route), or a call timed out. An
// error the node replied with (NOAUTH, WRONGPASS, LOADING) is not one.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if _, replied := errors.AsType[redis.Error](err); replied {
		return false
	}
	var nerr net.Error
	var dns *net.DNSError
	var op *net.OpError
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &nerr) || errors.As(err, &dns) ||
		errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed)
}

// Why says briefly why a node did not answer: "connection refused",
// "timeout", "no such host", or the error's text.
func Why(err error) string {
	var dns *net.DNSError
	var nerr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.As(err, &dns) && dns.IsNotFound:
		return "no such host"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	}
	return err.Error()
}

// checkReach names the reach check.
const checkReach = "reach"

// reach is the reach check: it reports whether the node answered, so
// that the other checks can run.
func reach(ctx context.Context, rdb *redis.Client, f *nodeFacts) bool {
	err := Reach(ctx, rdb)
	switch {
	case err == nil:
		return true
	case Unreachable(err):
		f.unreachable = true
		f.add(checkReach, Fail, "unreachable: "+Why(err),
			"check the address, that redis-server runs and listens there (bind, protected-mode), and the firewall")
	default:
		f.add(checkReach, Fail, fmt.Sprintf("the node refuses the connection: %v", err),
			"give the user and password the node expects: redis://user:password@host:port")
	}
	return false
}
