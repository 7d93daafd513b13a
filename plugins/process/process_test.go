package process_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/plugins/process"
)

func registry(t *testing.T, p *process.Plugin, svc *hooktest.Services) *hooks.Registry {
	t.Helper()
	var opts hooks.Options
	if svc != nil {
		opts.Services = svc.Bind()
	}
	return hooktest.Registry(t, []hooks.Plugin{p.RegistryPlugin("test")}, opts)
}

func TestRoundTripEveryMode(t *testing.T) {
	ctx, logs := testContext(t)
	p := startFake(t, ctx, "ok")
	svc := &hooktest.Services{}
	reg := registry(t, p, svc)

	t.Run("declaration", func(t *testing.T) {
		infos := reg.Hooks()
		byName := map[string]hooks.HookInfo{}
		for _, h := range infos {
			byName[h.Hook] = h
		}
		if len(byName) != 9 {
			t.Fatalf("registry has %d hooks, want 9: %+v", len(byName), infos)
		}
		checks := []struct {
			name string
			got  any
			want any
		}{
			{"enrich priority", byName["enrich"].Priority, 20},
			{"footer priority (default)", byName["footer"].Priority, hooks.DefaultPriority},
			{"sched timeout", byName["sched"].Timeout, 500 * time.Millisecond},
			{"footer timeout (event default)", byName["footer"].Timeout, 200 * time.Millisecond},
			{"guard failure policy", byName["guard"].FailurePolicy, "closed"},
			{"custom event mode", byName["callbacks"].Mode, "observer"},
			{"version", p.Version(), "0.0.1-ok"},
		}
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
	})

	t.Run("observer suppress", func(t *testing.T) {
		for body, want := range map[string]bool{"buy spam now": true, "hello": false} {
			c := hooktest.MessageReceived(body)
			hooktest.Emit(t, reg, hooks.MessageReceived, c)
			if c.Suppress != want {
				t.Errorf("%q: suppress = %v, want %v", body, c.Suppress, want)
			}
		}
	})
	t.Run("collector items", func(t *testing.T) {
		c := hooktest.MessageEnrich("where am I?")
		hooktest.Emit(t, reg, hooks.MessageEnrich, c)
		want := []hooks.EnrichmentItem{{Key: "location", Text: "User is at home", CachePolicy: hooks.Stable}}
		if !slices.Equal(c.Items, want) {
			t.Errorf("items = %+v, want %+v", c.Items, want)
		}
	})
	t.Run("transformer draft", func(t *testing.T) {
		c := hooktest.BeforeResponse("Hello")
		hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c)
		if c.Draft.Text != "Hello\n-- footer" {
			t.Errorf("draft = %q", c.Draft.Text)
		}
	})
	t.Run("gate decline", func(t *testing.T) {
		c := hooktest.ToolBeforeCall("read_file", `{"path":"/etc/secret"}`)
		hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
		if !c.Declined || c.DeclineReason != "secrets stay unread" {
			t.Errorf("declined=%v reason=%q", c.Declined, c.DeclineReason)
		}
		c = hooktest.ToolBeforeCall("read_file", `{"path":"notes.txt"}`)
		hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
		if c.Declined {
			t.Errorf("harmless call declined: %q", c.DeclineReason)
		}
	})
	t.Run("claim", func(t *testing.T) {
		c := hooktest.MessageClaim("ping")
		hooktest.Emit(t, reg, hooks.MessageClaim, c)
		if c.Claimed == nil || c.Claimed.Text != "pong" {
			t.Errorf("claimed = %+v", c.Claimed)
		}
		c = hooktest.MessageClaim("something else")
		hooktest.Emit(t, reg, hooks.MessageClaim, c)
		if c.Claimed != nil {
			t.Errorf("claimed = %+v, want nil", c.Claimed)
		}
	})
	t.Run("observer message_text", func(t *testing.T) {
		c := &hooks.ScheduleFiredContext{TaskID: "daily", RoomID: hooktest.Room, MessageText: "original"}
		hooktest.Emit(t, reg, hooks.ScheduleFired, c)
		if c.MessageText != "rewritten by plugin" {
			t.Errorf("message_text = %q", c.MessageText)
		}
	})
	t.Run("host callbacks", func(t *testing.T) {
		ev := hooks.MustCustomEvent("test:callbacks")
		c := hooktest.Custom(map[string]string{"go": "now"})
		emit(t, ctx, reg, ev, c)
		sent := svc.Sent()
		if len(sent) != 1 || sent[0].Text != "hello from a plugin" || sent[0].ThreadID != "$thread:localhost" || sent[0].Plugin != p.Name() || sent[0].Event != "test:callbacks" {
			t.Errorf("sent = %+v", sent)
		}
		raw, err := os.ReadFile(filepath.Join(fakeStateDir(t, p), "callbacks.json"))
		if err != nil {
			t.Fatalf("the hook did not finish its callbacks: %v", err)
		}
		var results []string
		if err := json.Unmarshal(raw, &results); err != nil {
			t.Fatal(err)
		}
		wants := []string{
			`{"event_id":"$sent1:localhost"}`,
			`{"event_id":"$state2:localhost"}`,
			`{"content":{"tags":["a"]}}`,
			`{"events":{"":{"tags":["a"]}}}`,
			`{}`,
			`"path":`,
			"code -32003",
			"code -32001",
		}
		if len(results) != len(wants) {
			t.Fatalf("results = %q", results)
		}
		for i, w := range wants {
			if !strings.Contains(results[i], w) {
				t.Errorf("callback %d = %s, want it to contain %s", i, results[i], w)
			}
		}
		// The emitted event reached the plugin's own hook, which logged
		// through host.log with the hook's logger.
		lines := logs.Lines("saw test:emitted from hook")
		if len(lines) != 1 || !strings.Contains(lines[0], `"hook":"emitted"`) || !strings.Contains(lines[0], `"plugin":"fake-ok"`) {
			t.Errorf("log lines = %q", lines)
		}
	})
	t.Run("attachments", func(t *testing.T) {
		svc.AddAttachment(hooktest.Room, hooktest.EventID, hooks.Attachment{ID: "mxc://localhost/a", Kind: "file", Name: "a.txt", MimeType: "text/plain", Data: []byte("hello, chunks")})
		svc.AddAttachment(hooktest.Room, "$other:localhost", hooks.Attachment{ID: "mxc://localhost/not-mine", Kind: "file", Name: "b.txt", Data: []byte("secret")})
		c := hooktest.AfterResponse("done")
		c.Result.Envelope.AttachmentIDs = []string{"mxc://localhost/a"}
		hooktest.Emit(t, reg, hooks.MessageAfterResponse, c)
		raw, err := os.ReadFile(filepath.Join(fakeStateDir(t, p), "attachments.json"))
		if err != nil {
			t.Fatalf("the hook did not read the attachments: %v", err)
		}
		var results map[string]string
		if err := json.Unmarshal(raw, &results); err != nil {
			t.Fatal(err)
		}
		wants := map[string]string{
			"mxc://localhost/a": `file a.txt text/plain 13 "hello, chunks"`,
			"not mine":          "code -32003",
			"past the end":      "code -32602",
		}
		for k, w := range wants {
			if !strings.Contains(results[k], w) {
				t.Errorf("%s: %q, want it to contain %q", k, results[k], w)
			}
		}
		if len(results) != len(wants) {
			t.Errorf("results = %q", results)
		}
	})
	t.Run("tools", func(t *testing.T) {
		tools := p.Tools()
		if len(tools) != 5 || tools[0].Name != "echo" || string(tools[0].Parameters) != `{"type":"object"}` {
			t.Fatalf("tools = %+v", tools)
		}
		out, err := p.CallTool(ctx, "echo", process.ToolCall{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(`{"x":1}`)}})
		if err != nil || out != `{"x":1}` {
			t.Errorf("echo = %q, %v", out, err)
		}
		var emitted []string
		out, err = p.CallTool(ctx, "emit_tool", process.ToolCall{Emit: func(_ context.Context, ev string, payload any) error {
			raw, _ := json.Marshal(payload)
			emitted = append(emitted, ev+" "+string(raw))
			return nil
		}})
		if err != nil || out != "emitted" || !slices.Equal(emitted, []string{`test:emitted {"from":"tool"}`}) {
			t.Errorf("emit_tool = %q, %v; emitted %q", out, err, emitted)
		}
		_, err = p.CallTool(ctx, "emit_tool", process.ToolCall{})
		if err == nil || !strings.Contains(err.Error(), "-32002") {
			t.Errorf("emit_tool without an emitter: err = %v, want service unavailable", err)
		}
		if _, err := p.CallTool(ctx, "nope", process.ToolCall{}); !errors.Is(err, process.ErrUnknownTool) {
			t.Errorf("unknown tool: err = %v", err)
		}
	})
	t.Run("environment and working directory", func(t *testing.T) {
		out, err := p.CallTool(ctx, "env", process.ToolCall{})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Env []string
			WD  string
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if want := []string{"HOOKROOM_TEST_PLUGIN=ok", "ONLY_THIS=1"}; !slices.Equal(got.Env, want) {
			t.Errorf("environment = %q, want exactly %q", got.Env, want)
		}
		if got.WD != fakeStateDir(t, p) {
			t.Errorf("working directory = %q, want the state directory %q", got.WD, fakeStateDir(t, p))
		}
	})
	t.Run("concurrent emissions", func(t *testing.T) {
		var wg sync.WaitGroup
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := hooktest.BeforeResponse("x")
				if err := hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c); err != nil {
					t.Error(err)
				}
				if c.Draft.Text != "x\n-- footer" {
					t.Errorf("draft = %q", c.Draft.Text)
				}
			}()
		}
		wg.Wait()
	})
	for _, s := range reg.Stats() {
		if s.Errors+s.Timeouts+s.Panics > 0 {
			t.Errorf("hook %s: %d errors, %d timeouts, %d panics", s.Hook, s.Errors, s.Timeouts, s.Panics)
		}
	}
}

