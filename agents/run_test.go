package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// countingTool is a tool that records its calls.
type countingTool struct {
	name  string
	calls atomic.Int32
	fn    func(ctx context.Context, args json.RawMessage) (string, error)
	mu    sync.Mutex
	seen  []hooks.ToolCall
}

func (c *countingTool) Spec() agents.ToolSpec {
	return agents.ToolSpec{Name: c.name, Description: "test tool", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (c *countingTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	c.calls.Add(1)
	if tc, ok := agents.ToolCallFrom(ctx); ok {
		c.mu.Lock()
		c.seen = append(c.seen, tc)
		c.mu.Unlock()
	}
	if c.fn != nil {
		return c.fn(ctx, args)
	}
	return "result of " + c.name + " " + string(args), nil
}

// clockTools returns a countingTool named clock and a toolset of it
// alone.
func clockTools(t testing.TB) (*countingTool, *agents.Toolset) {
	t.Helper()
	clock := &countingTool{name: "clock"}
	ts, err := agents.NewToolset(clock)
	if err != nil {
		t.Fatal(err)
	}
	return clock, ts
}

// recorder collects hook contexts.
type recorder[T any] struct {
	mu  sync.Mutex
	got []T
}

func (r *recorder[T]) add(c T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, c)
}

func (r *recorder[T]) all() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]T(nil), r.got...)
}

func baseRun(m agents.Model, ts *agents.Toolset, reg *hooks.Registry) agents.RunRequest {
	return agents.RunRequest{
		Model: m,
		Messages: []agents.Message{
			{Role: agents.RoleSystem, Content: "You are helpful."},
			{Role: agents.RoleUser, Content: "What time is it?"},
		},
		Tools: ts, Hooks: reg,
	}
}

// turnCtx is ctx carrying the correlation id and the Where of baseRun's
// turn, as the bot sets them.
func turnCtx(ctx context.Context) context.Context {
	return hooks.WithWhere(hooks.WithCorrelationID(ctx, "corr-1"), hooks.Where{
		Agent: hooktest.Agent, RoomID: hooktest.Room, ThreadID: hooktest.EventID,
		RequesterID: hooktest.Sender, SessionID: "session-1",
	})
}

func wantCall(t *testing.T, got hooks.ToolCall, tool, args string) {
	t.Helper()
	want := hooks.ToolCall{Tool: tool, Arguments: json.RawMessage(args), Agent: hooktest.Agent, RoomID: hooktest.Room,
		ThreadID: hooktest.EventID, RequesterID: hooktest.Sender, SessionID: "session-1"}
	if got.Tool != want.Tool || string(got.Arguments) != string(want.Arguments) || got.Agent != want.Agent || got.RoomID != want.RoomID ||
		got.ThreadID != want.ThreadID || got.RequesterID != want.RequesterID || got.SessionID != want.SessionID {
		t.Errorf("tool call = %+v, want %+v", got, want)
	}
}

