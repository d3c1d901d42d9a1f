package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"

	"github.com/fencedlock/fencedlock/chaos/checker"
)

// A comparison: the same workload and fault schedule run once per lock
// (chaos.Compare), tabled side by side.

// Comparison is the table of a comparison run, one row per lock, and its
// verdict, which is about fencedlock alone: the other locks' violations
// are what the comparison shows, not failures of the run.
type Comparison struct {
	Verdict checker.Verdict `json:"verdict"`
	Reason  string          `json:"reason"`
	Seed    int64           `json:"seed"`
	Rows    []Row           `json:"locks"`
}

// Row is one lock's run. A count that does not apply to the lock (the
// token properties of a lock with no token) is null in JSON, "n/a" in text.
type Row struct {
	Lock            string `json:"lock"`
	Token           bool   `json:"token"` // the lock gave fencing tokens (else its writes went unfenced)
	MutualExclusion int    `json:"mutual_exclusion"`
	FencingOrder    *int   `json:"fencing_order"`
	DuplicateTokens *int   `json:"duplicate_tokens"`
	// Unexpected counts those of the three above that no
	// assumption-breaking fault explains (stale writes and lost writes
	// never are).
	Unexpected          UnexpectedCounts `json:"unexpected"`
	StaleWritesAccepted int              `json:"stale_writes_accepted"` // stale writes that reached the store
	StaleWritesRejected int              `json:"stale_writes_rejected"`
	LostWrites          int              `json:"lost_writes"`
	Acquisitions        int              `json:"acquisitions"`
	AcquireFailures     int              `json:"acquire_failures"`
	Stalls              int              `json:"stalls"` // liveness violations: a key free and wanted too long with a quorum up
	LongestStallMs      float64          `json:"longest_stall_ms"`
	Verdict             checker.Verdict  `json:"verdict"`
	Reason              string           `json:"reason"`
	HTML                string           `json:"html,omitempty"` // the lock's timeline, when written
}

// UnexpectedCounts are a Row's violations that no assumption-breaking
// fault explains; null when not applicable.
type UnexpectedCounts struct {
	MutualExclusion int  `json:"mutual_exclusion"`
	FencingOrder    *int `json:"fencing_order"`
	DuplicateTokens *int `json:"duplicate_tokens"`
}

// Compare tables runs, one per lock (Run.Lock); fencedlock names the runs
// whose verdicts make the comparison's.
func Compare(runs []Run, fencedlock func(lock string) bool) Comparison {
	c := Comparison{Verdict: checker.VerdictOK}
	var judged []string
	for _, run := range runs {
		run = run.checked()
		res := run.Result
		row := Row{Lock: run.Lock, Token: res.Applicable(checker.FencingOrder),
			MutualExclusion:     res.Found.MutualExclusion,
			StaleWritesAccepted: res.Found.StaleWritesAccepted, StaleWritesRejected: res.StaleWritesRejected,
			LostWrites: res.Found.LostWrites, Acquisitions: res.Acquisitions, AcquireFailures: res.AcquireFailures,
			Stalls: res.Found.Liveness, LongestStallMs: ms(res.Liveness.LongestStall),
			Verdict: res.Verdict, Reason: res.Reason}
		u := res.Unexpected()
		row.Unexpected.MutualExclusion = u.MutualExclusion
		if row.Token {
			row.FencingOrder, row.DuplicateTokens = &res.Found.FencingOrder, &res.Found.DuplicateTokens
			row.Unexpected.FencingOrder, row.Unexpected.DuplicateTokens = &u.FencingOrder, &u.DuplicateTokens
		}
		c.Seed = run.Seed
		c.Rows = append(c.Rows, row)
		if !fencedlock(run.Lock) {
			continue
		}
		judged = append(judged, run.Lock)
		switch {
		case res.Verdict == checker.VerdictViolated:
			c.Verdict = checker.VerdictViolated
		case res.Verdict == checker.VerdictUnknown && c.Verdict == checker.VerdictOK:
			c.Verdict = checker.VerdictUnknown
		}
	}
	c.Reason = fmt.Sprintf("the verdicts of %s; the other locks' counts are shown, not judged",
		strings.Join(judged, " and "))
	if len(judged) == 0 {
		c.Verdict, c.Reason = checker.VerdictUnknown, "no fencedlock run to judge"
	}
	return c
}

