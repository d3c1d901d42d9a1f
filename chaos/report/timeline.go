package report

import (
	"cmp"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

//go:embed timeline.html
var timelineHTML string

var timelineTemplate = template.Must(template.New("timeline").Funcs(template.FuncMap{
	"px": func(f float64) string { return fmt.Sprintf("%.1f", f) },
}).Parse(timelineHTML))

// Layout of the timeline, in CSS pixels.
const (
	axisH        = 26.0   // the time axis at the top
	nodeH        = 16.0   // one row per node, for its faults
	laneH        = 26.0   // one lane per client
	barH         = 18.0   // a hold inside a lane
	sepH         = 10.0   // between node rows and client lanes
	labelW       = 96.0   // the lane labels, outside the scrolling plot
	minPlotW     = 1280.0 // the plot is at least this wide...
	maxPlotW     = 40000.0
	pxPerMs      = 0.15 // ...and at least this many pixels per millisecond...
	medianHoldPx = 16.0 // ...and wide enough for a median hold to show a two-digit token
	charW        = 6.5  // width of a label character, for deciding to show it
	maxLinks     = 20   // violations listed above the chart
)

// shape is a rectangle (or, for marks, a circle at X, Y) of the timeline,
// with a tooltip and an optional label and anchor.
type shape struct {
	ID         string
	X, Y, W, H float64
	Class      string
	Title      string
	Label      string
	LabelClass string
	LX, LY     float64 // where the label starts
}

type tick struct {
	X     float64
	Label string
}

type row struct {
	Y     float64
	Label string
}

// link points from the list above the chart to a violation's shape.
type link struct {
	ID, Class, Text string
}

// timeline is what the HTML template draws.
type timeline struct {
	Report     Report
	Summary    string
	PlotW      float64
	LabelW     float64
	Height     float64
	Ticks      []tick
	Rows       []row
	Links      []link
	MoreLinks  int
	Bands      []shape // faults
	Violations []shape // overlaps (filled), token order and duplicates (boxes)
	Holds      []shape
	Overruns   []shape // the part of a hold after the client should have stopped
	Marks      []shape // writes: stale accepted, lost, stale rejected
}

// WriteHTML writes a self-contained HTML page with the run's timeline:
// clients as lanes, holds as bars labelled with their tokens, faults as
// shaded bands, violations in red (expected ones in orange), and a header
// with the summary and verdict. Wide runs scroll sideways.
func WriteHTML(w io.Writer, run Run) error {
	return timelineTemplate.Execute(w, layout(run.checked()))
}

// frame maps times and rows onto the picture.
type frame struct {
	end      time.Duration
	plotW    float64
	lanesTop float64
}

func (f frame) x(d time.Duration) float64 { return float64(d) / float64(f.end) * f.plotW }
func (f frame) nodeY(n int) float64       { return axisH + float64(n)*nodeH }
func (f frame) laneY(c int) float64       { return f.lanesTop + float64(c)*laneH }

func layout(run Run) timeline {
	rep := New(run)
	var sum strings.Builder
	rep.WriteText(&sum)
	res, h := run.Result, run.History

	nodes, clients := rep.Nodes, run.Clients
	for _, f := range append(slices.Clone(res.Faults), res.FailedFaults...) {
		if f.Kind.ClientSide() {
			clients = max(clients, f.Client+1)
		} else {
			nodes = max(nodes, f.Node+1)
		}
	}
	for _, op := range h.Ops {
		if op.Kind != history.KindFault {
			clients = max(clients, op.Client+1)
		}
	}
	end := max(h.End, time.Millisecond)
	fr := frame{end: end, lanesTop: axisH + float64(nodes)*nodeH + sepH,
		plotW: min(maxPlotW, max(minPlotW, ms(end)*pxPerMs, medianHoldPx*float64(end)/float64(medianHold(res.Spans))))}
	t := timeline{Report: rep, Summary: sum.String(), PlotW: fr.plotW, LabelW: labelW,
		Height: fr.laneY(clients) + 4, Ticks: ticks(end, fr.x)}
	for n := range nodes {
		t.Rows = append(t.Rows, row{fr.nodeY(n) + nodeH - 4, fmt.Sprintf("node %d", n)})
	}
	for c := range clients {
		t.Rows = append(t.Rows, row{fr.laneY(c) + laneH/2 + 4, h.ClientName(c)})
	}
	t.Bands = faultShapes(fr, append(slices.Clone(res.Faults), res.FailedFaults...), float64(clients)*laneH)
	bad := t.addViolations(fr, h, res.Violations)
	for _, op := range h.Ops {
		if op.Kind == history.KindWrite && op.Outcome == history.Rejected {
			t.Marks = append(t.Marks, shape{X: fr.x(op.Invoke), Y: fr.laneY(op.Client) + laneH/2, Class: "mark rejected",
				Title: fmt.Sprintf("write %d with token %d rejected as stale at %s", op.ID, op.Token, at(op.Invoke))})
		}
	}
	t.Holds, t.Overruns = holdShapes(fr, h, res.Spans, bad)
	return t
}

// faultShapes draws node faults in their node's row and as a band over all
// lanes, and client faults as a band over their client's lane.
func faultShapes(fr frame, faults []checker.FaultSpan, lanesH float64) []shape {
	var bands []shape
	for _, f := range faults {
		w := max(fr.x(f.End)-fr.x(f.Start), 2)
		title := fmt.Sprintf("%s on %s, %s to %s", f.Kind, f.Target(), at(f.Start), at(f.End))
		if f.Open {
			title += " (never ended)"
		}
		class := faultClass(f.Kind)
		if f.Err != "" {
			title += " FAILED: " + f.Err
			class += " failed"
		}
		if f.Kind.ClientSide() {
			b := labelled(shape{X: fr.x(f.Start), Y: fr.laneY(f.Client), W: w, H: laneH,
				Class: "band " + class, Title: title, LabelClass: "bandlabel"}, string(f.Kind))
			b.LY = b.Y + 10 // at the top, drawn over the holds
			bands = append(bands, b)
			continue
		}
		bands = append(bands,
			labelled(shape{X: fr.x(f.Start), Y: fr.nodeY(f.Node), W: w, H: nodeH - 2,
				Class: "fault " + class, Title: title, LabelClass: "faultlabel"}, string(f.Kind)),
			shape{X: fr.x(f.Start), Y: fr.lanesTop, W: w, H: lanesH, Class: "band " + class, Title: title})
	}
	return bands
}

// addViolations draws each violation with an anchor, lists the first ones
// (unexpected first), and returns the class of each hold involved in one.
func (t *timeline) addViolations(fr frame, h history.History, vs []checker.Violation) map[int]string {
	bad := map[int]string{} // acquire op ID -> "bad" or "expected"
	for i, v := range vs {
		id, class := fmt.Sprintf("v%d", i+1), violationClass(v)
		switch v.Property {
		case checker.MutualExclusion, checker.FencingOrder, checker.DuplicateTokens, checker.ResurrectedHold:
			for _, op := range v.Ops {
				if bad[op] != "bad" {
					bad[op] = class
				}
			}
			kind := "vio "
			if v.Property != checker.MutualExclusion {
				kind = "box " // from the earlier acquire's return to the later one's
			}
			top := fr.laneY(min(v.Clients[0], v.Clients[1]))
			bottom := fr.laneY(max(v.Clients[0], v.Clients[1])) + laneH
			t.Violations = append(t.Violations, shape{ID: id, X: fr.x(v.Start), Y: top,
				W: max(fr.x(v.End)-fr.x(v.Start), 2), H: bottom - top, Class: kind + class, Title: v.Detail})
		case checker.LivenessStall: // the gap between successes, over every lane
			t.Violations = append(t.Violations, shape{ID: id, X: fr.x(v.Start), Y: fr.lanesTop,
				W: max(fr.x(v.End)-fr.x(v.Start), 2), H: t.Height - 4 - fr.lanesTop, Class: "box " + class, Title: v.Detail})
		case checker.SlowHandover: // the median handover, over the lanes of its releaser and its acquirer
			top := fr.laneY(min(v.Clients[0], v.Clients[1]))
			bottom := fr.laneY(max(v.Clients[0], v.Clients[1])) + laneH
			t.Violations = append(t.Violations, shape{ID: id, X: fr.x(v.Start), Y: top,
				W: max(fr.x(v.End)-fr.x(v.Start), 2), H: bottom - top, Class: "box " + class, Title: v.Detail})
		case checker.LivenessStarvation: // the wait, over the starved client's lane
			t.Violations = append(t.Violations, shape{ID: id, X: fr.x(v.Start), Y: fr.laneY(v.Clients[0]),
				W: max(fr.x(v.End)-fr.x(v.Start), 2), H: laneH, Class: "box " + class, Title: v.Detail})
		case checker.StaleWritesAccepted, checker.LostWrites:
			w := h.Ops[v.Ops[len(v.Ops)-1]-1]
			t.Marks = append(t.Marks, shape{ID: id, X: fr.x(w.Invoke), Y: fr.laneY(w.Client) + laneH/2,
				Class: "mark " + class, Title: v.Detail})
		}
		tag := "unexpected"
		if v.Expected {
			tag = "expected"
		}
		t.Links = append(t.Links, link{ID: id, Class: class,
			Text: fmt.Sprintf("%s %s at %s: %s", tag, v.Property, at(v.Start), v.Detail)})
	}
	slices.SortStableFunc(t.Links, func(a, b link) int { return cmp.Compare(a.Class, b.Class) }) // "bad" first
	if len(t.Links) > maxLinks {
		t.Links, t.MoreLinks = t.Links[:maxLinks], len(t.Links)-maxLinks
	}
	return bad
}

// holdShapes draws each hold as a bar labelled with its token (when it
// fits), with the part a write overran hatched.
func holdShapes(fr frame, h history.History, spans []checker.Span, bad map[int]string) (holds, overruns []shape) {
	for _, s := range spans {
		y := fr.laneY(s.Client) + (laneH-barH)/2
		class := "hold"
		if c, ok := bad[s.Acquire]; ok {
			class += " " + c
		}
		title := fmt.Sprintf("%s, token %d (hold %d, key %s)\n%s to %s, ended by %s",
			h.ClientName(s.Client), s.Token, s.Acquire, s.Key, at(s.Start), at(s.End), s.EndedBy)
		holds = append(holds, labelled(shape{X: fr.x(s.Start), Y: y, W: max(fr.x(s.Believed)-fr.x(s.Start), 1), H: barH,
			Class: class, Title: title}, fmt.Sprint(s.Token)))
		if s.Overrun {
			overruns = append(overruns, shape{X: fr.x(s.Believed), Y: y, W: max(fr.x(s.End)-fr.x(s.Believed), 1), H: barH,
				Class: "overrun", Title: title + ": wrote after it should have stopped"})
		}
	}
	return holds, overruns
}

// medianHold returns the median length of the holds (1ms when there are
// none, at least 1µs).
func medianHold(spans []checker.Span) time.Duration {
	if len(spans) == 0 {
		return time.Millisecond
	}
	ds := make([]time.Duration, len(spans))
	for i, s := range spans {
		ds[i] = s.End - s.Start
	}
	slices.Sort(ds)
	return max(ds[len(ds)/2], time.Microsecond)
}

// labelled sets s's label, near its bottom left, when it fits inside s.
func labelled(s shape, label string) shape {
	if float64(len(label))*charW+4 <= s.W {
		s.Label, s.LX, s.LY = label, s.X+3, s.Y+s.H-4
	}
	return s
}

// ticks returns axis ticks at a round step, at least 100 px apart.
func ticks(end time.Duration, x func(time.Duration) float64) []tick {
	minStep := float64(end) * 100 / x(end)
	step := time.Duration(math.Pow(10, math.Floor(math.Log10(minStep))))
	for _, m := range []time.Duration{1, 2, 5, 10} {
		if float64(step*m) >= minStep {
			step *= m
			break
		}
	}
	step = max(step, time.Microsecond)
	var ts []tick
	for d := time.Duration(0); d <= end; d += step {
		ts = append(ts, tick{x(d), at(d)})
	}
	return ts
}

func faultClass(k fault.Kind) string {
	switch {
	case k.ClientSide():
		return "client"
	case k.TakesNodeDown():
		return "down"
	case k == fault.Latency:
		return "slow"
	}
	return "skew"
}

func violationClass(v checker.Violation) string {
	if v.Expected {
		return "expected"
	}
	return "bad"
}

// at prints an offset of the run, e.g. "1.234s".
func at(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