// fakeStateDir finds the plugin's state directory through host.state_dir's
// answer written by the callbacks hook, or the Spec.
func fakeStateDir(t *testing.T, p *process.Plugin) string {
	t.Helper()
	return p.RegistryPlugin("").StateRoot
}

// emit is hooktest.Emit logging to ctx's logger.
func emit[T any, P hooks.ContextOf[T]](t *testing.T, ctx context.Context, reg *hooks.Registry, ev hooks.Event[T], c P) {
	t.Helper()
	if err := hooks.Emit(ctx, reg, ev, c); err != nil {
		t.Fatalf("emit %s: %v", ev.Name(), err)
	}
}

func statsOf(reg *hooks.Registry, hook string) hooks.HookStats {
	for _, s := range reg.Stats() {
		if s.Hook == hook {
			return s
		}
	}
	return hooks.HookStats{}
}

// Every fault: each emission returns within the hook's deadline plus a small
// margin, the failure is counted, the log names the plugin and the problem,
// and Close leaves no process or goroutine behind (checked by startFake's
// cleanup).
func TestFaults(t *testing.T) {
	const deadline = 200 * time.Millisecond // message:before_response
	const margin = 150 * time.Millisecond   // scheduling on 2 shared cores under -race
	tests := []struct {
		mode string
		// emissions to run
		emits int
		// okText: the footer hook still works
		ok bool
		// failures: errors+timeouts expected at least
		failures uint64
		// log lines (all must appear)
		logs    []string
		disable bool
	}{
		{mode: "crash", emits: 8, failures: 8, disable: true,
			logs: []string{"exit status 3", "panic: something broke in footer", `crashed; restarting it`, `process plugin \"fake-crash\" disabled: it crashed 3 times`}},
		{mode: "hang", emits: 4, failures: 4,
			logs: []string{`process plugin \"fake-hang\" stopped answering (no answer to $/ping within 200ms); killing it`, "was killed by hookroom because it stopped answering"}},
		{mode: "garbage", emits: 5, ok: true,
			logs: []string{"skipping a line that is not a valid JSON-RPC 2.0 message", "Hello! I am a plugin", `"plugin":"fake-garbage"`}},
		{mode: "late", emits: 5, failures: 5,
			logs: []string{"did not answer hook footer in time", `process plugin \"fake-late\" let 3 calls in a row pass their deadline; killing it`}},
		{mode: "flood", emits: 10, ok: true,
			logs: []string{"process plugin wrote too much to stderr; dropped lines", "flood line 0 "}},
		{mode: "error", emits: 3, failures: 3,
			logs: []string{"KeyError: 'dawarich_url'", `"plugin":"fake-error"`}},
		{mode: "exit_after_init", emits: 6, failures: 1, disable: true,
			logs: []string{"giving up right after start", "exit status 1", `process plugin \"fake-exit-after-init\" disabled`}},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			ctx, logs := testContext(t)
			p := startFake(t, ctx, tc.mode)
			reg := registry(t, p, nil)
			emit := func(i int) {
				c := hooktest.BeforeResponse("Hello")
				within(t, "Emit", deadline+margin, func() {
					if err := hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c); err != nil {
						t.Errorf("Emit %d: %v", i, err)
					}
				})
				if tc.ok && c.Draft.Text != "Hello\n-- footer" {
					t.Errorf("Emit %d: draft = %q", i, c.Draft.Text)
				}
				if !tc.ok && tc.mode != "exit_after_init" && c.Draft.Text != "Hello" {
					t.Errorf("Emit %d: a failed hook changed the draft to %q", i, c.Draft.Text)
				}
			}
			for i := range tc.emits {
				emit(i)
			}
			if tc.disable {
				// A plugin is disabled by crashes it has after its restarts, and a
				// restart (a new process) takes long on a loaded machine: calls
				// made while it restarts fail without crashing it. Call until it
				// is disabled.
				i := tc.emits
				testkit.Until(t, 30*time.Second, func() (bool, string) {
					if !p.Healthy() && logs.Contains(tc.logs[len(tc.logs)-1]) {
						return true, ""
					}
					emit(i)
					i++
					return false, fmt.Sprintf("the plugin is not disabled after %d calls", i)
				})
			}
			s := statsOf(reg, "footer")
			if got := s.Errors + s.Timeouts + s.Panics; got < tc.failures {
				t.Errorf("stats: %d errors + %d timeouts, want at least %d failures", s.Errors, s.Timeouts, tc.failures)
			}
			if tc.ok && s.Errors+s.Timeouts > 0 {
				t.Errorf("stats: %d errors + %d timeouts, want none", s.Errors, s.Timeouts)
			}
			for _, want := range tc.logs {
				logs.WaitFor(t, want, 3*time.Second)
			}
			if tc.disable {
				if p.Healthy() {
					t.Error("Healthy() = true after the crash loop")
				}
				if st := p.Status(); st.State != process.StateDisabled || st.PID != 0 {
					t.Errorf("Status() = %+v after the crash loop, want disabled without a pid", st)
				}
				if st := p.Status(); tc.mode == "crash" && st.Restarts < 1 {
					t.Errorf("Status() = %+v, want the restarts before it was disabled counted", st)
				}
				c := hooktest.BeforeResponse("Hello")
				d := within(t, "Emit on a disabled plugin", 50*time.Millisecond, func() {
					_ = hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c)
				})
				t.Logf("Emit on the disabled plugin took %v", d)
				if _, err := p.CallTool(ctx, "echo", process.ToolCall{}); !errors.Is(err, process.ErrDisabled) {
					t.Errorf("CallTool on a disabled plugin: err = %v, want ErrDisabled", err)
				}
			}
			if st := p.Status(); !tc.disable && tc.mode != "hang" && tc.mode != "late" && (st.State != process.StateRunning || st.PID == 0) {
				t.Errorf("Status() = %+v, want running with a pid", st)
			}
			if tc.mode == "flood" {
				// 200 burst + 50/s: whatever the plugin writes, the log
				// gets a bounded number of its lines.
				if n := len(logs.Lines("flood line")); n > 400 {
					t.Errorf("%d stderr lines logged; the rate limit did not hold", n)
				}
			}
		})
	}
}

