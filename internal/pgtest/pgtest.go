// Package pgtest gives tests a real PostgreSQL database: one throwaway server per test binary,
// started by scripts/postgres.sh on first use, and a fresh database (CREATE DATABASE) per test.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		db := pgtest.New(t) // *dbutil.Database on an empty database, closed and dropped at cleanup
//	}
//
// When PostgreSQL cannot start, every test that asks for it fails: scripts/test.sh installs it
// (Debian's postgresql package), and scripts/postgres.sh installs it when run as root.
//
// With HOOKROOM_PGTEST_SERVER set to a server's URL (user postgres, database postgres, allowed
// to CREATE DATABASE), the test binary starts no server of its own and creates its databases
// there; names carry the test binary's pid, so any number of test binaries share one server.
// scripts/test.sh starts one for the whole run: twenty servers started and stopped cost more
// than the tests that use them.
// Of hookroom it imports only internal/testkit (which imports only the standard library), so
// any package's tests may use it.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/lib/pq" // the PostgreSQL driver, registered as "postgres"
	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/internal/testkit"
)

// Runner is what TestMain runs: *testing.M, or what Wrap returns.
type Runner interface{ Run() int }

var shared struct {
	sync.Mutex
	inMain bool
	dir    string
	url    string // the server's URL, database "postgres"
	admin  *sql.DB
	err    error
}

var seq atomic.Int64

// Main runs the package's tests, stops the package's PostgreSQL server and exits with the
// tests' status.
func Main(m *testing.M) { os.Exit(Wrap(m).Run()) }

// Wrap returns a Runner that runs m and then stops the server, for a TestMain that hands its
// *testing.M to another helper, e.g. hstest.Main(pgtest.Wrap(m)).
func Wrap(m Runner) Runner { return wrapped{m} }

type wrapped struct{ m Runner }

func (w wrapped) Run() int {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()
	code := w.m.Run()
	shared.Lock()
	defer shared.Unlock()
	shared.inMain = false
	if shared.admin != nil {
		_ = shared.admin.Close()
	}
	if shared.dir != "" {
		if out, err := script("stop", shared.dir); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: failed to stop PostgreSQL in %s: %v\n%s", shared.dir, err, out)
			code = max(code, 1)
		} else if code != 0 {
			fmt.Fprintf(os.Stderr, "pgtest: end of PostgreSQL's log:\n%s", logTail(shared.dir))
		}
		_ = os.RemoveAll(shared.dir)
		shared.dir = ""
	}
	return code
}

// URL returns the URL of a new, empty database on the test binary's server (user postgres,
// no password), dropped at the test's cleanup. It starts the server on first use.
func URL(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("on a real PostgreSQL server: not run with -short")
	}
	base, admin := server(t)
	name := fmt.Sprintf("hookroom_test_%d_%d", os.Getpid(), seq.Add(1))
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("pgtest: failed to create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: failed to drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("pgtest: bad server URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// New returns a *dbutil.Database (dialect postgres) on a new, empty database, closed and
// dropped at the test's cleanup.
func New(t testing.TB) *dbutil.Database {
	t.Helper()
	db, err := dbutil.NewWithDialect(URL(t), "postgres")
	if err != nil {
		t.Fatalf("pgtest: failed to open database: %v", err)
	}
	// Registered after URL's cleanup, so it runs first: close before DROP DATABASE.
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// server returns the shared server's URL and an admin connection, starting it on first use.
func server(t testing.TB) (string, *sql.DB) {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		t.Fatal("pgtest needs the package's TestMain to call pgtest.Main(m) (or run pgtest.Wrap(m))")
	}
	if shared.admin == nil && shared.err == nil {
		shared.err = start()
	}
	if shared.err != nil {
		t.Fatalf("pgtest: PostgreSQL: %v", shared.err)
	}
	return shared.url, shared.admin
}

// ServerEnv names the environment variable holding a running server's URL that the test
// binaries share (see the package documentation).
const ServerEnv = "HOOKROOM_PGTEST_SERVER"

func start() error {
	if u := os.Getenv(ServerEnv); u != "" {
		return connect(u, "")
	}
	root := dataRoot()
	sweepStale(root)
	dir, err := os.MkdirTemp(root, fmt.Sprintf("pgtest-%d-", os.Getpid()))
	if err != nil {
		return fmt.Errorf("failed to create a data directory: %w", err)
	}
	t0 := time.Now()
	out, err := script("start", dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("failed to start PostgreSQL with scripts/postgres.sh (scripts/test.sh installs it): %w\n%s", err, out)
	}
	shared.dir = dir
	if os.Getenv("HOOKROOM_PGTEST_TRACE") == "1" {
		fmt.Fprintf(os.Stderr, "pgtest: PostgreSQL started in %s\n", time.Since(t0).Round(time.Millisecond))
	}
	return connect(strings.TrimSpace(out), dir)
}

// connect opens the admin connection to the server at u; dir is its data directory when this
// test binary started it ("" for a shared server, whose log is not ours to show).
func connect(u, dir string) error {
	admin, err := sql.Open("postgres", u)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = admin.PingContext(ctx)
		cancel()
	}
	if err != nil {
		if dir == "" {
			return fmt.Errorf("failed to connect to the shared test PostgreSQL (%s): %w", ServerEnv, err)
		}
		return fmt.Errorf("failed to connect to the test PostgreSQL: %w\n%s", err, logTail(dir))
	}
	shared.url = u
	shared.admin = admin
	return nil
}

// script runs scripts/postgres.sh with args: its stdout, or its stderr on failure.
func script(args ...string) (string, error) {
	path, err := scriptPath()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", append([]string{path}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.String(), fmt.Errorf("failed to run scripts/postgres.sh %s: %w", args[0], err)
	}
	return stdout.String(), nil
}

// scriptPath finds scripts/postgres.sh in the repository (from the working directory: a test
// runs in its package directory).
var scriptPath = sync.OnceValues(func() (string, error) { return testkit.RepoFile("scripts/postgres.sh") })

func logTail(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// dataRoot is tmpfs when there is one.
func dataRoot() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && syscall.Access("/dev/shm", 2 /* W_OK */) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// sweepStale stops the servers of test binaries that no longer run (killed before TestMain could
// stop them) and removes their directories.
func sweepStale(root string) {
	dirs, _ := filepath.Glob(filepath.Join(root, "pgtest-*-*"))
	for _, dir := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), "pgtest-"), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_, _ = script("stop", dir)
			_ = os.RemoveAll(dir)
		}
	}
}
