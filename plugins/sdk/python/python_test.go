// Package python_test runs the Python SDK's unit tests and drives Python
// plugins through the real process host: every hook mode, the context
// helpers, tools, faults and the round-trip benchmark.
package python_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/process"
	"github.com/hookroom/hookroom/plugins/sdk/sdktest"
)

// python3 is required: the SDK is part of the product, so its tests must
// run wherever the Go tests run.
func python(t testing.TB) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to test the Python SDK: %v", err)
	}
	return py
}

func sdkDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPythonUnitTests(t *testing.T) {
	cmd := exec.Command(python(t), "-m", "unittest", "discover", "-s", sdkDir(t), "-p", "test_*.py", "-v")
	cmd.Dir = sdkDir(t)
	out, err := cmd.CombinedOutput()
	t.Logf("python3 -m unittest:\n%s", out)
	if err != nil {
		t.Fatalf("Python SDK unit tests failed: %v", err)
	}
	if !bytes.Contains(out, []byte("OK")) {
		t.Fatal("unittest did not report OK")
	}
}

var testSettings = map[string]any{"footer": "\n-- sent by hookroom", "home": "Berlin"}

// harness is the Python test plugin running as a process in one mode.
type harness struct {
	*sdktest.Harness
	p *process.Plugin
}

func spec(t testing.TB, mode string) process.Spec {
	t.Helper()
	settings, err := hooks.NewSettings(testSettings)
	if err != nil {
		t.Fatal(err)
	}
	return process.Spec{
		Name:     "py-test",
		Dir:      filepath.Join(sdkDir(t), "testdata"),
		Command:  []string{python(t), "./roundtrip_plugin.py"},
		Env:      []string{"PYTHONPATH=" + sdkDir(t), "HOOKROOM_PY_MODE=" + mode},
		StateDir: t.TempDir(),
		Settings: settings,
		Supervision: process.Supervision{
			RestartDelay: 20 * time.Millisecond, PingTimeout: 300 * time.Millisecond,
			StopTimeout: 500 * time.Millisecond, CrashLimit: 3,
		},
	}
}

