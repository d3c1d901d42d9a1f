package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
)

func TestHTML(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  Run
	}{
		{"ok", sampleRun(false)},
		{"violated", sampleRun(true)},
		{"empty", Run{Result: checker.Check(history.History{}, checker.CheckOptions{})}},
		{"busy", busyRun(t, 5000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteHTML(&b, tc.run); err != nil {
				t.Fatal(err)
			}
			page := b.String()
			if !strings.Contains(page, `class="verdict `+string(tc.run.Result.Verdict)+`"`) {
				t.Errorf("no verdict %q in the header", tc.run.Result.Verdict)
			}
			// Self-contained: nothing fetched from anywhere.
			for _, bad := range []string{"http:", "https:", "src=", "<link", "@import", "url(http"} {
				if strings.Contains(page, bad) {
					t.Errorf("page contains %q", bad)
				}
			}
			_, plot, _ := strings.Cut(page, `<g id="z">`) // not the legend
			holds := regexp.MustCompile(`<rect class="hold k0[ "][^>]* data-l="[0-9]+"`).FindAllString(plot, -1)
			if len(holds) != len(tc.run.Result.Spans) {
				t.Errorf("%d hold bars with a token label for %d holds", len(holds), len(tc.run.Result.Spans))
			}
			bad := strings.Count(plot, `<rect class="hold k0 bad"`)
			if (tc.run.Result.Unexpected().MutualExclusion > 0) != (bad > 0) {
				t.Errorf("%d red holds with %+v", bad, tc.run.Result.Unexpected())
			}
		})
	}
}

func TestHTMLEscapes(t *testing.T) {
	h := history.History{Nodes: 1, End: time.Second, Ops: []history.Op{
		{ID: 1, Kind: history.KindAcquire, Key: `<script>alert(1)</script>`, Outcome: history.OK,
			Invoke: 0, Complete: time.Millisecond, Token: 1, ValidUntil: 500 * time.Millisecond},
	}}
	var b bytes.Buffer
	if err := WriteHTML(&b, Run{History: h, Result: checker.Check(h, checker.CheckOptions{})}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script>alert") {
		t.Error("a key reached the page unescaped")
	}
}

// A resurrected hold of one client alone (a re-create recorded on an
// extension that began past its validity) is drawn over that client's lane.
func TestHTMLRecreatePastValidity(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	h := history.History{Nodes: 3, End: time.Second, Ops: []history.Op{
		{ID: 1, Kind: history.KindAcquire, Client: 1, Key: "k", Outcome: history.OK, Invoke: 0, Complete: ms(1), Token: 1, ValidUntil: ms(500)},
		{ID: 2, Kind: history.KindExtend, Client: 1, Key: "k", Hold: 1, Outcome: history.OK, Token: 1, Invoke: ms(600), Complete: ms(601),
			ValidUntil: ms(1100), Reacquired: []int{2}},
	}}
	run := Run{Clients: 2, History: h, Result: checker.Check(h, checker.CheckOptions{})}
	if got := run.Result.Found.ResurrectedHolds; got != 1 {
		t.Fatalf("%d resurrected holds, want 1", got)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, run); err != nil {
		t.Fatal(err)
	}
	fr := newFrame(3, 1) // 3 node rows above the lanes, one key
	box := regexp.MustCompile(`<rect id="v1" class="box bad" x="[0-9.]+" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)"><title>hold 1 `)
	m := box.FindStringSubmatch(b.String())
	if m == nil {
		t.Fatal("no box for the resurrected hold in the page")
	}
	if m[1] != fmt.Sprintf("%.1f", fr.laneY(1)) || m[2] != fmt.Sprintf("%.1f", laneH) {
		t.Errorf("box at y %s, height %s; want client 1's lane, y %.1f, height %.1f", m[1], m[2], fr.laneY(1), laneH)
	}
}

// busyRun is a clean run with n holds spread over 4 clients.
// TestHTMLStarvation draws a starved client's wait over its own lane.
func TestHTMLStarvation(t *testing.T) {
	w := newWorkload(5)
	starved := w.clients[3].Acquire("job")
	for i := range 40 {
		w.turn(2 * (i % 2)) // clients 0 and 2, while client 3 waits
	}
	starved.Fail(errors.New("not acquired"))
	w.rec.Store("table", w.store)
	h := w.mem.History()
	run := Run{Clients: 4, Duration: h.End, History: h, Result: checker.Check(h, checker.CheckOptions{})}
	if got := run.Result.Found.Starvation; got != 1 {
		t.Fatalf("%d starved clients, want 1: %+v", got, run.Result.Starvation)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, run); err != nil {
		t.Fatal(err)
	}
	v := run.Result.Violations[0]
	box := regexp.MustCompile(`<rect id="v1" class="box bad" x="[0-9.]+" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)"><title>client 3 waited`)
	m := box.FindStringSubmatch(b.String())
	if m == nil {
		t.Fatalf("no box for the starvation %q in the page", v.Detail)
	}
	fr := newFrame(5, 1) // 5 node rows above the lanes, one key
	if m[1] != fmt.Sprintf("%.1f", fr.laneY(3)) || m[2] != fmt.Sprintf("%.1f", laneH) {
		t.Errorf("starvation box at y %s, height %s; want client 3's lane, y %.1f, height %.1f", m[1], m[2], fr.laneY(3), laneH)
	}
}