func TestRunToolGate(t *testing.T) {
	cases := []struct {
		name    string
		decline string // "" allows
	}{
		{name: "declined by a gate", decline: "the time is a secret here"},
		{name: "allowed by the gates"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				before recorder[hooks.ToolBeforeCallContext]
				after  recorder[hooks.ToolAfterCallContext]
			)
			reg := hooktest.Registry(t, []hooks.Plugin{
				hooktest.Plugin("audit",
					hooks.Handle(hooks.ToolBeforeCall, "look", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
						before.add(*c)
						return nil
					}, hooks.Priority(10)),
					hooks.Handle(hooks.ToolAfterCall, "log", func(_ context.Context, c *hooks.ToolAfterCallContext) error {
						after.add(*c)
						return nil
					}),
				),
				hooktest.Plugin("policy",
					hooks.Handle(hooks.ToolBeforeCall, "gate", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
						if tc.decline != "" && c.Tool == "clock" {
							c.Decline(tc.decline)
						}
						return nil
					}, hooks.Priority(20)),
				),
			})
			clock, ts := clockTools(t)
			srv := llmtest.NewServer(t,
				llmtest.Calls(llmtest.ToolCall("call_1", "clock", `{"tz":"UTC"}`).WithPieces(3)),
				llmtest.Text("It is ", "noon."),
			)
			var streamed strings.Builder
			req := baseRun(testModel(t, srv), ts, reg)
			req.OnText = func(d string) { streamed.WriteString(d) }
			res, err := agents.Run(turnCtx(hooktest.Context(t)), req)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != "It is noon." || streamed.String() != res.Text {
				t.Errorf("text = %q, streamed %q", res.Text, streamed.String())
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("model calls = %d, want 2", len(reqs))
			}
			msgs := reqs[1].Body.Messages
			last := msgs[len(msgs)-1]
			if last.Role != "tool" || last.ToolCallID != "call_1" {
				t.Fatalf("last message of the second request = %+v", last)
			}
			if prev := msgs[len(msgs)-2]; prev.Role != "assistant" || len(prev.ToolCalls) != 1 || prev.ToolCalls[0].Function.Arguments != `{"tz":"UTC"}` {
				t.Errorf("assistant tool-call message = %+v", prev)
			}
			bs := before.all()
			if len(bs) != 1 {
				t.Fatalf("tool:before_call ran %d times, want 1", len(bs))
			}
			wantCall(t, bs[0].ToolCall, "clock", `{"tz":"UTC"}`)
			if bs[0].CorrelationID != "corr-1" {
				t.Errorf("correlation id = %q", bs[0].CorrelationID)
			}
			as := after.all()
			if len(as) != 1 {
				t.Fatalf("tool:after_call ran %d times, want 1", len(as))
			}
			a := as[0]
			wantCall(t, a.ToolCall, "clock", `{"tz":"UTC"}`)
			if len(res.ToolTrace) != 1 {
				t.Fatalf("trace = %+v", res.ToolTrace)
			}
			tr := res.ToolTrace[0]
			if tc.decline != "" {
				want := "[tool call declined]\nTool: clock\nReason: " + tc.decline + "\n\nTry a different approach."
				if string(last.Content) != want || agents.DeclinedResult("clock", tc.decline) != want {
					t.Errorf("the model saw %q, want %q", last.Content, want)
				}
				if n := clock.calls.Load(); n != 0 {
					t.Errorf("declined tool ran %d times", n)
				}
				if !a.Blocked || a.Result != "" || !strings.Contains(a.Error, tc.decline) || a.Duration != 0 {
					t.Errorf("after_call = blocked %v result %q error %q duration %v", a.Blocked, a.Result, a.Error, a.Duration)
				}
				if !tr.Blocked || tr.Result != "" {
					t.Errorf("trace = %+v", tr)
				}
				return
			}
			wantResult := `result of clock {"tz":"UTC"}`
			if string(last.Content) != wantResult || clock.calls.Load() != 1 {
				t.Errorf("the model saw %q after %d calls", last.Content, clock.calls.Load())
			}
			if a.Blocked || a.Result != wantResult || a.Error != "" || a.Duration <= 0 {
				t.Errorf("after_call = blocked %v result %q error %q duration %v", a.Blocked, a.Result, a.Error, a.Duration)
			}
			if tr.Blocked || tr.Result != wantResult || tr.Tool != "clock" || string(tr.Args) != `{"tz":"UTC"}` || tr.Duration != a.Duration {
				t.Errorf("trace = %+v", tr)
			}
			if len(clock.seen) != 1 {
				t.Fatalf("ToolCallFrom in the tool: %v", clock.seen)
			}
			wantCall(t, clock.seen[0], "clock", `{"tz":"UTC"}`)
		})
	}
}

