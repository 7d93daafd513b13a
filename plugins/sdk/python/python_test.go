// Package python_test runs the Python SDK's unit tests and drives Python
// plugins through the real process host: every hook mode, the context
// helpers, tools, faults and the round-trip benchmark.
package python_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/testkit"
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

type logBuffer = testkit.Buffer

var testSettings = map[string]any{"footer": "\n-- sent by hookroom", "home": "Berlin"}

type harness struct {
	ctx      context.Context
	logs     *logBuffer
	p        *process.Plugin
	reg      *hooks.Registry
	svc      *hooktest.Services
	stateDir string
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

func newHarness(t *testing.T, mode string) *harness {
	t.Helper()
	logs := &logBuffer{}
	logger := zerolog.New(logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	h := &harness{ctx: logger.WithContext(context.Background()), logs: logs, svc: &hooktest.Services{}}
	s := spec(t, mode)
	h.stateDir = s.StateDir
	p, err := process.Start(h.ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	h.p = p
	h.reg = hooktest.Registry(t, []hooks.Plugin{p.RegistryPlugin("test")}, hooks.Options{Services: h.svc.Bind()})
	return h
}

func emit[T any, P hooks.ContextOf[T]](t *testing.T, h *harness, ev hooks.Event[T], c P) {
	t.Helper()
	if err := hooks.Emit(h.ctx, h.reg, ev, c); err != nil {
		t.Fatalf("emit %s: %v", ev.Name(), err)
	}
}

func stats(h *harness, hook string) hooks.HookStats {
	for _, s := range h.reg.Stats() {
		if s.Hook == hook {
			return s
		}
	}
	return hooks.HookStats{}
}

func (h *harness) emitToRegistry(ctx context.Context, event string, payload any) error {
	ev, err := hooks.NewCustomEvent(event)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(payload)
	return hooks.Emit(ctx, h.reg, ev, &hooks.CustomEventContext{Payload: raw, SourcePlugin: "py-test"})
}

func TestRoundTripEveryMode(t *testing.T) {
	h := newHarness(t, "ok")
	t.Run("declaration", func(t *testing.T) {
		infos := map[string]hooks.HookInfo{}
		for _, i := range h.reg.Hooks() {
			infos[i.Hook] = i
		}
		if len(infos) != 12 || infos["location"].Priority != 20 || infos["guard"].FailurePolicy != "closed" ||
			infos["guard"].Timeout != 150*time.Millisecond || !slices.Equal(infos["sched"].Rooms, []id.RoomID{hooktest.Room}) ||
			!slices.Equal(infos["callbacks"].Agents, []hooks.AgentName{hooktest.Agent}) || h.p.Version() != "1.2.3" {
			t.Errorf("declaration = %+v", infos)
		}
	})
	t.Run("observer", func(t *testing.T) {
		c := hooktest.MessageReceived("cheap spam")
		emit(t, h, hooks.MessageReceived, c)
		if !c.Suppress {
			t.Error("not suppressed")
		}
		// print() in plugin code lands in the log, not in the protocol.
		h.logs.WaitFor(t, "stray output from plugin code: cheap spam", 3*time.Second)
	})
	t.Run("collectors", func(t *testing.T) {
		c := hooktest.MessageEnrich("hi")
		emit(t, h, hooks.MessageEnrich, c)
		if want := []hooks.EnrichmentItem{{Key: "location", Text: "User is at Berlin", CachePolicy: hooks.Stable}}; !slices.Equal(c.Items, want) {
			t.Errorf("items = %+v", c.Items)
		}
		s := hooktest.SystemEnrich("hi")
		emit(t, h, hooks.SystemEnrich, s)
		if want := []hooks.EnrichmentItem{{Key: "agent", Text: "You are assistant", CachePolicy: hooks.Volatile}}; !slices.Equal(s.Items, want) {
			t.Errorf("items = %+v", s.Items)
		}
	})
	t.Run("transformers", func(t *testing.T) {
		c := hooktest.BeforeResponse("Hello")
		c.Draft.Extra = json.RawMessage(`{"k":1}`)
		emit(t, h, hooks.MessageBeforeResponse, c)
		if c.Draft.Text != "Hello\n-- sent by hookroom" || string(c.Draft.Extra) != `{"k":1}` {
			t.Errorf("draft = %+v", c.Draft)
		}
		f := hooktest.FinalResponse("done")
		emit(t, h, hooks.MessageFinalResponseTransform, f)
		if f.Draft.Text != "DONE" {
			t.Errorf("final = %q", f.Draft.Text)
		}
	})
	sdktest.RunShared(t, h.ctx, h.reg) // gate, claim, schedule
	t.Run("context helpers", func(t *testing.T) {
		emit(t, h, hooks.MessageAfterResponse, hooktest.AfterResponse("42"))
		if s := stats(h, "callbacks"); s.Errors+s.Timeouts > 0 {
			t.Fatalf("callbacks failed: %+v", s)
		}
		report, err := os.ReadFile(filepath.Join(h.stateDir, "callbacks.txt"))
		if err != nil {
			t.Fatal(err)
		}
		if want := `state={'n': 1} all=1 missing=None plugin=py-test hook=callbacks event=message:after_response`; string(report) != want {
			t.Errorf("report = %q, want %q", report, want)
		}
		var texts []string
		for _, m := range h.svc.Sent() {
			texts = append(texts, m.Text)
		}
		if want := []string{"reply was: 42", "emitted from hook"}; !slices.Equal(texts, want) {
			t.Errorf("sent %q, want %q", texts, want)
		}
		h.logs.WaitFor(t, `"hook":"callbacks","event":"message:after_response"`, 3*time.Second)
		h.logs.WaitFor(t, "callbacks done", 3*time.Second)
	})
	t.Run("tools", func(t *testing.T) {
		out, err := h.p.CallTool(h.ctx, "add", process.ToolCallRequest{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(`{"a":2,"b":40}`)}})
		if err != nil || out != "42" {
			t.Errorf("add = %q, %v", out, err)
		}
		out, err = h.p.CallTool(h.ctx, "whoami", process.ToolCallRequest{ToolCall: hooks.ToolCall{
			Agent: hooktest.Agent, RoomID: hooktest.Room, ThreadID: hooktest.EventID,
			RequesterID: hooktest.Sender, SessionID: "session-1",
		}, CorrelationID: "corr-1"})
		if want := fmt.Sprintf("%s %s %s %s session-1 corr-1", hooktest.Agent, hooktest.Room, hooktest.EventID, hooktest.Sender); err != nil || out != want {
			t.Errorf("whoami = %q, %v; want %q", out, err, want)
		}
		before := len(h.svc.Sent())
		out, err = h.p.CallTool(h.ctx, "announce", process.ToolCallRequest{Emit: h.emitToRegistry})
		if err != nil || out != "announced" {
			t.Errorf("announce = %q, %v", out, err)
		}
		if sent := h.svc.Sent(); len(sent) != before+1 || sent[before].Text != "emitted from tool" {
			t.Errorf("sent = %+v", sent)
		}
	})
	t.Run("failing hook", func(t *testing.T) {
		emit(t, h, hooks.MessageCancelled, hooktest.Cancelled(hooks.CancelModelError))
		if s := stats(h, "fails"); s.Errors != 1 {
			t.Errorf("stats = %+v", s)
		}
		h.logs.WaitFor(t, `hook fails failed: RuntimeError: calendar API is down`, 3*time.Second)
		h.logs.WaitFor(t, "Traceback (most recent call last)", 3*time.Second)
	})
	t.Run("deadline", func(t *testing.T) {
		start := time.Now()
		emit(t, h, hooks.RoomMemberJoined, hooktest.MemberJoined("@bob:localhost"))
		if d := time.Since(start); d > 250*time.Millisecond {
			t.Errorf("emit took %v with a 100 ms hook", d)
		}
		if s := stats(h, "slow"); s.Timeouts != 1 {
			t.Errorf("stats = %+v", s)
		}
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
				emit(t, h, hooks.MessageBeforeResponse, c)
				if d := time.Since(start); d > deadline+margin {
					t.Errorf("Emit %d took %v", i, d)
				}
				if c.Draft.Text != "Hello" {
					t.Errorf("a failed hook changed the draft: %q", c.Draft.Text)
				}
			}
			if s := stats(h, "footer"); s.Errors+s.Timeouts < 3 {
				t.Errorf("stats = %+v", s)
			}
			for _, l := range tc.logs {
				h.logs.WaitFor(t, l, 3*time.Second)
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
