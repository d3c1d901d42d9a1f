package report

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"image/png"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
)

// Environment of TestBrowser: where to write its screenshots (default: the
// test's temporary directory), and a recorded history (JSON Lines) to render
// instead of the sample run, e.g. for the README's picture:
//
//	FENCEDLOCK_REPORT_HISTORY=hunt.jsonl FENCEDLOCK_REPORT_SHOTS=docs go test -run TestBrowser ./chaos/report/
const (
	shotsEnv   = "FENCEDLOCK_REPORT_SHOTS"
	historyEnv = "FENCEDLOCK_REPORT_HISTORY"
)

// TestBrowser opens a report with faults and violations in headless
// Chromium and uses it as a person would: the page runs without script
// errors and opens on the whole run, the overview has a band per fault,
// a click on the overview zooms there, and a click on an incident brings
// its violation to the middle of the view.
func TestBrowser(t *testing.T) {
	bin := browser()
	if bin == "" {
		testenv.SkipOrFail(t, "no chromium installed: scripts/deps.sh test installs it (Debian: apt-get install chromium)")
	}
	run := sampleRun(true)
	if path := os.Getenv(historyEnv); path != "" {
		run = recordedRun(t, path)
	}
	if len(run.Result.Violations) == 0 || len(run.Result.Faults) == 0 {
		t.Fatalf("the run to render has %d violations and %d faults; want some of each",
			len(run.Result.Violations), len(run.Result.Faults))
	}
	shots := cmp.Or(os.Getenv(shotsEnv), t.TempDir())
	page := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(f, run); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	const width, height = 1400, 900
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	actx, acancel := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(width, height))...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	var mu sync.Mutex // protects errs
	var errs []string
	chromedp.ListenTarget(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			errs = append(errs, ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				errs = append(errs, fmt.Sprint("console.error ", ev.Args))
			}
		}
	})
	var bands, faults int
	var brushW, end float64
	err = chromedp.Run(bctx,
		chromedp.EmulateViewport(width, height),
		chromedp.Navigate((&url.URL{Scheme: "file", Path: filepath.ToSlash(page)}).String()),
		chromedp.WaitVisible("#plot", chromedp.ByID),
		chromedp.Evaluate(`document.querySelectorAll("#overview .oband").length`, &bands),
		chromedp.Evaluate(`parseFloat(document.querySelector("#overview .brush").getAttribute("width"))`, &brushW),
		chromedp.Evaluate(`parseFloat(document.getElementById("plot").getAttribute("data-end"))`, &end),
	)
	if err != nil {
		t.Fatal(err)
	}
	faults = len(run.Result.Faults) + len(run.Result.FailedFaults)
	if bands != faults {
		t.Errorf("the overview has %d fault bands, want one per fault: %d", bands, faults)
	}
	if math.Abs(brushW-end) > end/1000 {
		t.Errorf("the page opens on %.3fms of the run's %.3fms, want all of it", brushW, end)
	}
	fullShot(t, bctx, filepath.Join(shots, "page.png"))
	shot(t, bctx, "#timeline", filepath.Join(shots, "overview.png"))

	// A click in the middle of the overview: a tenth of the run, centred there.
	var mid float64
	err = chromedp.Run(bctx,
		chromedp.Evaluate(`(function(){var r=document.getElementById("overview").getBoundingClientRect();
			window.scrollTo(0, 0); return r.left + r.width/2;})()`, &mid),
		chromedp.ActionFunc(func(ctx context.Context) error {
			var y float64
			if err := chromedp.Evaluate(`(function(){var r=document.getElementById("overview").getBoundingClientRect(); return r.top + r.height/2;})()`, &y).Do(ctx); err != nil {
				return err
			}
			return chromedp.MouseClickXY(mid, y).Do(ctx)
		}),
		chromedp.Poll(fmt.Sprintf(`Math.abs(parseFloat(document.querySelector("#overview .brush").getAttribute("width")) - %f) < %f`, end/10, end/1000),
			nil, chromedp.WithPollingTimeout(5*time.Second)),
	)
	if err != nil {
		t.Errorf("a click on the overview did not zoom to a tenth of the run: %v", err)
	}
	// "+" halves the span in view, "0" shows the whole run again.
	for _, key := range []struct {
		key  string
		span float64
	}{{"+", end / 20}, {"0", end}} {
		err = chromedp.Run(bctx, chromedp.KeyEvent(key.key),
			chromedp.Poll(fmt.Sprintf(`Math.abs(parseFloat(document.querySelector("#overview .brush").getAttribute("width")) - %f) < %f`, key.span, end/1000),
				nil, chromedp.WithPollingTimeout(5*time.Second)))
		if err != nil {
			t.Errorf("key %q did not show %.3fms of the run: %v", key.key, key.span, err)
		}
	}

	// A click on the first incident centres its violation in the plot.
	var target string
	var inView struct{ X, Y, W, H, PlotL, PlotR, VH float64 }
	err = chromedp.Run(bctx,
		chromedp.AttributeValue("a.incident", "href", &target, nil, chromedp.ByQuery),
		chromedp.Click("a.incident", chromedp.ByQuery),
		chromedp.Poll(`(function(){var a=document.querySelector("a.incident"), el=document.querySelector(a.getAttribute("href"));
			var b=el.getBoundingClientRect(), p=document.querySelector(".plot").getBoundingClientRect(), c=b.left+b.width/2;
			return b.top >= 0 && b.bottom <= window.innerHeight && Math.abs(c-(p.left+p.width/2)) < p.width/4;})()`,
			nil, chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.Evaluate(`(function(){var el=document.querySelector(document.querySelector("a.incident").getAttribute("href"));
			var b=el.getBoundingClientRect(), p=document.querySelector(".plot").getBoundingClientRect();
			return {X:b.left, Y:b.top, W:b.width, H:b.height, PlotL:p.left, PlotR:p.right, VH:window.innerHeight};})()`, &inView),
	)
	if err != nil {
		t.Errorf("the violation %s of the first incident is not in the middle of the view after its click: %v (box %+v)", target, err, inView)
	}
	shot(t, bctx, "#timeline", filepath.Join(shots, "violation.png"))
	mu.Lock()
	defer mu.Unlock()
	for _, e := range errs {
		t.Errorf("script error on the page: %s", e)
	}
	t.Logf("screenshots in %s (violation %s at x %.0f-%.0f of the plot's %.0f-%.0f)",
		shots, target, inView.X, inView.X+inView.W, inView.PlotL, inView.PlotR)
}

// browser returns the path of the first browser Screenshot would use, or "".
func browser() string {
	for _, name := range browsers {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// writePNG writes a screenshot, compressed harder than the browser does.
func writePNG(t *testing.T, path string, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&out, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shot writes a PNG of the element sel.
func shot(t *testing.T, ctx context.Context, sel, path string) {
	t.Helper()
	var shot []byte
	if err := chromedp.Run(ctx, chromedp.Screenshot(sel, &shot, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	writePNG(t, path, shot)
}

// fullShot writes a PNG of the viewport.
func fullShot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	var shot []byte
	if err := chromedp.Run(ctx, chromedp.CaptureScreenshot(&shot)); err != nil {
		t.Fatal(err)
	}
	writePNG(t, path, shot)
}

// recordedRun reads a history and checks it.
func recordedRun(t *testing.T, path string) Run {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := history.ReadJSONL(f)
	if err != nil {
		t.Fatal(err)
	}
	clients := 0
	for _, op := range h.Ops {
		if op.Kind != history.KindFault {
			clients = max(clients, op.Client+1)
		}
	}
	return Run{Clients: clients, Duration: h.End, History: h, Result: checker.Check(h, checker.CheckOptions{})}
}
