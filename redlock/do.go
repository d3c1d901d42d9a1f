package redlock

import (
	"context"
	"errors"
	"time"
)

// Do acquires key (waiting like Lock), runs fn while the hold is extended
// automatically, and unlocks when fn returns. fn's ctx is cancelled the
// moment the lock is lost — fn must stop writing then — and Do returns fn's
// error joined with ErrLockLost in that case. Use l.Token() to fence fn's
// writes. If fn panics, Do stops the watchdog and unlocks, and the panic
// goes on with its own value.
func (c *Client) Do(ctx context.Context, key string, ttl time.Duration, fn func(ctx context.Context, l *Lock) error, opts ...LockOption) error {
	if fn == nil {
		return invalid("nil fn")
	}
	if err := checkLockOptions(opts); err != nil {
		return err
	}
	l, err := c.Lock(ctx, key, ttl, append(opts, AutoExtend())...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	watched := make(chan bool, 1) // whether the lock was lost while fn ran
	go func() {
		select {
		case <-l.Done():
			cancel()
			watched <- true
		case <-stop:
			watched <- false
		}
	}()
	unlock := func() (lost bool, err error) {
		close(stop)
		lost = <-watched
		return lost, l.Unlock(context.WithoutCancel(ctx)) // also stops the watchdog
	}
	returned := false
	defer func() {
		if !returned { // fn panicked (or called runtime.Goexit): the panic goes on
			_, _ = unlock()
		}
	}()
	ferr := fn(fctx, l)
	returned = true
	lost, uerr := unlock()
	if lost {
		return errors.Join(ferr, ErrLockLost)
	}
	return errors.Join(ferr, uerr)
}