func TestRunToolResults(t *testing.T) {
	boom := &countingTool{name: "boom", fn: func(context.Context, json.RawMessage) (string, error) {
		return "", errors.New("disk on fire")
	}}
	panicky := &countingTool{name: "panicky", fn: func(context.Context, json.RawMessage) (string, error) { panic("oh no") }}
	quiet := &countingTool{name: "quiet", fn: func(context.Context, json.RawMessage) (string, error) { return "", nil }}
	stuck := &countingTool{name: "stuck", fn: func(context.Context, json.RawMessage) (string, error) {
		time.Sleep(2 * time.Second) // ignores its context
		return "too late", nil
	}}
	ts, err := agents.NewToolset(boom, panicky, quiet, stuck)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		call      llmtest.Call
		wantSeen  string // what the model sees, as a substring
		wantError string // trace error substring; "" for none
	}{
		{name: "unknown tool", call: llmtest.ToolCall("c1", "teleport", `{}`), wantSeen: `there is no tool called "teleport". Available tools: boom, panicky, quiet, stuck.`, wantError: "unknown tool"},
		{name: "tool error", call: llmtest.ToolCall("c1", "boom", `{}`), wantSeen: "[tool call failed]\nTool: boom\nError: disk on fire", wantError: "disk on fire"},
		{name: "tool panics", call: llmtest.ToolCall("c1", "panicky", `{}`), wantSeen: "the tool crashed: oh no", wantError: "crashed"},
		{name: "invalid arguments", call: llmtest.ToolCall("c1", "boom", `{"a":`), wantSeen: "not a valid JSON object", wantError: "invalid arguments"},
		{name: "arguments not an object", call: llmtest.ToolCall("c1", "boom", `[1,2]`), wantSeen: "not a valid JSON object", wantError: "invalid arguments"},
		{name: "empty result", call: llmtest.ToolCall("c1", "quiet", `{}`), wantSeen: "(the tool returned no output)"},
		{name: "tool ignores its deadline", call: llmtest.ToolCall("c1", "stuck", `{}`), wantSeen: "did not finish within 100ms", wantError: "did not finish"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var after recorder[hooks.ToolAfterCallContext]
			reg := hooktest.NewRegistry(t, hooks.Handle(hooks.ToolAfterCall, "log", func(_ context.Context, c *hooks.ToolAfterCallContext) error {
				after.add(*c)
				return nil
			}))
			srv := llmtest.NewServer(t, llmtest.Calls(tc.call), llmtest.Text("done"))
			req := baseRun(testModel(t, srv), ts, reg)
			req.ToolTimeout = 100 * time.Millisecond
			res, err := agents.Run(turnCtx(hooktest.Context(t)), req)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != "done" {
				t.Errorf("text = %q", res.Text)
			}
			msgs := srv.LastRequest(t).Body.Messages
			seen := string(msgs[len(msgs)-1].Content)
			if !strings.Contains(seen, tc.wantSeen) {
				t.Errorf("the model saw %q, want it to contain %q", seen, tc.wantSeen)
			}
			if len(res.ToolTrace) != 1 || !strings.Contains(res.ToolTrace[0].Error, tc.wantError) || (tc.wantError == "") != (res.ToolTrace[0].Error == "") {
				t.Errorf("trace = %+v, want error containing %q", res.ToolTrace, tc.wantError)
			}
			as := after.all()
			if len(as) != 1 || as[0].Error != res.ToolTrace[0].Error || !json.Valid(as[0].Arguments) {
				t.Errorf("tool:after_call = %+v", as)
			}
		})
	}
}