func TestHookErrorCarriesPluginMessage(t *testing.T) {
	ctx, logs := testContext(t)
	p := startFake(t, ctx, "error")
	hs := p.Hooks()
	i := slices.IndexFunc(hs, func(h hooks.Hook) bool { return h.Name() == "footer" })
	reg := hooktest.Registry(t, []hooks.Plugin{{Name: p.Name(), Hooks: hs[i : i+1]}})
	c := hooktest.BeforeResponse("x")
	emit(t, ctx, reg, hooks.MessageBeforeResponse, c)
	lines := logs.Lines("hook failed; its effects are dropped")
	if len(lines) != 1 || !strings.Contains(lines[0], `process plugin \"fake-error\": hook footer failed: KeyError: 'dawarich_url' (code -32000)`) {
		t.Errorf("log = %q", lines)
	}
}

func TestDeadlineCancelsTheCallInThePlugin(t *testing.T) {
	ctx, logs := testContext(t)
	p := startFake(t, ctx, "cancel_aware")
	reg := registry(t, p, nil)
	c := hooktest.BeforeResponse("x")
	within(t, "Emit", 350*time.Millisecond, func() { emit(t, ctx, reg, hooks.MessageBeforeResponse, c) })
	logs.WaitFor(t, "hook cancelled by host: context canceled", 2*time.Second)
	if s := statsOf(reg, "footer"); s.Timeouts != 1 {
		t.Errorf("timeouts = %d, want 1", s.Timeouts)
	}
}

