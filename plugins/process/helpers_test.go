package process_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/plugins/process"
)

type logBuffer = testkit.Buffer

func testContext(t *testing.T) (context.Context, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	l := zerolog.New(logs).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return l.WithContext(context.Background()), logs
}

// fastSupervision makes the supervisor's timers short enough for tests.
var fastSupervision = process.Supervision{
	StartTimeout:           5 * time.Second,
	RestartDelay:           10 * time.Millisecond,
	MaxRestartDelay:        100 * time.Millisecond,
	CrashLimit:             3,
	CrashWindow:            time.Minute,
	PingInterval:           time.Second,
	PingTimeout:            200 * time.Millisecond,
	MaxConsecutiveTimeouts: 3,
	StopTimeout:            300 * time.Millisecond,
}

func testExecutable(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func testExecutableB() (string, error) { return os.Executable() }

func fakeSpec(t *testing.T, mode string) process.Spec {
	t.Helper()
	return process.Spec{
		Name:        "fake-" + strings.ReplaceAll(mode, "_", "-"),
		Dir:         t.TempDir(),
		Command:     []string{testExecutable(t)},
		Env:         []string{"HOOKROOM_TEST_PLUGIN=" + mode, "ONLY_THIS=1"},
		StateDir:    t.TempDir(),
		Supervision: fastSupervision,
	}
}

// startFake starts the test binary as a plugin in mode and registers a
// cleanup that closes it and checks that nothing leaked.
func startFake(t *testing.T, ctx context.Context, mode string) *process.Plugin {
	t.Helper()
	p, err := process.Start(ctx, fakeSpec(t, mode))
	if err != nil {
		t.Fatalf("Start(%s): %v", mode, err)
	}
	t.Cleanup(func() { closeAndCheck(t, p) })
	return p
}

// closeAndCheck closes p and fails the test if any of its processes or
// goroutines survive.
func closeAndCheck(t *testing.T, p *process.Plugin) {
	t.Helper()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, pid := range p.PIDs() {
		if alive(pid) {
			t.Errorf("process %d is still alive (or an unreaped zombie) after Close", pid)
		}
	}
	checkNoGoroutines(t)
}

// alive reports whether pid exists (a zombie counts: it was never reaped).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// zombieOrGone reports whether pid is gone, or a zombie some other parent
// has to reap (a grandchild reparented to init).
func zombieOrGone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// checkNoGoroutines waits up to 2 s for every goroutine of the process and
// jsonrpc packages, and of the child and restart packages they supervise
// their process with, to end.
func checkNoGoroutines(t *testing.T) {
	t.Helper()
	var leaked []string
	for range 200 {
		leaked = leaked[:0]
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "hookroom/plugins/process.") || strings.Contains(g, "hookroom/plugins/process/jsonrpc.") ||
				strings.Contains(g, "hookroom/internal/child.") || strings.Contains(g, "hookroom/internal/restart.") {
				leaked = append(leaked, g)
			}
		}
		if len(leaked) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d goroutines leaked:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
}

func within(t *testing.T, what string, limit time.Duration, f func()) time.Duration {
	t.Helper()
	start := time.Now()
	f()
	d := time.Since(start)
	if d > limit {
		t.Errorf("%s took %v, want at most %v", what, d, limit)
	}
	return d
}

func errorsAs[T error](err error) (T, bool) {
	var target T
	ok := errors.As(err, &target)
	return target, ok
}

var _ = fmt.Sprint
