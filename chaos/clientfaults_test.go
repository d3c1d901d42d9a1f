package chaos_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/chaos/fault"
)

// Every requested client fault kind is armed within one arming per kind,
// whatever the seed: a kind drawn at random each time was left out of
// whole runs (late-write, with client-pause, under seed 3).
func TestClientFaultsArmEveryKind(t *testing.T) {
	kinds := []fault.Kind{fault.ClientPause, fault.LateWrite, fault.ClientClockSkew}
	for seed := uint64(1); seed <= 5; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			armed := map[fault.Kind]int{}
			n := 0
			cfg := chaos.Config{Faults: kinds, TTL: time.Millisecond, Clients: 4, Seed: seed}
			// clientFaults calls arm on its own goroutine, the test's.
			chaos.ClientFaults(ctx, cfg, func(k fault.Kind, client int) {
				armed[k]++
				if n++; n == len(kinds) {
					cancel()
				}
			})
			if got := slices.Sorted(maps.Keys(armed)); len(got) != len(kinds) {
				t.Errorf("the first %d armings armed %v, want each of %v", len(kinds), armed, kinds)
			}
		})
	}
}