func TestGateFailsClosedWhenThePluginCrashes(t *testing.T) {
	ctx, _ := testContext(t)
	p := startFake(t, ctx, "crash")
	reg := registry(t, p, nil)
	c := hooktest.ToolBeforeCall("read_file", `{"path":"notes.txt"}`)
	hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
	if !c.Declined || !strings.Contains(c.DeclineReason, "gate fake-crash/guard was unavailable (failed)") {
		t.Errorf("declined=%v reason=%q", c.Declined, c.DeclineReason)
	}
}

func TestStartFailures(t *testing.T) {
	tests := []struct {
		name  string
		spec  func(t *testing.T) process.Spec
		want  []string
		errIs error
	}{
		{
			name:  "exits at start",
			spec:  func(t *testing.T) process.Spec { return fakeSpec(t, "exit_at_start") },
			want:  []string{`process plugin "fake-exit-at-start"`, "exited during start-up", "exit status 1", "fatal: cannot read my configuration"},
			errIs: process.ErrExited,
		},
		{
			name:  "speaks another api_version",
			spec:  func(t *testing.T) process.Spec { return fakeSpec(t, "bad_version") },
			want:  []string{"api_version 2", "this host speaks 1"},
			errIs: process.ErrAPIVersion,
		},
		{
			name: "program does not exist",
			spec: func(t *testing.T) process.Spec {
				s := fakeSpec(t, "ok")
				s.Command = []string{"./no-such-program"}
				return s
			},
			want: []string{"failed to run", "no-such-program"},
		},
		{
			name: "program not in PATH",
			spec: func(t *testing.T) process.Spec {
				s := fakeSpec(t, "ok")
				s.Command = []string{"hookroom-no-such-program"}
				return s
			},
			want: []string{`program "hookroom-no-such-program" not found`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, _ := testContext(t)
			var err error
			within(t, "Start", 3*time.Second, func() {
				var p *process.Plugin
				p, err = process.Start(ctx, tc.spec(t))
				if p != nil {
					p.Close()
				}
			})
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("error %v is not %v", err, tc.errIs)
			}
			checkNoGoroutines(t)
		})
	}
}

