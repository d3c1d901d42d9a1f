// Command fencedlock holds a lock on a majority of independent Redis nodes
// while a command runs (like flock(1), across machines), shows what the
// nodes hold for a key, runs chaos scenarios against local nodes, checks
// histories of lock operations recorded by any system, and checks nodes
// against what the lock's guarantees rest on.
//
//	fencedlock run    --nodes ADDRS --key KEY [flags] -- COMMAND [ARGS...]
//	fencedlock status --nodes ADDRS --key KEY [--json]
//	fencedlock chaos  [flags]
//	fencedlock check  [flags] FILE
//	fencedlock doctor --nodes ADDRS [--ttl D] [--replica-acks N] [--json]
//	fencedlock version
//
// Each command's --help lists its flags and exit statuses.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos"
)

// Exit statuses shared by the commands; `run` otherwise exits with the
// command's own status. The 6x and 7x values are from sysexits.h.
const (
	exitOK          = 0
	exitFailure     = 1   // fencedlock failed: no node answered, an unexpected error
	exitUsage       = 2   // bad usage
	exitUnavailable = 69  // EX_UNAVAILABLE: too few nodes answered to decide
	exitLockLost    = 70  // the lock was lost while the command ran
	exitTempFail    = 75  // EX_TEMPFAIL: the lock is held by someone else
	exitCannotExec  = 126 // the command was found but could not be started
	exitNotFound    = 127 // the command was not found
	exitInterrupted = 130 // chaos: stopped by SIGINT or SIGTERM before its duration (128 + SIGINT, as shells report it)
)

const mainUsage = `fencedlock — a lock on a majority of independent Redis nodes, with fencing tokens

Usage:
  fencedlock run    --nodes ADDRS --key KEY [flags] -- COMMAND [ARGS...]
  fencedlock status --nodes ADDRS --key KEY [--json]
  fencedlock chaos  [flags]
  fencedlock check  [flags] FILE
  fencedlock doctor --nodes ADDRS [--ttl D] [--replica-acks N] [--json]
  fencedlock version

Commands:
  run      hold the lock while COMMAND runs, like flock(1) across machines
  status   show what each node holds for a key, and whether a quorum holds it
  chaos    run a fault-injection scenario against local Redis nodes and report
  check    check a history of lock operations recorded by any system, and report
  doctor   check the nodes against what the lock's guarantees rest on
  version  print the version, and the revision it was built from

ADDRS is a comma-separated list of host:port or redis://[user:password@]host:port[/db];
a lock needs a majority of them. Without --nodes, run, status and doctor read
FENCEDLOCK_NODES; the password may come from --password-file or FENCEDLOCK_PASSWORD
(one inside a URL shows in ps). In chaos and check, --nodes is a count, not addresses.
Run 'fencedlock COMMAND --help' for a command's flags.
`

func main() {
	if isSupervisor() { // `run` starts this binary again as COMMAND's supervisor
		os.Exit(supervisorMain())
	}
	redis.SetLogger(quietLogger{})            // node failures are reported by the commands themselves
	if status, ok := chaos.ClientMain(); ok { // `chaos --client-procs` starts this binary again as its clients
		os.Exit(status)
	}
	os.Exit(realMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// realMain runs the command line args (without the program name) and
// returns the exit status.
func realMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, "fencedlock: no command given\nTry 'fencedlock --help'.\n")
		return exitUsage
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		return runWithLock(ctx, rest, stdout, stderr)
	case "status":
		return runStatus(ctx, rest, stdout, stderr)
	case "chaos":
		return runChaos(ctx, rest, stdout, stderr)
	case "check":
		return runCheck(ctx, rest, stdout, stderr)
	case "doctor":
		return runDoctor(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "fencedlock version: unexpected arguments: %s\nTry 'fencedlock --help'.\n", strings.Join(rest, " "))
			return exitUsage
		}
		bi, _ := debug.ReadBuildInfo()
		fmt.Fprint(stdout, versionText(bi))
		return exitOK
	case "help", "--help", "-help", "-h":
		if len(rest) > 0 && rest[0] != "help" && !strings.HasPrefix(rest[0], "-") {
			return realMain(ctx, []string{rest[0], "--help"}, stdout, stderr)
		}
		fmt.Fprint(stdout, mainUsage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "fencedlock: unknown command %q\nTry 'fencedlock --help'.\n", cmd)
		return exitUsage
	}
}

