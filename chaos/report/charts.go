package report

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// addOverview draws the whole run, end long: a band per fault, a mark per
// violation. A band is at least minPx of a window fitW wide: a fault at one
// instant (a promotion Sentinel made on its own) has no width of its own.
func (t *timeline) addOverview(faults []checker.FaultSpan, vs []checker.Violation, end time.Duration) {
	least := ms(time.Duration(float64(end) * minPx / fitW))
	for _, f := range faults {
		class := "oband " + faultClass(f.Kind)
		if f.Err != "" {
			class += " failed"
		}
		t.OverBands = append(t.OverBands, shape{X: ms(f.Start), W: max(ms(f.End-f.Start), least), Class: class,
			Title: fmt.Sprintf("%s on %s, %s to %s", f.Kind, f.Target(), at(f.Start), at(f.End))})
	}
	for _, v := range vs {
		t.OverMarks = append(t.OverMarks, shape{X: ms(v.Start), W: ms(v.End - v.Start), Class: "omark " + violationClass(v)})
	}
}

// addCharts draws, below the lanes, acquisitions per second and the p50
// and p99 latency of the acquires that succeeded, per bucket of time; a
// bucket is a round span of about barPx wide in a window fitW wide.
func (t *timeline) addCharts(h history.History, end time.Duration, top float64) {
	bucket := niceStep(time.Duration(float64(end) * barPx / fitW))
	n := int(end/bucket) + 1
	lat := make([][]time.Duration, n)
	for _, op := range h.Ops {
		if op.Kind == history.KindAcquire && op.Outcome == history.OK && op.Complete >= 0 {
			i := min(int(op.Complete/bucket), n-1)
			lat[i] = append(lat[i], op.Complete-op.Invoke)
		}
	}
	var maxRate float64
	var maxLat time.Duration
	for _, ds := range lat {
		slices.Sort(ds)
		maxRate = max(maxRate, float64(len(ds))/bucket.Seconds())
		if len(ds) > 0 {
			maxLat = max(maxLat, percentile(ds, 99))
		}
	}
	latTop := top + chartH + sepH
	t.Rows = append(t.Rows,
		row{Y: top + 12, Label: "acquisitions/s", Class: "chartlabel"},
		row{Y: top + 26, Label: fmt.Sprintf("max %.0f", maxRate), Class: "chartscale"},
		row{Y: latTop + 12, Label: "acquire latency", Class: "chartlabel"},
		row{Y: latTop + 26, Label: "p50 blue, p99 red", Class: "chartscale"},
		row{Y: latTop + 40, Label: "max " + at(maxLat), Class: "chartscale"})
	t.Charts = append(t.Charts, shape{X: 0, Y: top + chartH, W: ms(end), H: 1, Class: "chartaxis"},
		shape{X: 0, Y: latTop + chartH, W: ms(end), H: 1, Class: "chartaxis"})
	for i, ds := range lat {
		if len(ds) == 0 {
			continue
		}
		x, w := ms(time.Duration(i)*bucket), ms(bucket)
		rate := float64(len(ds)) / bucket.Seconds()
		bh := (chartH - 4) * rate / maxRate
		t.Charts = append(t.Charts, shape{X: x, Y: top + chartH - bh, W: w, H: bh, Class: "rate",
			Title: fmt.Sprintf("%s to %s: %.0f acquisitions/s", at(time.Duration(i)*bucket), at(time.Duration(i+1)*bucket), rate)})
		for _, p := range []int{50, 99} {
			d := percentile(ds, p)
			y := latTop + chartH - 2 - (chartH-4)*float64(d)/float64(max(maxLat, 1))
			t.Charts = append(t.Charts, shape{X: x, Y: y, W: w, H: 2, Class: fmt.Sprintf("p%d", p),
				Title: fmt.Sprintf("p%d %s over %d acquires from %s", p, at(d), len(ds), at(time.Duration(i)*bucket))})
		}
	}
}

// niceStep rounds d up to 1, 2 or 5 times a power of ten (at least 1µs).
func niceStep(d time.Duration) time.Duration {
	step := time.Duration(math.Pow(10, math.Floor(math.Log10(max(float64(d), 1)))))
	for _, m := range []time.Duration{1, 2, 5, 10} {
		if step*m >= d {
			return max(step*m, time.Microsecond)
		}
	}
	return max(step*10, time.Microsecond)
}
