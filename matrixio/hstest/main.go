package hstest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// shared is the test binary's server, started by the first Shared call and stopped by Main.
var shared struct {
	sync.Mutex
	inMain bool
	srv    *Server
	err    error
}

// Main runs the package's tests with one shared homeserver and then stops it; call it from
// TestMain:
//
//	func TestMain(m *testing.M) { hstest.Main(m) }
//
// The server starts when a test first calls Shared, so a run that selects no end-to-end test
// costs nothing. Main exits the process with the tests' status, or with 1 when the shared server
// crashed during the run; after a failure it prints the end of the server's log to stderr.
// m is the package's *testing.M, or a wrapper of it such as pgtest.Wrap(m).
func Main(m interface{ Run() int }) {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()

	code := m.Run()

	shared.Lock()
	srv := shared.srv
	shared.srv, shared.inMain = nil, false
	shared.Unlock()
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "hstest: shared homeserver: %v\n", err)
			code = max(code, 1)
		} else if code != 0 {
			fmt.Fprintf(os.Stderr, "hstest: end of the shared homeserver's log (%s):\n%s", srv.Dir, srv.logTail())
		}
		srv.removeDir()
	}
	os.Exit(code)
}

// Shared returns the homeserver shared by the package's tests, starting it on first use. Tests
// using it should register their own users (RegisterUser makes names unique) and create their own
// rooms; they may run in parallel. The test fails when the package's TestMain does not call Main
// or when the server cannot start (then every test that asks for it fails).
func Shared(t testing.TB) *Server {
	t.Helper()
	skipShort(t)
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		t.Fatal("hstest.Shared needs the package's TestMain to call hstest.Main(m)")
	}
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = newServer(Options{})
	}
	if shared.err != nil {
		t.Fatalf("hstest: shared homeserver: %v", shared.err)
	}
	return shared.srv
}

// skipShort skips an end-to-end test under `go test -short`, the way to run
// only a package's unit tests (a plain `go test` runs everything).
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test on a real homeserver: not run with -short")
	}
}
