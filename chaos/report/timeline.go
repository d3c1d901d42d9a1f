package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

//go:embed timeline.html
var timelineHTML string

//go:embed timeline.css
var timelineCSS string

//go:embed timeline.js
var timelineJS string

var timelineTemplate = template.Must(template.New("timeline").Funcs(template.FuncMap{
	"px": func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"ms": func(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) },
}).Parse(timelineHTML))

// Layout of the timeline, in CSS pixels. Times are drawn in milliseconds:
// the page's script maps them onto the window's width, for the span in view.
const (
	axisH    = 26.0               // the time axis at the top
	nodeH    = 16.0               // one row per node, for its faults
	bandTop  = 11.0               // the top of a client lane, for the label of a client fault
	barH     = 18.0               // a hold inside a lane
	laneH    = bandTop + barH + 3 // one lane per client
	keyBarH  = 14.0               // a hold inside a lane of several keys: one row per key, room for a label
	sepH     = 10.0               // between node rows, client lanes and charts
	chartH   = 56.0               // one chart over time
	labelW   = 150.0
	overH    = 44.0 // the overview strip
	maxLinks = 20   // incidents listed above the chart
	// fitW is the width the charts' buckets are sized for, about a window's;
	// a bucket is at least barPx of it.
	fitW  = 1200.0
	barPx = 8.0
	minPx = 2.0 // the narrowest fault band of the overview, as the timeline draws them
)

// shape is a rectangle (or, for marks, a circle at X, Y) of the timeline,
// with a tooltip. X and W are in milliseconds, Y and H in pixels.
type shape struct {
	ID         string
	X, Y, W, H float64
	Class      string
	Title      string
	Label      string // drawn by the script when the shape is wide enough
}

type row struct {
	Y     float64
	Label string
	Class string
}

// link points from the list above the chart to an incident's first
// violation, and to the span the incident covers.
type link struct {
	ID, Class, Text string
	Reason, Title   string
	T0, T1, C       float64 // ms: the incident's span, and its first violation's middle
}

// keyInfo is a lock key and its colour class.
type keyInfo struct {
	Name, Class, Letter string
	index               int // in the sorted keys
}

// timeline is what the HTML template draws.
type timeline struct {
	Report     Report
	Summary    string
	Verdict    string
	EndMs      float64
	LabelW     float64
	Height     float64
	OverH      float64
	Rows       []row
	Stripes    []row // every other client lane, shaded
	LaneH      float64
	Keys       []keyInfo
	Links      []link
	MoreLinks  int
	Bands      []shape // faults
	Violations []shape // overlaps (filled), token order and duplicates (boxes)
	Holds      []shape
	Overruns   []shape // the part of a hold after the client should have stopped
	Marks      []shape // writes: stale accepted, lost, stale rejected
	Charts     []shape // acquisitions per second, latency p50 and p99
	OverBands  []shape // the overview: one band per fault...
	OverMarks  []shape // ...and a mark per violation
	CSS        template.CSS
	JS         template.JS
}

// WriteHTML writes a self-contained HTML page (inline CSS, script and SVG)
// with the run's timeline: an overview strip of the whole run, where a
// click or a drag picks the span the detailed timeline shows; clients as
// lanes, holds as bars coloured by key and labelled with their tokens,
// faults as shaded bands, violations in red (expected ones in orange);
// charts of acquisitions per second and acquire latency; and a header with
// the summary, the verdict and the violations grouped by incident.
func WriteHTML(w io.Writer, run Run) error {
	return timelineTemplate.Execute(w, layout(run.checked()))
}

// frame maps times and rows onto the picture.
type frame struct {
	lanesTop float64
	laneH    float64 // laneH, or more for a row per key
	keys     int     // lock keys: with more than one, each has its row in a lane
}

// newFrame returns the frame of a picture with nodes node rows and holds
// on keys lock keys.
func newFrame(nodes, keys int) frame {
	f := frame{lanesTop: axisH + float64(nodes)*nodeH + sepH, laneH: laneH, keys: keys}
	if keys > 1 {
		f.laneH = bandTop + float64(keys)*(keyBarH+2) + 1
	}
	return f
}

// holdY returns the top and height of a hold of client c on the key of
// index k.
func (f frame) holdY(c, k int) (y, h float64) {
	if f.keys <= 1 {
		return f.laneY(c) + bandTop, barH
	}
	return f.laneY(c) + bandTop + float64(k)*(keyBarH+2), keyBarH
}

