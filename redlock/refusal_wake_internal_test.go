package redlock

import (
	"testing"
	"time"
)

// A refusal counts toward the head's wake-up (freesForCaller) exactly when
// acquire.lua entered the caller's place with it: the caller waits (its
// lease, planned sleep and slack, is not 0), the key is free, and the
// caller is first after it. A node timeout under a millisecond sends a
// slack of 0 with the sleep's drift floor: the refusal entered the place
// all the same, and must count.
func TestARefusalCountsExactlyWhenItEnteredTheHead(t *testing.T) {
	const since = int64(1_000_000)
	me := "1000000 55555555"
	for _, tc := range []struct {
		name         string
		sleep, slack int64 // acquire.lua's ARGV[5] and ARGV[6], ms
		holder       string
		first        string
		wakes        bool
	}{
		{"a waiter, first", 60_000, 250, "", me, true},
		{"a waiter on a sub-millisecond node timeout, first", 2, 0, "", me, true},
		{"a waiter's last try, first", 2, 250, "", me, true},
		{"a TryLock", 0, 0, "", me, false},
		{"a waiter, another first", 60_000, 250, "", "999999 99999999", false},
		{"a waiter, the key held", 60_000, 250, "other", me, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bareClient(t, 3)
			w := c.waiters.join("k", time.UnixMilli(since), time.Second)
			order, leases := waitKeys("k")
			a := &attempt{c: c, keys: []string{"k", FenceKey("k"), order, leases},
				args: []any{"v", int64(60_000), since, c.id, tc.sleep, tc.slack}}
			for i := range c.quorum {
				r := reply{node: i, holder: tc.holder, first: tc.first}
				if a.freesForCaller(r) {
					c.waiters.freedByRefusal(i, a.key(), since)
				}
			}
			if got := woken(w); got != tc.wakes {
				t.Errorf("woken %v, want %v", got, tc.wakes)
			}
		})
	}
}