// CompareReport is the JSON report of a comparison: the report of the
// first run (fencedlock's), whose fields up to Verdict keep their
// contract, with Verdict the comparison's; the comparison; and each lock's
// report.
type CompareReport struct {
	Report
	Comparison Comparison        `json:"comparison"`
	Runs       map[string]Report `json:"runs"`
}

// NewCompareReport builds the JSON report of runs (the first one
// fencedlock's) and their comparison c.
func NewCompareReport(runs []Run, c Comparison) CompareReport {
	r := CompareReport{Comparison: c, Runs: map[string]Report{}}
	for i, run := range runs {
		rep := New(run)
		if i == 0 {
			r.Report = rep
		}
		r.Runs[run.Lock] = rep
	}
	r.Verdict, r.Reason = c.Verdict, c.Reason
	return r
}

// WriteJSON writes r as indented JSON.
func (r CompareReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// header and cells are the table's columns, for text and HTML alike.
var header = []string{"lock", "token", "mutual excl.", "fencing order", "dup. tokens",
	"stale writes in store", "stale rejected", "lost writes", "acquisitions", "acq. failures", "stalls", "longest stall", "verdict"}

func (r Row) cells() []string {
	// A count, and how many of it no fault explains, when any.
	opt := func(n, unexpected *int) string {
		switch {
		case n == nil:
			return "n/a"
		case *unexpected > 0:
			return fmt.Sprintf("%d (%d unexp.)", *n, *unexpected)
		}
		return strconv.Itoa(*n)
	}
	token := "no"
	if r.Token {
		token = "yes"
	}
	return []string{r.Lock, token, opt(&r.MutualExclusion, &r.Unexpected.MutualExclusion),
		opt(r.FencingOrder, r.Unexpected.FencingOrder), opt(r.DuplicateTokens, r.Unexpected.DuplicateTokens),
		strconv.Itoa(r.StaleWritesAccepted), strconv.Itoa(r.StaleWritesRejected), strconv.Itoa(r.LostWrites),
		strconv.Itoa(r.Acquisitions), strconv.Itoa(r.AcquireFailures), strconv.Itoa(r.Stalls),
		msText(r.LongestStallMs), string(r.Verdict)}
}

// WriteText writes the table, aligned for a terminal (Markdown, so that
// it pastes into a README as it is), and the verdict.
func (c Comparison) WriteText(w io.Writer) error {
	rows := [][]string{header}
	for _, r := range c.Rows {
		rows = append(rows, r.cells())
	}
	width := make([]int, len(header))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], len(cell))
		}
	}
	var b strings.Builder
	for n, row := range rows {
		b.WriteString("|")
		for i, cell := range row {
			fmt.Fprintf(&b, " %-*s |", width[i], cell)
		}
		b.WriteString("\n")
		if n == 0 {
			b.WriteString("|")
			for i := range row {
				b.WriteString(strings.Repeat("-", width[i]+2) + "|")
			}
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "comparison verdict: %s (%s)\n", strings.ToUpper(string(c.Verdict)), c.Reason)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteIndexHTML writes a self-contained page with the table, each lock
// linked to its timeline (Row.HTML) when it has one.
func (c Comparison) WriteIndexHTML(w io.Writer) error {
	type cell struct{ Text, Link string }
	var rows [][]cell
	for _, r := range c.Rows {
		var cs []cell
		for i, t := range r.cells() {
			cs = append(cs, cell{Text: t})
			if i == 0 {
				cs[0].Link = r.HTML
			}
		}
		rows = append(rows, cs)
	}
	return indexTemplate.Execute(w, struct {
		C      Comparison
		Header []string
		Rows   [][]cell
	}{c, header, rows})
}

var indexTemplate = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fencedlock chaos: lock comparison</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.violated{color:#b00;font-weight:bold}.ok{color:#070}
</style></head><body>
<h1>Lock comparison</h1>
<p>The same workload and fault schedule (seed {{.C.Seed}}) run once per lock, each on fresh nodes.
Violations found, with those that no assumption-breaking fault explains in brackets.
Stale writes in store: writes of a former holder that reached the store (a lock with no fencing
token writes unfenced). Verdict: <span class="{{.C.Verdict}}">{{.C.Verdict}}</span> ({{.C.Reason}}).</p>
<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{if .Link}}<a href="{{.Link}}">{{.Text}}</a>{{else}}{{.Text}}{{end}}</td>{{end}}</tr>
{{end}}</table>
</body></html>
`))
