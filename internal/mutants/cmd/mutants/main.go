// Command mutants runs the mutation campaign: for each planted bug of
// package mutants, it builds the fencedlock CLI from a copy of the module
// with the bug in it, runs `fencedlock chaos --stop-on-violation` against
// it, and prints killed (with the first violation as evidence) or survived,
// then the score. It first runs the module as it is, which must come out
// clean: otherwise every mutant would look killed.
//
//	go run ./internal/mutants/cmd/mutants [-faults hunt] [-seed 1] [-duration 60s]
//	                                     [-only a,b] [-target 0.9] [-markdown]
//
// Exit status: 0 when the score reaches -target, 1 when it does not, 2 on
// bad usage or when a run could not be carried out.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/internal/mutants"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c mutants.Chaos
	fs.StringVar(&c.Faults, "faults", "hunt", "the --faults of each chaos run")
	fs.Uint64Var(&c.Seed, "seed", 1, "the --seed of each chaos run")
	fs.DurationVar(&c.Duration, "duration", 60*time.Second, "the longest chaos run per mutant (a run stops at the first violation)")
	only := fs.String("only", "", "run only these mutants (comma-separated names)")
	target := fs.Float64("target", 0.9, "the share of mutants that must be killed for exit status 0")
	baseline := fs.Bool("baseline", true, "first run the module as it is, which must come out clean")
	markdown := fs.Bool("markdown", false, "print the table as Markdown")
	list := fs.Bool("list", false, "list the mutants and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ms := mutants.List()
	if *only != "" {
		var picked []mutants.Mutant
		for _, n := range strings.Split(*only, ",") {
			m, ok := mutants.Find(strings.TrimSpace(n))
			if !ok {
				fmt.Fprintf(stderr, "mutants: no mutant %q\n", n)
				return 2
			}
			picked = append(picked, m)
		}
		ms = picked
	}
	if *list {
		for _, m := range ms {
			fmt.Fprintf(stdout, "%-28s %s: %s\n", m.Name, m.File, m.Description)
		}
		return 0
	}
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "fencedlock-mutants-")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer os.RemoveAll(tmp)

	fmt.Fprintf(stderr, "mutants: %d mutants, chaos --faults %s --seed %d, at most %v each\n",
		len(ms), c.Faults, c.Seed, c.Duration)
	if *baseline {
		// The module as it is, under the campaign's run, under the quiet
		// one if a mutant runs quiet, and under the lock of a mutant that
		// names one: each must come out clean.
		originals := []mutants.Mutant{{}}
		if slices.ContainsFunc(ms, func(m mutants.Mutant) bool { return m.Quiet }) {
			originals = append(originals, mutants.Mutant{Quiet: true})
		}
		// And under each lock a mutant runs with.
		var locks []string
		for _, m := range ms {
			if m.Lock != "" && !slices.Contains(locks, m.Lock) {
				locks = append(locks, m.Lock)
				originals = append(originals, mutants.Mutant{Lock: m.Lock})
			}
		}
		for _, o := range originals {
			label := "original"
			switch {
			case o.Quiet:
				label = "original (quiet)"
			case o.Lock != "":
				label = "original (" + o.Lock + ")"
			}
			r, err := mutants.Run(ctx, root, tmp, o, c)
			if err != nil {
				fmt.Fprintln(stderr, err)
				return 2
			}
			fmt.Fprintf(stderr, "%s: %s in %v (%s)\n", label, r.Outcome, r.Elapsed.Round(time.Second), r.Evidence)
			if r.Outcome != mutants.Survived {
				fmt.Fprintln(stderr, "mutants: the module as it is does not come out clean: no mutant can be judged")
				return 2
			}
		}
	}
	var results []mutants.Result
	for _, m := range ms {
		r, err := mutants.Run(ctx, root, tmp, m, c)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		fmt.Fprintf(stderr, "%s: %s in %v\n", m.Name, r.Outcome, r.Elapsed.Round(100*time.Millisecond))
		results = append(results, r)
	}
	if *markdown {
		writeMarkdown(stdout, results)
	} else {
		writeTable(stdout, results)
	}
	killed := 0
	for _, r := range results {
		if r.Outcome == mutants.Killed {
			killed++
		}
	}
	score := float64(killed) / float64(max(len(results), 1))
	fmt.Fprintf(stdout, "score: %d of %d killed (%.0f%%), target %.0f%%\n", killed, len(results), 100*score, 100**target)
	if score < *target {
		return 1
	}
	return 0
}

func writeTable(w io.Writer, rs []mutants.Result) {
	for _, r := range rs {
		fmt.Fprintf(w, "%-28s %-8s %7s  %s\n", r.Mutant.Name, r.Outcome, when(r), oneLine(r.Evidence))
	}
}

func writeMarkdown(w io.Writer, rs []mutants.Result) {
	fmt.Fprintln(w, "| mutant | planted bug | result | killed after | evidence |")
	fmt.Fprintln(w, "|---|---|---|---:|---|")
	for _, r := range rs {
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s |\n", r.Mutant.Name, r.Mutant.Description, r.Outcome, when(r),
			strings.ReplaceAll(oneLine(r.Evidence), "|", `\|`))
	}
}

// when is how far into the run the mutant was killed, or "-".
func when(r mutants.Result) string {
	if r.Outcome != mutants.Killed {
		return "-"
	}
	return fmt.Sprintf("%.1fs", r.KilledAt.Seconds())
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:157]) + "..."
	}
	return s
}