// newHarness starts testdata/roundtrip_plugin.py in mode (see spec).
func newHarness(t *testing.T, mode string) *harness {
	t.Helper()
	h := &harness{Harness: sdktest.NewHarness(t, "py-test")}
	s := spec(t, mode)
	s.StateDir = h.StateDir
	p, err := process.Start(h.Ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	h.p = p
	h.CallTool = func(name string, call plugins.ToolCall) (string, error) {
		return p.CallTool(h.Ctx, name, call)
	}
	h.Register(t, p.RegistryPlugin("test"))
	return h
}

// The Python twin of the Go SDK's test plugin passes the same checks
// (sdktest's), and some of its own.
func TestRoundTripEveryMode(t *testing.T) {
	h := newHarness(t, "ok")
	sdktest.RunShared(t, h.Harness, sdktest.Declared{Hooks: 20, GuardTimeout: 150 * time.Millisecond})
	t.Run("team", func(t *testing.T) { sdktest.CheckTeam(t, h.Harness) })
	t.Run("version", func(t *testing.T) {
		if v := h.p.Version(); v != "1.2.3" {
			t.Errorf("version = %q", v)
		}
	})
	t.Run("stray output", func(t *testing.T) {
		// print() in plugin code lands in the log, not in the protocol.
		sdktest.Emit(t, h.Harness, hooks.MessageReceived, hooktest.MessageReceived("cheap spam"))
		h.Logs.WaitFor(t, "stray output from plugin code: cheap spam", 3*time.Second)
	})
	t.Run("context helpers", func(t *testing.T) {
		sdktest.CheckCallbacks(t, h.Harness, hooktest.AfterResponse("42"),
			`state={'n': 1} all=1 missing=None plugin=py-test hook=callbacks event=message:after_response`)
	})
	t.Run("tools", func(t *testing.T) { sdktest.CheckTools(t, h.Harness) })
	t.Run("model events", func(t *testing.T) {
		r := hooktest.ModelResolve("a hard question", "default", "default", "smart")
		sdktest.Emit(t, h.Harness, hooks.ModelResolve, r)
		if r.Model != "smart" {
			t.Errorf("model:resolve chose %q", r.Model)
		}
		// A model config.yaml does not define fails the hook on the host.
		r = hooktest.ModelResolve("a hard unknown question", "default", "default", "smart")
		sdktest.Emit(t, h.Harness, hooks.ModelResolve, r)
		if r.Model != "default" {
			t.Errorf("model:resolve took an unknown model: %q", r.Model)
		}
		h.Logs.WaitFor(t, `the hook chose model \"gpt-9\", which is not configured`, 3*time.Second)
		q := hooktest.ModelRequest("my password is hunter2", "shell", "clock")
		sdktest.Emit(t, h.Harness, hooks.ModelRequest, q)
		if len(q.Messages) != 2 || q.Messages[1].Content != "my password is [secret]" || len(q.Tools) != 1 || q.Tools[0].Name != "clock" || q.Refused {
			t.Errorf("model:request = %+v", q)
		}
		q = hooktest.ModelRequest("hi", "clock")
		q.Round = 4
		sdktest.Emit(t, h.Harness, hooks.ModelRequest, q)
		if !q.Refused || q.RefuseReason != "too many rounds for default" {
			t.Errorf("model:request refusal = %+v", q)
		}
		tr := hooktest.ToolResult("env", "", "key=AKIA1234")
		sdktest.Emit(t, h.Harness, hooks.ToolResult, tr)
		if tr.Content != "key=AKIA****" {
			t.Errorf("tool:result = %q", tr.Content)
		}
		m := hooktest.MemoryExtracted("Alice has a cat.", "Alice's password is hunter2.")
		sdktest.Emit(t, h.Harness, hooks.MemoryExtracted, m)
		if len(m.Memories) != 1 || m.Memories[0].Text != "A. has a cat." || m.Memories[0].Person != hooktest.Sender || m.Vetoed {
			t.Errorf("memory:extracted = %+v", m)
		}
		m = hooktest.MemoryExtracted("Alice said: veto this.")
		sdktest.Emit(t, h.Harness, hooks.MemoryExtracted, m)
		if !m.Vetoed || m.VetoReason != "asked to" {
			t.Errorf("memory:extracted veto = %+v", m)
		}
	})
	t.Run("failure log", func(t *testing.T) {
		// The failing hook ran in RunShared; its exception is logged with
		// the traceback.
		h.Logs.WaitFor(t, `hook fails failed: RuntimeError: calendar API is down`, 3*time.Second)
		h.Logs.WaitFor(t, "Traceback (most recent call last)", 3*time.Second)
	})
}

func TestPythonFaults(t *testing.T) {
	const deadline, margin = 200 * time.Millisecond, 150 * time.Millisecond
	tests := []struct {
		mode string
		logs []string
	}{
		{"crash", []string{"about to crash", "exit status 3", `process plugin \"py-test\" crashed; restarting it`}},
		{"block", []string{`process plugin \"py-test\" stopped answering (no answer to $/ping within 300ms); killing it`}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			h := newHarness(t, tc.mode)
			for i := range 3 {
				c := hooktest.BeforeResponse("Hello")
				start := time.Now()
				sdktest.Emit(t, h.Harness, hooks.MessageBeforeResponse, c)
				if d := time.Since(start); d > deadline+margin {
					t.Errorf("Emit %d took %v", i, d)
				}
				if c.Draft.Text != "Hello" {
					t.Errorf("a failed hook changed the draft: %q", c.Draft.Text)
				}
			}
			if s := h.Stats("footer"); s.Errors+s.Timeouts < 3 {
				t.Errorf("stats = %+v", s)
			}
			for _, l := range tc.logs {
				h.Logs.WaitFor(t, l, 3*time.Second)
			}
		})
	}
	t.Run("import error", func(t *testing.T) {
		_, err := process.Start(context.Background(), spec(t, "import_error"))
		if err == nil || !errors.Is(err, process.ErrExited) || !strings.Contains(err.Error(), "No module named 'hookroom_no_such_module'") {
			t.Fatalf("err = %v", err)
		}
	})
}
