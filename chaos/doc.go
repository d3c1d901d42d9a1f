// Package chaos runs the lock against real Redis nodes while faults hit
// them, and judges what its clients saw. Run starts cfg.Nodes redis-server
// nodes (processes, or containers with Backend "docker") and a store, runs
// cfg.Clients workload clients that loop acquire, fenced write, hold and
// release on package redlock, by default (in this process, or each in a process of its
// own with Config.ClientProcs, for which the program calls ClientMain
// first), injects the faults of cfg.Faults on a schedule that Schedule
// returns and the seed fixes, records every operation and fault on one
// clock (package recorder), and returns the run with its history checked
// (package history): a violation, and the verdict (violated when one shows
// that no assumption-breaking fault explains), is in the result, never in
// the error. An error
// means the run could not be carried out, or, wrapping ErrInjection, that
// some faults could not be injected or undone; the nodes, the store and the
// client processes are gone when Run returns.
//
// The workload drives any lock through a chaos/locker adapter
// (Config.Lock, Locks): fencedlock by default, or redsync, redislock or a
// single-instance lock under Sentinel, whose holds write to the store
// unfenced when the lock gives no token; Compare runs several under one
// schedule.
package chaos