// TestHTMLHandover draws the median of slow handovers over the lanes of its
// releaser and its acquirer, and the text summary reports it.
func TestHTMLHandover(t *testing.T) {
	w := newWorkload(5)
	h := w.acquire(0)
	for i := range 20 {
		waiter := w.clients[(i+1)%2].Acquire("job")
		w.step(time.Millisecond)
		w.release(h, false)           // 0.5ms: a threshold of 2.5ms
		w.step(40 * time.Millisecond) // the waiter sleeps out its backoff
		w.token++
		h = waiter.Value(fmt.Sprintf("v%d", w.token)).OK(w.token, w.clk.Now().Add(time.Second))
	}
	w.release(h, false)
	w.rec.Store("table", w.store)
	hist := w.mem.History()
	run := Run{Clients: 2, Duration: hist.End, History: hist, Result: checker.Check(hist, checker.CheckOptions{})}
	if got := run.Result.Found; got.Handover != 1 || got.Total() != 1 {
		t.Fatalf("violations %+v, want one of handover: %+v", got, run.Result.Handover)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, run); err != nil {
		t.Fatal(err)
	}
	box := regexp.MustCompile(`<rect id="v1" class="box bad" x="[0-9.]+" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)"><title>keys went from a release`)
	m := box.FindStringSubmatch(b.String())
	if m == nil {
		t.Fatalf("no box for the slow handover %q in the page", run.Result.Violations[0].Detail)
	}
	fr := newFrame(5, 1)
	if m[1] != fmt.Sprintf("%.1f", fr.laneY(0)) || m[2] != fmt.Sprintf("%.1f", fr.laneY(1)+laneH-fr.laneY(0)) {
		t.Errorf("handover box at y %s, height %s; want over the lanes of clients 0 and 1", m[1], m[2])
	}
	b.Reset()
	if err := New(run).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := "handover: VIOLATED, median 40ms from a release to the next acquire over 20 handovers (threshold 2.5ms, on the median); slowest 40ms\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("text summary:\n%s\nwant the line %q", b.String(), want)
	}
}

func busyRun(t *testing.T, n int) Run {
	t.Helper()
	w := newWorkload(3)
	for i := range n {
		h := w.acquire(i % 4)
		w.write(h, false)
		w.release(h, false)
	}
	w.rec.Store("table", w.store)
	h := w.mem.History()
	return Run{Clients: 4, Duration: h.End, History: h, Result: checker.Check(h, checker.CheckOptions{})}
}

// TestScreenshot renders a timeline with a violation in a real browser and
// looks for the hold and violation colours in the picture.
func TestScreenshot(t *testing.T) {
	dir := t.TempDir()
	page, shot := filepath.Join(dir, "timeline.html"), filepath.Join(dir, "timeline.png")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, sampleRun(true)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	if err := Screenshot(ctx, page, shot); errors.Is(err, ErrNoBrowser) {
		testenv.SkipOrFail(t, "no chromium installed: scripts/deps.sh installs it (Debian: apt-get install chromium)")
	} else if err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	img, err := png.Decode(r)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1400 || b.Dy() != 900 {
		t.Errorf("screenshot is %v, want 1400x900", b)
	}
	for _, c := range []struct {
		name string
		rgb  color.RGBA
	}{
		{"hold blue", color.RGBA{0x25, 0x63, 0xeb, 0xff}},
		{"violation red", color.RGBA{0xdc, 0x26, 0x26, 0xff}},
		{"expected orange", color.RGBA{0xea, 0x58, 0x0c, 0xff}},
		{"node down grey", color.RGBA{0x4b, 0x55, 0x63, 0xff}},
	} {
		if n := count(img, c.rgb); n < 50 {
			t.Errorf("%s: %d pixels of %v, want at least 50", c.name, n, c.rgb)
		}
	}
}

// count returns how many pixels of img are close to c (the page draws some
// shapes translucent, and the browser antialiases edges).
func count(img image.Image, c color.RGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r>>8, c.R) && near(g>>8, c.G) && near(bl>>8, c.B) {
				n++
			}
		}
	}
	return n
}

func near(v uint32, want uint8) bool { return max(v, uint32(want))-min(v, uint32(want)) <= 24 }

// TestHTMLShowsAnInstantFailover: a promotion Sentinel made on its own is
// recorded as a failover that starts and ends at the moment it was heard
// (chaos.Run). The timeline's own shapes get a least width from the
// page's script; the overview strip's bands do not, and an SVG rect of
// width 0 is not rendered at all: the overview, where a reader looks for
// faults to zoom on, shows no failover there.
func TestHTMLShowsAnInstantFailover(t *testing.T) {
	w := newWorkload(5)
	for i := range 4 {
		w.turn(i % 4)
	}
	at := w.clk.Now()
	w.rec.NodeFaultAt(fault.Failover, 2, at, at, nil)
	for i := range 4 {
		w.turn(i % 4)
	}
	h := w.mem.History()
	run := Run{Clients: 4, Duration: h.End, Backend: "process", History: h, Result: checker.Check(h, checker.CheckOptions{})}
	var b bytes.Buffer
	if err := WriteHTML(&b, run); err != nil {
		t.Fatal(err)
	}
	rects := regexp.MustCompile(`<rect class="(oband)[^"]*"[^>]* width="([^"]*)"[^>]*><title>failover on node 2`).FindAllStringSubmatch(b.String(), -1)
	if len(rects) == 0 {
		t.Fatal("no overview band of the failover in the page")
	}
	for _, r := range rects {
		if r[2] == "0" || r[2] == "0.000" || strings.Trim(r[2], "0.") == "" {
			t.Errorf("the failover's %s shape has width %q: not drawn", r[1], r[2])
		}
	}
}
