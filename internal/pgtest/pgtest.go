// Package pgtest starts throwaway PostgreSQL servers for tests: initdb into a
// fresh temporary directory, postgres on a free loopback port with its Unix
// socket in that directory, stopped and removed when the test ends. Without a
// PostgreSQL installation the test is skipped, or fails when CI=true.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

const (
	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
)

// Server is one running postgres. Its superuser is "postgres", with trust
// authentication on loopback only.
type Server struct {
	port int
	dir  string
	dbs  atomic.Int64 // names the databases NewDB creates
}

// Start runs initdb and starts postgres; both are removed at the end of the
// test. Durability is off (fsync=off): the data is for one test run only.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binDir()
	if err != nil {
		skipOrFatal(t, err.Error())
	}
	cred, err := credential()
	if err != nil {
		skipOrFatal(t, err.Error())
	}
	// Not t.TempDir: a Unix socket path must stay under ~100 bytes, and a
	// postgres run as another user must be able to reach the directory.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	s := &Server{dir: dir}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	initdb := command(ctx, cred, dir, filepath.Join(bin, "initdb"),
		"-D", s.dataDir(), "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--no-locale", "--no-sync", "--no-instructions")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v: %s", err, out)
	}

	// A free port can be taken by someone else between the probe and the
	// server's bind: retry a few times with a fresh port.
	for attempt := 1; ; attempt++ {
		if s.port, err = redisproc.FreePort(); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		var stop func()
		stop, err = s.run(ctx, cred, filepath.Join(bin, "postgres"))
		if err == nil {
			t.Cleanup(stop)
			return s
		}
		if attempt == 5 || !strings.Contains(err.Error(), "in use") {
			t.Fatalf("pgtest: %v", err)
		}
	}
}

// DSN is a connection URL for the database dbname, for the "pgx" driver.
func (s *Server) DSN(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the server's loopback TCP port.
func (s *Server) Port() int { return s.port }

// Open connects to the default database "postgres"; the handle is closed at
// the end of the test.
func (s *Server) Open(t testing.TB) *sql.DB {
	t.Helper()
	return s.open(t, "postgres")
}

// NewDB creates an empty database and connects to it, so that tests sharing a
// server do not see each other's tables.
func (s *Server) NewDB(t testing.TB) *sql.DB {
	t.Helper()
	name := fmt.Sprintf("test_%d", s.dbs.Add(1))
	admin := s.open(t, "postgres")
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	_ = admin.Close()
	return s.open(t, name)
}

func (s *Server) open(t testing.TB, dbname string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", s.DSN(dbname))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) logFile() string { return filepath.Join(s.dir, "postgres.log") }

// run starts postgres and waits until it accepts connections. stop shuts it
// down (fast shutdown, then SIGKILL) and waits until it is gone.
func (s *Server) run(ctx context.Context, cred *syscall.Credential, postgres string) (stop func(), err error) {
	logf, err := os.Create(s.logFile())
	if err != nil {
		return nil, fmt.Errorf("postgres log: %w", err)
	}
	defer logf.Close() // the child has its own copy
	// Not CommandContext: the server must outlive the ctx that started it.
	cmd := command(context.Background(), cred, s.dir, postgres,
		"-D", s.dataDir(), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=100", "-c", "shared_buffers=16MB")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-exited:
		case <-timer.C:
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	if err := s.waitReady(ctx, exited); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(pctx, s.DSN("postgres"))
		if err == nil {
			err = conn.Ping(pctx)
			_ = conn.Close(pctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("postgres on port %d exited at start: %s", s.port, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("postgres on port %d not ready: %w (last: %v): %s", s.port, ctx.Err(), err, s.logTail())
		case <-tick.C:
		}
	}
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logFile())
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

func command(ctx context.Context, cred *syscall.Credential, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// binDir finds the directory holding initdb and postgres: PATH first, then
// Debian's /usr/lib/postgresql/<version>/bin, newest version first.
func binDir() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(debian, func(a, b string) int { return version(b) - version(a) })
	for _, d := range append(dirs, debian...) {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", errors.New("pgtest: PostgreSQL is not installed: no initdb and postgres on PATH or in /usr/lib/postgresql/*/bin (Debian: apt-get install postgresql)")
}

// version is the major version in /usr/lib/postgresql/<version>/bin, or 0.
func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// credential is nil unless the test runs as root, which postgres refuses:
// then it is the "postgres" system user.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and postgres refuses root: need a %q system user to run it as: %v", "postgres", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func skipOrFatal(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: required)")
	}
	t.Skip(msg)
}