func TestCloseEscalatesToSIGKILL(t *testing.T) {
	ctx, logs := testContext(t)
	p, err := process.Start(ctx, fakeSpec(t, "ignore_term"))
	if err != nil {
		t.Fatal(err)
	}
	// shutdown answered but ignored, stdin EOF ignored, SIGTERM ignored:
	// three StopTimeouts, then SIGKILL.
	d := within(t, "Close", 3*fastSupervision.StopTimeout+time.Second, func() { closeAndCheck(t, p) })
	if d < 2*fastSupervision.StopTimeout {
		t.Errorf("Close took %v: the plugin cannot have been asked politely first", d)
	}
	logs.WaitFor(t, "did not exit after SIGTERM; killing it", time.Second)
}

func TestCloseStopsTheProcessGroup(t *testing.T) {
	ctx, _ := testContext(t)
	spec := fakeSpec(t, "spawn_child")
	p, err := process.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(spec.StateDir, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	closeAndCheck(t, p)
	var pid int
	if err := json.Unmarshal(raw, &pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !zombieOrGone(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !zombieOrGone(pid) {
		t.Errorf("the plugin's child %d survived Close", pid)
	}
}

func TestCallsAfterCloseFail(t *testing.T) {
	ctx, _ := testContext(t)
	p, err := process.Start(ctx, fakeSpec(t, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry(t, p, nil)
	closeAndCheck(t, p)
	closeAndCheck(t, p) // idempotent
	c := hooktest.BeforeResponse("x")
	hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c)
	if c.Draft.Text != "x" || statsOf(reg, "footer").Errors != 1 {
		t.Errorf("draft=%q stats=%+v", c.Draft.Text, statsOf(reg, "footer"))
	}
	if _, err := p.CallTool(ctx, "echo", process.ToolCall{}); !errors.Is(err, process.ErrClosed) {
		t.Errorf("err = %v, want ErrClosed", err)
	}
}