func (f frame) x(d time.Duration) float64 { return ms(d) }
func (f frame) nodeY(n int) float64       { return axisH + float64(n)*nodeH }
func (f frame) laneY(c int) float64       { return f.lanesTop + float64(c)*f.laneH }

func layout(run Run) timeline {
	rep := New(run)
	var sum strings.Builder
	rep.WriteText(&sum)
	verdict, _, _ := strings.Cut(sum.String(), "\n")
	res, h := run.Result, run.History

	nodes, clients := rep.Nodes, run.Clients
	faults := append(slices.Clone(res.Faults), res.FailedFaults...)
	for _, f := range faults {
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
	keys := keyClasses(res.Spans)
	fr := newFrame(nodes, len(keys))
	chartsTop := fr.laneY(clients) + sepH
	t := timeline{Report: rep, Summary: sum.String(), Verdict: verdict, EndMs: ms(end), LabelW: labelW,
		Height: chartsTop + 2*chartH + sepH, OverH: overH, CSS: template.CSS(timelineCSS), JS: template.JS(timelineJS)}
	for n := range nodes {
		t.Rows = append(t.Rows, row{Y: fr.nodeY(n) + nodeH - 4, Label: fmt.Sprintf("node %d", n)})
	}
	for c := range clients {
		t.Rows = append(t.Rows, row{Y: fr.laneY(c) + fr.laneH/2 + 4, Label: h.ClientName(c)})
		if c%2 == 1 {
			t.Stripes = append(t.Stripes, row{Y: fr.laneY(c)})
		}
	}
	t.LaneH = fr.laneH
	t.Bands = faultShapes(fr, faults, chartsTop+2*chartH-fr.lanesTop)
	bad := t.addViolations(fr, h, res.Violations, rep.Incidents)
	for _, op := range h.Ops {
		if op.Kind == history.KindWrite && op.Outcome == history.Rejected {
			t.Marks = append(t.Marks, shape{X: fr.x(op.Invoke), Y: fr.laneY(op.Client) + fr.laneH/2, Class: "mark rejected",
				Title: fmt.Sprintf("write %d with token %d rejected as stale at %s", op.ID, op.Token, at(op.Invoke))})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		t.Keys = append(t.Keys, keys[k])
	}
	t.Holds, t.Overruns = holdShapes(fr, h, res.Spans, bad, keys)
	t.addCharts(h, end, chartsTop)
	t.addOverview(faults, res.Violations, end)
	return t
}

// keyClasses gives each lock key of spans a colour class and, when there
// are several keys, a letter that prefixes its tokens.
func keyClasses(spans []checker.Span) map[string]keyInfo {
	keys := map[string]keyInfo{}
	for _, s := range spans {
		keys[s.Key] = keyInfo{}
	}
	for i, k := range slices.Sorted(maps.Keys(keys)) {
		ki := keyInfo{Name: k, Class: fmt.Sprintf("k%d", i%keyColours), index: i}
		if len(keys) > 1 {
			ki.Letter = string(rune('A' + i%26))
		}
		keys[k] = ki
	}
	return keys
}

// keyColours is how many key colours the stylesheet has (.k0 to .k5).
const keyColours = 6

// faultShapes draws node faults in their node's row and as a band over all
// lanes, and client faults as a band over their client's lane.
func faultShapes(fr frame, faults []checker.FaultSpan, lanesH float64) []shape {
	var bands []shape
	for _, f := range faults {
		w := fr.x(f.End) - fr.x(f.Start)
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
			bands = append(bands, shape{X: fr.x(f.Start), Y: fr.laneY(f.Client), W: w, H: fr.laneH,
				Class: "band " + class, Title: title, Label: string(f.Kind)})
			continue
		}
		bands = append(bands,
			shape{X: fr.x(f.Start), Y: fr.nodeY(f.Node), W: w, H: nodeH - 2,
				Class: "fault " + class, Title: title, Label: string(f.Kind)},
			shape{X: fr.x(f.Start), Y: fr.lanesTop, W: w, H: lanesH, Class: "band " + class, Title: title})
	}
	return bands
}

// addViolations draws each violation with an anchor, lists the incidents
// (unexpected first), and returns the class of each hold involved in one.
func (t *timeline) addViolations(fr frame, h history.History, vs []checker.Violation, ins []Incident) map[int]string {
	bad := map[int]string{} // acquire op ID -> "bad" or "expected"
	width := func(v checker.Violation) float64 { return fr.x(v.End) - fr.x(v.Start) }
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
			// A re-create past validity (resurrected_hold) names its own client alone.
			top := fr.laneY(slices.Min(v.Clients))
			bottom := fr.laneY(slices.Max(v.Clients)) + fr.laneH
			t.Violations = append(t.Violations, shape{ID: id, X: fr.x(v.Start), Y: top,
				W: width(v), H: bottom - top, Class: kind + class, Title: v.Detail})
		case checker.LivenessStall: // the gap between successes, over every lane
			t.Violations = append(t.Violations, shape{ID: id, X: fr.x(v.Start), Y: fr.lanesTop,
				W: width(v), H: t.Height - 2*chartH - 2*sepH - fr.lanesTop, Class: "box " + class, Title: v.Detail})
		case checker.SlowHandover: // the median handover, over the lanes of its releaser and its acquirer
			top := fr.laneY(min(v.Clients[0], v.Clients[1]))
			bottom := fr.laneY(max(v.Clients[0], v.Clients[1])) + fr.laneH
			t.Violations = append(t.Violations, shape{ID: id, X: fr.x(v.Start), Y: top,
				W: width(v), H: bottom - top, Class: "box " + class, Title: v.Detail})
		case checker.LivenessStarvation: // the wait, over the starved client's lane
			t.Violations = append(t.Violations, shape{ID: id, X: fr.x(v.Start), Y: fr.laneY(v.Clients[0]),
				W: width(v), H: fr.laneH, Class: "box " + class, Title: v.Detail})
		case checker.StaleWritesAccepted, checker.LostWrites:
			w := h.Ops[v.Ops[len(v.Ops)-1]-1]
			t.Marks = append(t.Marks, shape{ID: id, X: fr.x(w.Invoke), Y: fr.laneY(w.Client) + fr.laneH/2,
				Class: "mark " + class, Title: v.Detail})
		}
	}
	// Each link goes to its violation's shape: a mark is a moment.
	span := map[string][2]float64{}
	for _, v := range t.Violations {
		span[v.ID] = [2]float64{v.X, v.X + v.W}
	}
	for _, m := range t.Marks {
		if m.ID != "" {
			span[m.ID] = [2]float64{m.X, m.X}
		}
	}
	for _, in := range ins {
		tag, class := "unexpected", "bad"
		if in.Expected {
			tag, class = "expected", "expected"
		}
		n := ""
		if in.Violations > 1 {
			n = fmt.Sprintf(" \u00d7%d", in.Violations)
		}
		id := fmt.Sprintf("v%d", in.first+1)
		t0, t1, c := in.StartMs, in.EndMs, (in.StartMs+in.EndMs)/2
		if sp, ok := span[id]; ok {
			c = (sp[0] + sp[1]) / 2
			if in.Violations == 1 {
				t0, t1 = sp[0], sp[1]
			}
		}
		t.Links = append(t.Links, link{ID: id, Class: class, T0: t0, T1: t1, C: c,
			Text: fmt.Sprintf("%s %s%s at %s", tag, in.Property, n, msText(in.StartMs)), Reason: in.Reason, Title: in.Detail})
	}
	if len(t.Links) > maxLinks {
		t.Links, t.MoreLinks = t.Links[:maxLinks], len(t.Links)-maxLinks
	}
	return bad
}

