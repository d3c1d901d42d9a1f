package chaos

import (
	"testing"

	"github.com/fencedlock/fencedlock/redlock"
)

// TestHuntTaggedKeysShareACounter: the hunt's hash-tagged keys draw their
// tokens from one fence counter, which the plain key does not share.
func TestHuntTaggedKeysShareACounter(t *testing.T) {
	a, b := huntTargets[1].key, huntTargets[2].key
	if redlock.FenceKey(a) != redlock.FenceKey(b) {
		t.Errorf("%q and %q have counters %q and %q, want one", a, b, redlock.FenceKey(a), redlock.FenceKey(b))
	}
	if redlock.FenceKey(lockKey) == redlock.FenceKey(a) {
		t.Errorf("%q shares the counter of the tagged keys", lockKey)
	}
}

func TestLanesDefault(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want int
	}{
		{"plain", Config{}, 1},
		{"hunt", Config{Profile: ProfileHunt}, huntLanes},
		{"set", Config{Lanes: 4}, 4},
		{"hunt, another lock", Config{Profile: ProfileHunt, Lock: LockRedsync}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := tc.cfg.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			if c.Lanes != tc.want {
				t.Errorf("lanes %d, want %d", c.Lanes, tc.want)
			}
		})
	}
	if _, err := (Config{Lanes: 2, ClientProcs: true}).withDefaults(); err == nil {
		t.Error("lanes with client processes: no error")
	}
}