// versionText says which build this is: the module version and, when the
// binary was built from a version control checkout (go build and go install
// there, by default), the revision, its commit time and whether the tree had
// uncommitted changes. go run and go test leave that information out, and so
// does go build in a git worktree (where .git is a file, not a directory).
func versionText(bi *debug.BuildInfo) string {
	if bi == nil {
		return fmt.Sprintf("fencedlock (unknown version) %s\nno build information in this binary\n", runtime.Version())
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "fencedlock %s %s %s/%s\n", v, bi.GoVersion, runtime.GOOS, runtime.GOARCH)
	vcs := make(map[string]string)
	for _, s := range bi.Settings {
		vcs[s.Key] = s.Value
	}
	if vcs["vcs.revision"] == "" {
		b.WriteString("revision: unknown (built without version control information: by go run or go test, " +
			"with -buildvcs=false, or outside a checkout)\n")
		return b.String()
	}
	modified := ""
	if vcs["vcs.modified"] == "true" {
		modified = " (modified: built with uncommitted changes)"
	}
	fmt.Fprintf(&b, "revision: %s%s\n", vcs["vcs.revision"], modified)
	if t := vcs["vcs.time"]; t != "" {
		fmt.Fprintf(&b, "commit time: %s\n", t)
	}
	return b.String()
}

// command is what a subcommand needs to parse its flags and explain itself.
type command struct {
	fs     *flag.FlagSet
	header string // usage line and description, before the flags
	footer string // after the flags (exit statuses)
}

func newCommand(name, header, footer string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are printed by parse, with the usage
	fs.Usage = func() {}
	return &command{fs: fs, header: header, footer: footer}
}

// parse parses args. When it returns false the command ends with code:
// 0 after --help (usage on stdout), 2 on a bad flag (one line on stderr).
func (c *command) parse(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := c.fs.Parse(args)
	switch {
	case err == nil:
		return exitOK, true
	case errors.Is(err, flag.ErrHelp):
		c.usage(stdout)
		return exitOK, false
	}
	return c.fail(stderr, "%s", flagError(err)), false
}

// flagError rewords the flag package's errors with the flags spelled as
// the help spells them (--name).
func flagError(err error) string {
	msg := err.Error()
	for _, p := range []struct{ prefix, with string }{
		{"flag provided but not defined: -", "unknown flag --"},
		{"flag needs an argument: -", "missing value for --"},
	} {
		if rest, ok := strings.CutPrefix(msg, p.prefix); ok {
			return p.with + strings.TrimPrefix(rest, "-")
		}
	}
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok { // invalid value "v" for flag -name: why
		if i := strings.LastIndex(rest, " for flag -"); i >= 0 {
			value, name := rest[:i], rest[i+len(" for flag -"):]
			return "invalid value " + value + " for --" + name
		}
	}
	return msg
}

// fail prints a usage error, one line and a pointer to the help, and
// returns exitUsage. The help itself would push the line off the screen.
func (c *command) fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "fencedlock %s: %s\nTry 'fencedlock %s --help'.\n", c.fs.Name(), fmt.Sprintf(format, args...), c.fs.Name())
	return exitUsage
}

func (c *command) usage(w io.Writer) {
	fmt.Fprint(w, c.header)
	fmt.Fprintln(w, "\nFlags:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	c.fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if arg != "" {
			name += " " + arg
		}
		switch f.DefValue {
		case "", "false", "0", "0s":
		default:
			text += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, text)
	})
	_ = tw.Flush()
	if c.footer != "" {
		fmt.Fprint(w, "\n"+c.footer)
	}
}

// quietLogger silences go-redis's own logging of dial failures.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
