package chaos

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencedlock/fencedlock/chaos/report"
)

// Compare runs cfg once per lock of locks (CompareLocks() when nil), one after
// another, each on fresh nodes, under the same seed and so the same fault
// schedule; cfg.Lock is ignored. When any of the locks needs nodes with a
// replica, every run gets them (Replicas), so that the runs differ in the
// lock alone. each, if set, gets every run as it ends (with Run's error).
// It returns the runs that were carried out, in order, and the errors
// joined: an error wrapping ErrConfig stops it before any run.
func Compare(ctx context.Context, cfg Config, locks []string, each func(report.Run, error)) ([]report.Run, error) {
	if locks == nil {
		locks = CompareLocks()
	}
	for _, l := range locks {
		spec, err := lockSpecOf(l)
		if err != nil {
			return nil, err
		}
		if spec.replicas {
			cfg.Replicas = true
		}
	}
	for _, l := range locks { // every configuration before the first run
		c := withLock(cfg, l)
		if _, err := c.withDefaults(); err != nil {
			return nil, err
		}
	}
	var (
		runs []report.Run
		errs []error
	)
	for _, l := range locks {
		run, err := Run(ctx, withLock(cfg, l))
		if each != nil {
			each(run, err)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l, err))
		}
		if run.History.Ops != nil {
			runs = append(runs, run)
		}
		if ctx.Err() != nil {
			break
		}
	}
	return runs, errors.Join(errs...)
}

// withLock returns cfg for lock: lanes, which share a fencedlock client's
// local queue, only for fencedlock.
func withLock(cfg Config, lock string) Config {
	cfg.Lock = lock
	if !IsFencedlock(lock) {
		cfg.Lanes = 0
	}
	return cfg
}
