package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/chaos/report"
)

// runCompare is `fencedlock chaos --lock all`: cfg once per lock, the
// comparison table on stdout (after each run's summary), the JSON report
// with the comparison, a timeline per lock beside htmlPath and the table
// linking them at htmlPath. Its status is the comparison's verdict, which
// is fencedlock's.
func runCompare(ctx context.Context, cmd *command, cfg chaos.Config, jsonPath, htmlPath string, stdout, stderr io.Writer) int {
	runs, err := chaos.Compare(ctx, cfg, nil, func(run report.Run, err error) {
		if run.History.Ops == nil {
			return
		}
		fmt.Fprintf(stdout, "== lock %s\n", run.Lock)
		_ = report.New(run).WriteText(stdout)
		fmt.Fprintln(stdout)
	})
	switch {
	case errors.Is(err, chaos.ErrConfig):
		return cmd.fail(stderr, "%v", err)
	case err != nil:
		// Faults that could not be injected leave a run's verdict unknown,
		// as the table shows; a run that could not be carried out is missing.
		fmt.Fprintf(stderr, "fencedlock chaos: %v\n", err)
	}
	if len(runs) == 0 {
		return 3
	}
	cmp := report.Compare(runs, chaos.IsFencedlock)
	if htmlPath != "" {
		for i, run := range runs {
			path := lockPath(htmlPath, run.Lock)
			if err := writeFile(path, func(w io.Writer) error { return report.WriteHTML(w, run) }); err != nil {
				fmt.Fprintf(stderr, "fencedlock chaos: %v\n", err)
				return 3
			}
			cmp.Rows[i].HTML = filepath.Base(path)
			fmt.Fprintf(stderr, "wrote %s\n", path)
		}
		if err := writeFile(htmlPath, cmp.WriteIndexHTML); err != nil {
			fmt.Fprintf(stderr, "fencedlock chaos: %v\n", err)
			return 3
		}
		fmt.Fprintf(stderr, "wrote %s\n", htmlPath)
	}
	if err := cmp.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "fencedlock chaos: %v\n", err)
		return 3
	}
	if jsonPath != "" {
		if err := writeFile(jsonPath, report.NewCompareReport(runs, cmp).WriteJSON); err != nil {
			fmt.Fprintf(stderr, "fencedlock chaos: %v\n", err)
			return 3
		}
		fmt.Fprintf(stderr, "wrote %s\n", jsonPath)
	}
	return verdictStatus(cmp.Verdict)
}

// lockPath is the path of lock's timeline beside the index at path:
// dir/report.html gives dir/report-LOCK.html.
func lockPath(path, lock string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + "-" + lock + ext
}
