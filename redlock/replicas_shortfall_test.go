package redlock_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// TestReplicaAcksShortfallIsReported: nodes whose replicas fall short (here,
// none attached) fail every acquire with ErrReplicaAcks in each node's
// error, within the node timeout, whatever that timeout is, and are not
// taken for down: the nodes answered, only their replicas did not. WAIT's
// own timeout fires on the server's timer (serverCron, 1000/hz ms apart,
// 100ms by default), not at the millisecond asked for: a node timeout
// shorter than two of those periods sees a node timeout instead
// (docs/protocol.md): the nodes of the short TTL run at hz 100, as that
// document advises.
func TestReplicaAcksShortfallIsReported(t *testing.T) {
	for _, tc := range []struct {
		ttl time.Duration
		hz  int // the nodes' timer frequency: its period must fit twice in the node timeout
	}{
		{10 * time.Second, 10}, // the default period, 100ms; default node timeout 500ms
		{time.Second, 100},     // 10ms; default node timeout 50ms
	} {
		ttl := tc.ttl
		t.Run(ttl.String(), func(t *testing.T) {
			nodes := redistest.Clients(t, redistest.StartN(t, 3, redistest.WithArgs("--hz", strconv.Itoa(tc.hz))))
			// The default node timeout for ttl (a twentieth) is five timer
			// periods: WAIT takes half of it and one period more, which
			// leaves the reply one and a half periods (15ms at hz 100) —
			// less than a loaded machine's scheduling hiccups under the race
			// detector, and a late reply is a node timeout. Ten periods
			// leave it four; a hundred measured round trips, if longer.
			period := time.Second / time.Duration(tc.hz)
			nodeTimeout := max(10*period, 100*redistest.PingRTT(t, nodes))
			c, err := redlock.New(nodes, redlock.WithReplicaAcks(1), redlock.WithNodeTimeout(nodeTimeout))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for try := range 3 {
				_, err := c.TryLock(t.Context(), "shortfall:key", ttl)
				if !errors.Is(err, redlock.ErrNotAcquired) {
					t.Fatalf("try %d: %v, want ErrNotAcquired", try, err)
				}
				nes := nodeErrorsIn(err)
				if len(nes) < c.Quorum()-1 {
					t.Fatalf("try %d: %v: want a node error from at least %d nodes", try, err, c.Quorum()-1)
				}
				for _, ne := range nes {
					if !errors.Is(ne, redlock.ErrReplicaAcks) {
						t.Errorf("try %d: node %d failed with %v, want ErrReplicaAcks", try, ne.Node, ne.Err)
					}
				}
				t.Log(err)
			}
		})
	}
}