// holdShapes draws each hold as a bar in its key's colour, labelled with
// its token (the key's letter first when there are several keys), with the
// part a write overran hatched.
func holdShapes(fr frame, h history.History, spans []checker.Span, bad map[int]string, keys map[string]keyInfo) (holds, overruns []shape) {
	for _, s := range spans {
		k := keys[s.Key]
		y, bh := fr.holdY(s.Client, k.index)
		class := "hold " + k.Class
		if c, ok := bad[s.Acquire]; ok {
			class += " " + c
		}
		title := fmt.Sprintf("%s, key %s, token %d (hold %d)\n%s to %s, ended by %s",
			h.ClientName(s.Client), s.Key, s.Token, s.Acquire, at(s.Start), at(s.End), s.EndedBy)
		holds = append(holds, shape{X: fr.x(s.Start), Y: y, W: fr.x(s.Believed) - fr.x(s.Start), H: bh,
			Class: class, Title: title, Label: fmt.Sprint(k.Letter, s.Token)})
		if s.Overrun {
			overruns = append(overruns, shape{X: fr.x(s.Believed), Y: y, W: fr.x(s.End) - fr.x(s.Believed), H: bh,
				Class: "overrun", Title: title + ": wrote after it should have stopped"})
		}
	}
	return holds, overruns
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
