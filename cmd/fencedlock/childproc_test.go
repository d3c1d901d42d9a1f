package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// helperMain is the child process:
//
//	env                    print FENCEDLOCK_TOKEN, FENCEDLOCK_KEY and FENCEDLOCK_HOLDER
//	exit N                 exit with status N
//	kill-self              die of SIGTERM
//	block FILE [stubborn]  write its pid to FILE, then sleep 30s (ignoring SIGTERM if stubborn)
//	fencedlock ARGS...     be fencedlock itself, a process of its own (to be killed, stopped, put on a terminal)
//	tree DIR [exit]        start DIR/child (in its process group) and DIR/daemon (double-forked into a
//	                       session of its own), write its pid to DIR/cmd, then block (or exit 0)
//	daemonize FILE         start `block FILE` in a new session, and exit once it runs
//	read-stdin FILE        write its pid to FILE, then read stdin
//	count-sigint FILE      write FILE.pid; count SIGINTs into FILE; on SIGTERM write FILE.final and exit
//	jobshell -- ARGV...    a shell with job control on its terminal (see jobShellMain)
//	stop-parent DIR [daemon|exit]  start DIR/daemon as daemonize does (if daemon), write its parent's
//	                       pid (the supervisor's) to DIR/sup, stop the parent with SIGSTOP, write its
//	                       pid to DIR/cmd, then exit (if exit) or append to DIR/out every 10ms for 30s
func helperMain(args []string) int {
	switch args[0] {
	case "env":
		fmt.Printf("token=%s\nkey=%s\nholder=%s\n", os.Getenv("FENCEDLOCK_TOKEN"), os.Getenv("FENCEDLOCK_KEY"), os.Getenv("FENCEDLOCK_HOLDER"))
		return 0
	case "exit":
		n, _ := strconv.Atoi(args[1])
		return n
	case "kill-self":
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		select {} // the signal ends the process
	case "block":
		if len(args) > 2 && args[2] == "stubborn" {
			signal.Ignore(syscall.SIGTERM)
		}
		if err := writePid(args[1]); err != nil {
			return fail(err)
		}
		time.Sleep(30 * time.Second) // the workload: the test expects it to be stopped long before
		return 0
	case "fencedlock":
		redis.SetLogger(quietLogger{})
		return realMain(context.Background(), args[1:], os.Stdout, os.Stderr)
	case "tree":
		return tree(args[1], len(args) > 2 && args[2] == "exit")
	case "daemonize":
		cmd := exec.Command(os.Args[0], helperArg, "block", args[1])
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return fail(err)
		}
		if err := waitFile(args[1]); err != nil {
			return fail(err)
		}
		return 0 // the daemon is orphaned: adopted by the nearest subreaper
	case "read-stdin":
		if err := writePid(args[1]); err != nil {
			return fail(err)
		}
		_, err := os.Stdin.Read(make([]byte, 1))
		return fail(fmt.Errorf("read stdin: %v", err))
	case "count-sigint":
		return countSIGINT(args[1])
	case "jobshell":
		return jobShellMain(args[2:])
	case "stop-parent":
		mode := ""
		if len(args) > 2 {
			mode = args[2]
		}
		return stopParent(args[1], mode)
	}
	return fail(fmt.Errorf("unknown mode %q", args[0]))
}

// tree starts a small process tree: a child in the command's process group,
// and a daemon that leaves the group and the session, as `setsid cmd &` or a
// double-forking daemon would.
func tree(dir string, exit bool) int {
	child := exec.Command(os.Args[0], helperArg, "block", filepath.Join(dir, "child"))
	if err := child.Start(); err != nil {
		return fail(err)
	}
	daemon := exec.Command(os.Args[0], helperArg, "daemonize", filepath.Join(dir, "daemon"))
	if err := daemon.Run(); err != nil {
		return fail(err)
	}
	if err := waitFile(filepath.Join(dir, "child")); err != nil {
		return fail(err)
	}
	if err := writePid(filepath.Join(dir, "cmd")); err != nil {
		return fail(err)
	}
	if exit {
		return 0 // without waiting for the child: it is left behind
	}
	time.Sleep(30 * time.Second)
	return 0
}

func countSIGINT(file string) int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	if err := writePid(file + ".pid"); err != nil {
		return fail(err)
	}
	n := 0
	for s := range sigs {
		if s == syscall.SIGTERM {
			if err := writeWhole(file+".final", strconv.Itoa(n)); err != nil {
				return fail(err)
			}
			return 0
		}
		n++
		if err := writeWhole(file, strconv.Itoa(n)); err != nil {
			return fail(err)
		}
	}
	return 1
}

// writePid writes the process's pid to file, whole: the test never reads
// half a pid.
func writePid(file string) error { return writeWhole(file, strconv.Itoa(os.Getpid())) }

func writeWhole(file, content string) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// waitFile waits until file exists (a helper's pid file), at most 10s.
func waitFile(file string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(file); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("timed out waiting for " + file)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readPid reads a pid file written by writePid, or 0.
func readPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func fail(err error) int {
	fmt.Fprintln(os.Stderr, "helper:", err)
	return 1
}

// stopParent stops the supervisor, as an operator's kill -STOP or a debugger
// attached to it would, and then writes on, as a command that the lock
// protects does: each write after the lock ended is one it should not make.
func stopParent(dir, mode string) int {
	if mode == "daemon" {
		d := exec.Command(os.Args[0], helperArg, "daemonize", filepath.Join(dir, "daemon"))
		if err := d.Run(); err != nil {
			return fail(err)
		}
	}
	sup := os.Getppid()
	if err := writeWhole(filepath.Join(dir, "sup"), strconv.Itoa(sup)); err != nil {
		return fail(err)
	}
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		return fail(err)
	}
	if err := writePid(filepath.Join(dir, "cmd")); err != nil {
		return fail(err)
	}
	if mode == "exit" {
		return 0
	}
	out, err := os.OpenFile(filepath.Join(dir, "out"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	for range 3000 { // the workload: 30s, far past any bound of the tests
		if _, err := out.WriteString("x"); err != nil {
			return fail(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 0
}
