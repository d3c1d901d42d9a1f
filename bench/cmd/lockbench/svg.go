package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// The chart: one cumulative distribution of onekey waits per library, on a
// log-scale time axis, as a plain SVG written with fmt.

var libColor = map[string]string{
	"fencedlock":       "#1f77b4",
	"redsync":          "#d62728",
	"redsync-failfast": "#ff7f0e",
	"redislock":        "#2ca02c",
	"raw":              "#7f7f7f",
}

const (
	svgW, svgH           = 960, 460
	plotL, plotT         = 70, 60
	plotW, plotH         = 600, 330
	legendX              = plotL + plotW + 24
	minChartD            = 10 * time.Microsecond
	chartFontFamily      = "font-family=\"sans-serif\""
	axisColor, gridColor = "#333", "#ddd"
)

func (rep *Report) writeSVG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := rep.renderSVG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (rep *Report) renderSVG(w io.Writer) error {
	var series []*Result
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for _, r := range rep.Results {
		if r.Scenario != scOneKey || r.h == nil || r.h.n == 0 {
			continue
		}
		series = append(series, r)
		lo, hi = min(lo, r.h.min), max(hi, r.h.max)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" %s font-size="12">`+"\n",
		svgW, svgH, svgW, svgH, chartFontFamily)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", plotL,
		html.EscapeString(fmt.Sprintf("Wait from Lock() to acquired: %d goroutines on one key, each holding %s",
			rep.Settings.Waiters, rep.Settings.Hold)))
	fmt.Fprintf(&b, `<text x="%d" y="42" fill="#555">%s</text>`+"\n", plotL,
		html.EscapeString(fmt.Sprintf("cumulative share of acquisitions (y) that waited at most x; %s, %d cores, %s, %d nodes",
			rep.Machine.CPU, rep.Machine.Cores, rep.Machine.Redis, rep.Machine.Nodes)))
	if len(series) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no onekey results</text>`+"\n", plotL, plotT+plotH/2)
		b.WriteString("</svg>\n")
		_, err := io.WriteString(w, b.String())
		return err
	}

	// x axis: whole decades around the data, at least 10µs wide at the bottom.
	dlo := math.Floor(math.Log10(float64(max(lo, minChartD))))
	dhi := math.Ceil(math.Log10(float64(max(hi, 10*minChartD))))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	x := func(d time.Duration) float64 {
		v := math.Log10(float64(max(d, time.Duration(math.Pow(10, dlo)))))
		return plotL + (v-dlo)/(dhi-dlo)*plotW
	}
	y := func(f float64) float64 { return plotT + (1-f)*plotH }

	// grid and axes
	for e := dlo; e <= dhi; e++ {
		d := time.Duration(math.Pow(10, e))
		xv := x(d)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", xv, plotT, xv, plotT+plotH, gridColor)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xv, plotT+plotH+18, d)
		for m := 2; m < 10 && e < dhi; m++ {
			xm := x(time.Duration(float64(m) * math.Pow(10, e)))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>`+"\n", xm, plotT+plotH, xm, plotT+plotH+4, axisColor)
		}
	}
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 0.9, 1} {
		yv := y(f)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", plotL, yv, plotL+plotW, yv, gridColor)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n", plotL-6, yv+4, f)
	}
	// p99: too close to 1 for a label of its own on the left.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#999" stroke-dasharray="4 3"/>`+"\n",
		plotL, y(0.99), plotL+plotW, y(0.99))
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#777" font-size="10">p99</text>`+"\n", plotL+4, y(0.99)+11)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="%s"/>`+"\n", plotL, plotT, plotW, plotH, axisColor)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">wait (log scale)</text>`+"\n", plotL+plotW/2, plotT+plotH+40)

	// one step curve per library
	for i, r := range series {
		color := libColor[r.Library]
		if color == "" {
			color = "#000"
		}
		var pts strings.Builder
		prev := 0.0
		fmt.Fprintf(&pts, "%.1f,%.1f", x(r.h.min), y(0))
		for _, p := range r.h.cdf() {
			fmt.Fprintf(&pts, " %.1f,%.1f %.1f,%.1f", x(p.D), y(prev), x(p.D), y(p.F))
			prev = p.F
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, pts.String())

		ly := plotT + 10 + i*64
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`+"\n", legendX, ly, legendX+22, ly, color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", legendX+30, ly+4, html.EscapeString(r.Library))
		fmt.Fprintf(&b, `<text x="%d" y="%d">p50 %s  p99 %s  max %s</text>`+"\n", legendX+30, ly+20,
			fmtMs(r.P50Ms), fmtMs(r.P99Ms), fmtMs(r.MaxMs))
		fmt.Fprintf(&b, `<text x="%d" y="%d">%.0f acq/s, per goroutine %d–%d</text>`+"\n", legendX+30, ly+36,
			r.OpsPerSec, deref(r.PerGoroutineMin), deref(r.PerGoroutineMax))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