func TestRunIterationBound(t *testing.T) {
	clock, ts := clockTools(t)
	srv := llmtest.NewServerWith(t, []llmtest.Option{llmtest.WithFallback(llmtest.Calls(llmtest.ToolCall("c", "clock", `{}`)))})
	req := baseRun(testModel(t, srv), ts, nil)
	req.MaxToolIterations = 3
	res, err := agents.Run(turnCtx(t.Context()), req)
	if !errors.Is(err, agents.ErrToolIterations) {
		t.Fatalf("error = %v, want ErrToolIterations", err)
	}
	if !strings.Contains(err.Error(), "after 3 rounds") {
		t.Errorf("error = %v", err)
	}
	if res == nil || res.ModelCalls != 4 || srv.Count() != 4 || clock.calls.Load() != 3 || len(res.ToolTrace) != 3 {
		t.Errorf("model calls = %d (server %d), tool calls %d, trace %d", res.ModelCalls, srv.Count(), clock.calls.Load(), len(res.ToolTrace))
	}

	t.Run("default bound", func(t *testing.T) {
		srv := llmtest.NewServerWith(t, []llmtest.Option{llmtest.WithFallback(llmtest.Calls(llmtest.ToolCall("c", "clock", `{}`)))})
		_, err := agents.Run(turnCtx(t.Context()), baseRun(testModel(t, srv), ts, nil))
		if !errors.Is(err, agents.ErrToolIterations) || srv.Count() != agents.DefaultMaxToolIterations+1 {
			t.Fatalf("error = %v after %d model calls", err, srv.Count())
		}
	})
}

func TestRunMessagesAndStreaming(t *testing.T) {
	clock := &countingTool{name: "clock", fn: func(context.Context, json.RawMessage) (string, error) { return "12:00", nil }}
	ts, _ := agents.NewToolset(clock)
	srv := llmtest.NewServer(t,
		llmtest.Calls(
			llmtest.ToolCall("a", "clock", `{}`),
			llmtest.ToolCall("b", "clock", `{"x":1}`),
		).WithText("Let me ", "check.").WithUsage(10, 5),
		llmtest.Text("It is ", "12:00.").WithUsage(20, 3),
	)
	var deltas []string
	var traced []string
	req := baseRun(testModel(t, srv), ts, nil)
	req.OnText = func(d string) { deltas = append(deltas, d) }
	req.OnToolCall = func(e hooks.ToolTraceEntry) { traced = append(traced, e.Tool+":"+e.Result) }
	orig := append([]agents.Message(nil), req.Messages...)
	res, err := agents.Run(turnCtx(t.Context()), req)
	if err != nil {
		t.Fatal(err)
	}
	wantDeltas := []string{"Let me ", "check.", agents.StepSeparator, "It is ", "12:00."}
	if strings.Join(deltas, "|") != strings.Join(wantDeltas, "|") {
		t.Errorf("deltas = %q, want %q", deltas, wantDeltas)
	}
	if res.Text != "Let me check.\n\nIt is 12:00." {
		t.Errorf("text = %q", res.Text)
	}
	want := []agents.Message{
		{Role: agents.RoleAssistant, Content: "Let me check.", ToolCalls: []agents.ToolCall{{ID: "a", Name: "clock", Arguments: "{}"}, {ID: "b", Name: "clock", Arguments: `{"x":1}`}}},
		{Role: agents.RoleTool, Content: "12:00", ToolCallID: "a"},
		{Role: agents.RoleTool, Content: "12:00", ToolCallID: "b"},
		{Role: agents.RoleAssistant, Content: "It is 12:00."},
	}
	if sprintf("%+v", res.Messages) != sprintf("%+v", want) {
		t.Errorf("messages =\n%+v\nwant\n%+v", res.Messages, want)
	}
	if res.Usage != (agents.Usage{PromptTokens: 30, CompletionTokens: 8, TotalTokens: 38}) || res.ModelCalls != 2 || res.FinishReason != agents.FinishStop {
		t.Errorf("usage %+v calls %d finish %q", res.Usage, res.ModelCalls, res.FinishReason)
	}
	if strings.Join(traced, ",") != "clock:12:00,clock:12:00" {
		t.Errorf("OnToolCall saw %v", traced)
	}
	if sprintf("%+v", req.Messages) != sprintf("%+v", orig) || len(req.Messages) != 2 {
		t.Errorf("Run changed the request's messages")
	}
	// The second request is the prompt followed by the turn's messages.
	second := srv.LastRequest(t).Body.Messages
	if len(second) != 2+3 || second[2].Role != "assistant" || second[3].ToolCallID != "a" || second[4].ToolCallID != "b" {
		t.Errorf("second request messages = %+v", second)
	}
}

