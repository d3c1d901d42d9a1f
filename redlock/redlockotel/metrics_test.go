package redlockotel_test

import (
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/redlockotel"
)

// TestMetrics checks each instrument against the calls that must move it.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(t.Context()) })
	m, err := redlockotel.NewMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	nodes := redistest.Clients(t, redistest.StartN(t, 3))
	c, err := redlock.New(nodes, redlock.WithObserver(m), redlock.WithReacquireOnExtend(),
		redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	l, err := c.TryLock(ctx, "otel:metrics", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "otel:metrics", time.Minute); !errors.Is(err, redlock.ErrNotAcquired) {
		t.Fatalf("second TryLock: %v", err)
	}
	// Node 2 loses the key once its grant landed; the extension puts it back.
	for deadline := time.Now().Add(5 * time.Second); nodes[2].Get(ctx, "otel:metrics").Val() != l.Value(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("node 2 never held the key")
		}
	}
	if err := nodes[2].FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	g := fencing.NewMemoryWith(fencing.WithObserver(m))
	_ = g.Admit(ctx, "r", l.Token()+1) // a newer holder's write
	_ = g.Admit(ctx, "r", l.Token())   // this one's, late

	// The re-create's answer may come after the Extend decided, and a
	// node's round trips are reported as its replies are read, which may
	// be after the call decided without it: collect until every one is
	// counted, or for a few seconds.
	got := map[string]metricdata.Aggregation{}
	everyNode := func() bool {
		d, ok := got["fencedlock.node.round_trip"].(metricdata.Histogram[float64])
		nodes := map[string]bool{}
		for _, p := range d.DataPoints {
			nodes[p.Attributes.Encoded(attribute.DefaultEncoder())] = p.Count > 0
		}
		return ok && nodes["fencedlock.node=0"] && nodes["fencedlock.node=1"] && nodes["fencedlock.node=2"]
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		clear(got)
		for _, sm := range rm.ScopeMetrics {
			for _, mt := range sm.Metrics {
				got[mt.Name] = mt.Data
			}
		}
		if _, ok := got["fencedlock.reacquired"]; ok && everyNode() || time.Now().After(deadline) {
			break
		}
	}
	sum := func(name string, attrs ...attribute.KeyValue) int64 {
		var n int64
		switch d := got[name].(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				if set := attribute.NewSet(attrs...); len(attrs) == 0 || p.Attributes.Equals(&set) {
					n += p.Value
				}
			}
		default:
			t.Errorf("%s: %T, want an int64 sum", name, got[name])
		}
		return n
	}
	hist := func(name string, attrs ...attribute.KeyValue) (counts map[string]uint64) {
		counts = map[string]uint64{}
		d, ok := got[name].(metricdata.Histogram[float64])
		if !ok {
			t.Errorf("%s: %T, want a float64 histogram", name, got[name])
			return
		}
		for _, p := range d.DataPoints {
			counts[p.Attributes.Encoded(attribute.DefaultEncoder())] += p.Count
		}
		return counts
	}
	outcome := func(o string) attribute.KeyValue { return redlockotel.OutcomeKey.String(o) }
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"acquires{acquired}", sum("fencedlock.acquires", outcome("acquired")), 1},
		{"acquires{refused}", sum("fencedlock.acquires", outcome("refused")), 1},
		{"acquires", sum("fencedlock.acquires"), 2},
		{"extensions", sum("fencedlock.extensions"), 1},
		{"releases", sum("fencedlock.releases"), 1},
		{"held_locks", sum("fencedlock.held_locks"), 0},
		{"fencing.admitted", sum("fencedlock.fencing.admitted"), 1},
		{"fencing.rejected", sum("fencedlock.fencing.rejected"), 1},
		{"reacquired{node=2}", sum("fencedlock.reacquired", redlockotel.NodeAttr.Int(2)), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if h := hist("fencedlock.hold.duration"); h[""] != 1 {
		t.Errorf("hold.duration counts %v, want 1", h)
	}
	if h := hist("fencedlock.acquire.wait"); h["outcome=acquired"] != 1 || h["outcome=refused"] != 1 {
		t.Errorf("acquire.wait counts %v, want 1 acquired and 1 refused", h)
	}
	trips := hist("fencedlock.node.round_trip")
	for _, node := range []string{"fencedlock.node=0", "fencedlock.node=1", "fencedlock.node=2"} {
		if trips[node] == 0 {
			t.Errorf("no round trip of %s: %v", node, trips)
		}
	}
}