func TestRunModelErrorKeepsPartialResult(t *testing.T) {
	_, ts := clockTools(t)
	srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("a", "clock", `{}`)), llmtest.HTTPError(503, "overloaded"))
	res, err := agents.Run(turnCtx(t.Context()), baseRun(testModel(t, srv), ts, nil))
	var me *agents.ModelError
	if !errors.As(err, &me) || me.StatusCode != 503 || !me.Retryable {
		t.Fatalf("error = %v", err)
	}
	if res == nil || len(res.ToolTrace) != 1 || res.ModelCalls != 2 {
		t.Errorf("result = %+v", res)
	}
}

func TestRunCancelledDuringTool(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	slow := &countingTool{name: "slow", fn: func(ctx context.Context, _ json.RawMessage) (string, error) {
		cancel()
		<-ctx.Done()
		return "", ctx.Err()
	}}
	ts, _ := agents.NewToolset(slow)
	srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("a", "slow", `{}`)))
	_, err := agents.Run(turnCtx(ctx), baseRun(testModel(t, srv), ts, nil))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if srv.Count() != 1 {
		t.Errorf("model called %d times after cancel", srv.Count())
	}
}

func TestRunGateFailClosed(t *testing.T) {
	reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("policy",
		hooks.Handle(hooks.ToolBeforeCall, "flaky", func(context.Context, *hooks.ToolBeforeCallContext) error {
			return errors.New("policy server down")
		}, hooks.WithFailurePolicy(hooks.FailClosed)),
	)})
	clock, ts := clockTools(t)
	srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("a", "clock", `{}`)), llmtest.Text("ok"))
	res, err := agents.Run(turnCtx(hooktest.Context(t)), baseRun(testModel(t, srv), ts, reg))
	if err != nil {
		t.Fatal(err)
	}
	msgs := srv.LastRequest(t).Body.Messages
	seen := string(msgs[len(msgs)-1].Content)
	if clock.calls.Load() != 0 || !strings.HasPrefix(seen, "[tool call declined]\nTool: clock\nReason: gate policy/flaky was unavailable") || !res.ToolTrace[0].Blocked {
		t.Errorf("calls %d, model saw %q", clock.calls.Load(), seen)
	}
}

func TestEmitEventFromTool(t *testing.T) {
	var got recorder[hooks.CustomEventContext]
	ev := hooks.MustCustomEvent("todo:added")
	reg := hooktest.NewRegistry(t, hooks.Handle(ev, "watch", func(_ context.Context, c *hooks.CustomEventContext) error {
		got.add(*c)
		return nil
	}))
	adder := &countingTool{name: "add_todo", fn: func(ctx context.Context, args json.RawMessage) (string, error) {
		if err := agents.EmitEvent(ctx, "todo:added", map[string]string{"item": "milk"}); err != nil {
			return "", err
		}
		return "added", nil
	}}
	ts, _ := agents.NewToolset(adder)
	srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("a", "add_todo", `{}`)), llmtest.Text("ok"))
	if _, err := agents.Run(turnCtx(hooktest.Context(t)), baseRun(testModel(t, srv), ts, reg)); err != nil {
		t.Fatal(err)
	}
	cs := got.all()
	if len(cs) != 1 || string(cs[0].Payload) != `{"item":"milk"}` || cs[0].Agent != hooktest.Agent || cs[0].RoomID != hooktest.Room ||
		cs[0].SenderID != hooktest.Sender || cs[0].CorrelationID != "corr-1" {
		t.Errorf("custom events = %+v", cs)
	}
	if err := agents.EmitEvent(t.Context(), "todo:added", nil); !errors.Is(err, hooks.ErrNoService) {
		t.Errorf("EmitEvent outside a tool = %v", err)
	}
}
