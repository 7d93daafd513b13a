package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// modelRun is baseRun with the model's names set, asking "password".
func modelRun(m agents.Model, ts *agents.Toolset, reg *hooks.Registry, question string) agents.RunRequest {
	req := baseRun(m, ts, reg)
	req.ModelName, req.ProviderModel = "default", "test-model"
	req.Messages[1].Content = question
	return req
}

// model:request before every model call of the tool loop: what the hooks
// leave is what the scripted server receives; a refusal ends the run with
// a *RefusedError and no model call for that round.
func TestRunModelRequest(t *testing.T) {
	redact := hooks.Handle(hooks.ModelRequest, "redact", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.ReplaceText("hunter2", "[secret]")
		return nil
	})
	noClock := hooks.Handle(hooks.ModelRequest, "no_clock", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.RemoveTool("clock")
		return nil
	})
	brief := hooks.Handle(hooks.ModelRequest, "brief", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.Messages = append(c.Messages, hooks.ChatMessage{Role: hooks.RoleSystem, Content: "Be brief."})
		return nil
	})
	refuseFirst := hooks.Handle(hooks.ModelRequest, "refuse", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.Refuse("questions about passwords are not allowed")
		return nil
	})
	refuseSecond := hooks.Handle(hooks.ModelRequest, "refuse_later", func(_ context.Context, c *hooks.ModelRequestContext) error {
		if c.Round == 2 {
			c.Refuse("")
		}
		return nil
	})
	toolThenText := []llmtest.Reply{llmtest.Calls(llmtest.ToolCall("call_1", "clock", `{}`)), llmtest.Text("It is noon.")}
	cases := []struct {
		name        string
		hook        hooks.Hook
		replies     []llmtest.Reply
		wantCalls   int    // requests the server received
		wantRan     int32  // clock calls
		wantRefused string // the *RefusedError's reason
		check       func(t *testing.T, reqs []llmtest.Request, res *agents.RunResult)
	}{
		{name: "redaction reaches the wire in every round", hook: redact, replies: toolThenText, wantCalls: 2, wantRan: 1,
			check: func(t *testing.T, reqs []llmtest.Request, res *agents.RunResult) {
				for i, r := range reqs {
					if bytes.Contains(r.Raw, []byte("hunter2")) {
						t.Errorf("request %d carries the secret: %s", i, r.Raw)
					}
					if got := string(r.Body.Messages[1].Content); got != "my password is [secret], what time is it?" {
						t.Errorf("request %d user message %q", i, got)
					}
				}
				if len(reqs[1].Body.Messages) != 4 || reqs[1].Body.Messages[3].ToolCallID != "call_1" {
					t.Errorf("second request lost the tool round: %+v", reqs[1].Body.Messages)
				}
			}},
		{name: "tool removed is neither offered nor run", hook: noClock, replies: toolThenText, wantCalls: 2, wantRan: 0,
			check: func(t *testing.T, reqs []llmtest.Request, res *agents.RunResult) {
				if reqs[0].HasTool("clock") || len(reqs[0].Body.Tools) != 0 {
					t.Errorf("tools offered: %+v", reqs[0].Body.Tools)
				}
				if got := string(reqs[1].Body.Messages[3].Content); !strings.Contains(got, `there is no tool called "clock". Available tools: none.`) {
					t.Errorf("the model was told %q", got)
				}
			}},
		{name: "message added", hook: brief, replies: []llmtest.Reply{llmtest.Text("Noon.")}, wantCalls: 1,
			check: func(t *testing.T, reqs []llmtest.Request, res *agents.RunResult) {
				msgs := reqs[0].Body.Messages
				if len(msgs) != 3 || msgs[2].Role != "system" || msgs[2].Content != "Be brief." {
					t.Errorf("messages sent: %+v", msgs)
				}
				if len(res.Messages) != 1 || res.Messages[0].Content != "Noon." {
					t.Errorf("the run's messages: %+v", res.Messages)
				}
			}},
		{name: "refused: no model call", hook: refuseFirst, wantCalls: 0, wantRefused: "questions about passwords are not allowed"},
		{name: "refused in the second round", hook: refuseSecond, replies: toolThenText[:1], wantCalls: 1, wantRan: 1, wantRefused: "the request was refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seen recorder[hooks.ModelRequestContext]
			look := hooks.Handle(hooks.ModelRequest, "look", func(_ context.Context, c *hooks.ModelRequestContext) error {
				seen.add(*c)
				return nil
			}, hooks.Priority(1))
			reg := hooktest.NewRegistry(t, look, tc.hook)
			clock, ts := clockTools(t)
			srv := llmtest.NewServer(t, tc.replies...)
			req := modelRun(testModel(t, srv), ts, reg, "my password is hunter2, what time is it?")
			res, err := agents.Run(turnCtx(hooktest.Context(t)), req)
			var refused *agents.RefusedError
			switch {
			case tc.wantRefused == "" && err != nil:
				t.Fatalf("Run: %v", err)
			case tc.wantRefused != "" && (!errors.As(err, &refused) || !errors.Is(err, agents.ErrRequestRefused) || refused.Reason != tc.wantRefused):
				t.Fatalf("Run = %v, want a refusal %q", err, tc.wantRefused)
			}
			if n := srv.Count(); n != tc.wantCalls || res.ModelCalls != tc.wantCalls {
				t.Errorf("model calls: server %d, result %d; want %d", n, res.ModelCalls, tc.wantCalls)
			}
			if n := clock.calls.Load(); n != tc.wantRan {
				t.Errorf("clock ran %d times, want %d", n, tc.wantRan)
			}
			if got := req.Messages[1].Content; got != "my password is hunter2, what time is it?" {
				t.Errorf("the caller's prompt changed: %q", got)
			}
			// The hook-facing context: the turn, the model, the round, the
			// prompt as it is, and the tools offered.
			all := seen.all()
			if len(all) == 0 {
				t.Fatal("model:request never fired")
			}
			first := all[0]
			if first.Where != (hooks.Where{Agent: hooktest.Agent, RoomID: hooktest.Room, ThreadID: hooktest.EventID, RequesterID: hooktest.Sender, SessionID: "session-1"}) ||
				first.Model != "default" || first.ProviderModel != "test-model" || first.Round != 1 || first.CorrelationID != "corr-1" {
				t.Errorf("context = %+v", first)
			}
			if len(first.Messages) != 2 || first.Messages[0].Role != hooks.RoleSystem || !strings.Contains(first.Messages[1].Content, "hunter2") {
				t.Errorf("messages seen = %+v", first.Messages)
			}
			if len(first.Tools) != 1 || first.Tools[0].Name != "clock" || string(first.Tools[0].Parameters) != `{"type":"object"}` {
				t.Errorf("tools seen = %+v", first.Tools)
			}
			if len(all) > 1 {
				m := all[1].Messages
				if all[1].Round != 2 || len(m) != 4 || m[2].Role != hooks.RoleAssistant || len(m[2].ToolCalls) != 1 || m[3].ToolCallID != "call_1" {
					t.Errorf("second round seen = %+v", all[1])
				}
			}
			if tc.check != nil {
				tc.check(t, srv.Requests(), res)
			}
		})
	}
}

// A model:request hook that changes nothing leaves the request byte for
// byte as without hooks, images included; a redaction keeps the user
// message's images.
func TestRunModelRequestKeepsWhatHooksDoNotSee(t *testing.T) {
	img := agents.Image{MimeType: "image/png", Data: []byte("\x89PNG fake")}
	run := func(t *testing.T, reg *hooks.Registry) llmtest.Request {
		srv := llmtest.NewServer(t, llmtest.Text("A cat."))
		_, ts := clockTools(t)
		req := modelRun(testModel(t, srv), ts, reg, "what is on this picture? hunter2")
		req.Messages[1].Images = []agents.Image{img}
		if _, err := agents.Run(turnCtx(hooktest.Context(t)), req); err != nil {
			t.Fatal(err)
		}
		return srv.LastRequest(t)
	}
	plain := run(t, nil)
	idle := run(t, hooktest.NewRegistry(t, hooks.Handle(hooks.ModelRequest, "idle", func(context.Context, *hooks.ModelRequestContext) error { return nil })))
	if !bytes.Equal(plain.Raw, idle.Raw) {
		t.Errorf("an idle hook changed the request:\n%s\n%s", plain.Raw, idle.Raw)
	}
	redacted := run(t, hooktest.NewRegistry(t, hooks.Handle(hooks.ModelRequest, "redact", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.ReplaceText("hunter2", "[secret]")
		return nil
	})))
	parts := redacted.LastUserParts()
	if len(parts) != 2 || parts[0].Text != "what is on this picture? [secret]" || parts[1].ImageURL != img.DataURL() {
		t.Errorf("redacted user message parts = %+v", parts)
	}
}

// model:response after every model call: text, tool calls, usage,
// latency, round, finish reason; a failed call with its error.
func TestRunModelResponse(t *testing.T) {
	cases := []struct {
		name    string
		replies []llmtest.Reply
		wantErr bool
		check   func(t *testing.T, got []hooks.ModelResponseContext)
	}{
		{name: "every round", replies: []llmtest.Reply{
			llmtest.Calls(llmtest.ToolCall("call_1", "clock", `{"tz":"UTC"}`)).WithUsage(20, 5).WithDelay(30 * time.Millisecond),
			llmtest.Text("It is ", "noon.").WithCachedUsage(40, 16, 4),
		}, check: func(t *testing.T, got []hooks.ModelResponseContext) {
			if len(got) != 2 {
				t.Fatalf("model:response fired %d times, want 2", len(got))
			}
			a, b := got[0], got[1]
			if a.Round != 1 || a.FinishReason != "tool_calls" || len(a.ToolCalls) != 1 || a.ToolCalls[0].Name != "clock" || a.ToolCalls[0].Arguments != `{"tz":"UTC"}` {
				t.Errorf("first call = %+v", a)
			}
			if a.Usage != (hooks.TokenUsage{Model: "test-model", InputTokens: 20, OutputTokens: 5, TotalTokens: 25, ModelCalls: 1}) {
				t.Errorf("first usage = %+v", a.Usage)
			}
			if a.Latency < 30*time.Millisecond {
				t.Errorf("first latency %s, want at least the server's 30ms delay", a.Latency)
			}
			if b.Round != 2 || b.Text != "It is noon." || b.FinishReason != "stop" || b.Error != "" || b.Latency <= 0 {
				t.Errorf("second call = %+v", b)
			}
			if b.Usage.InputTokens != 40 || b.Usage.CachedTokens != 16 || b.Usage.OutputTokens != 4 {
				t.Errorf("second usage = %+v", b.Usage)
			}
			if a.Model != "default" || a.ProviderModel != "test-model" || a.Agent != hooktest.Agent || a.CorrelationID != "corr-1" {
				t.Errorf("identity = %+v", a)
			}
		}},
		{name: "failed call", replies: []llmtest.Reply{llmtest.HTTPError(503, "overloaded")}, wantErr: true,
			check: func(t *testing.T, got []hooks.ModelResponseContext) {
				if len(got) != 1 || got[0].ErrorKind != "http" || !strings.Contains(got[0].Error, "503") || got[0].Round != 1 {
					t.Errorf("model:response = %+v", got)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var seen recorder[hooks.ModelResponseContext]
			reg := hooktest.NewRegistry(t, hooks.Handle(hooks.ModelResponse, "meter", func(_ context.Context, c *hooks.ModelResponseContext) error {
				seen.add(*c)
				return nil
			}))
			srv := llmtest.NewServer(t, tc.replies...)
			_, ts := clockTools(t)
			_, err := agents.Run(turnCtx(hooktest.Context(t)), modelRun(testModel(t, srv), ts, reg, "What time is it?"))
			if (err != nil) != tc.wantErr {
				t.Fatalf("Run: %v", err)
			}
			tc.check(t, seen.all())
		})
	}
}

// tool:result: a hook's replacement is what the model's next request and
// RunResult.Messages (the history) hold, and the trace's result;
// tool:after_call saw the tool's own output.
func TestRunToolResult(t *testing.T) {
	mask := func(_ context.Context, c *hooks.ToolResultContext) error {
		c.Content = strings.ReplaceAll(c.Content, "AKIA1234SECRET", "AKIA****")
		return nil
	}
	empty := func(_ context.Context, c *hooks.ToolResultContext) error {
		c.Content = ""
		return nil
	}
	cases := []struct {
		name      string
		hook      func(context.Context, *hooks.ToolResultContext) error
		out       string
		wantModel string // the tool message of the second request
		wantTrace string
	}{
		{"masked", mask, "key=AKIA1234SECRET", "key=AKIA****", "key=AKIA****"},
		{"untouched", mask, "no secrets", "no secrets", "no secrets"},
		{"emptied", empty, "key=AKIA1234SECRET", "(the tool returned no output)", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var (
				results recorder[hooks.ToolResultContext]
				after   recorder[hooks.ToolAfterCallContext]
			)
			reg := hooktest.NewRegistry(t,
				hooks.Handle(hooks.ToolAfterCall, "audit", func(_ context.Context, c *hooks.ToolAfterCallContext) error {
					after.add(*c)
					return nil
				}),
				hooks.Handle(hooks.ToolResult, "look", func(_ context.Context, c *hooks.ToolResultContext) error {
					results.add(*c)
					return nil
				}, hooks.Priority(1)),
				hooks.Handle(hooks.ToolResult, "hook", tc.hook),
			)
			clock, ts := clockTools(t)
			clock.fn = func(context.Context, json.RawMessage) (string, error) { return tc.out, nil }
			srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("call_7", "clock", `{}`)), llmtest.Text("Done."))
			res, err := agents.Run(turnCtx(hooktest.Context(t)), modelRun(testModel(t, srv), ts, reg, "Show the env."))
			if err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			msgs := reqs[1].Body.Messages
			if got := string(msgs[len(msgs)-1].Content); got != tc.wantModel {
				t.Errorf("the model read %q, want %q", got, tc.wantModel)
			}
			if len(res.Messages) != 3 || res.Messages[1].Role != agents.RoleTool || res.Messages[1].Content != tc.wantModel {
				t.Errorf("the run's messages = %+v", res.Messages)
			}
			if len(res.ToolTrace) != 1 || res.ToolTrace[0].Result != tc.wantTrace {
				t.Errorf("trace = %+v", res.ToolTrace)
			}
			if a := after.all(); len(a) != 1 || a[0].Result != tc.out {
				t.Errorf("tool:after_call saw %+v, want the tool's own output", a)
			}
			r := results.all()
			if len(r) != 1 || r[0].Content != tc.out || r[0].CallID != "call_7" || r[0].Tool != "clock" || r[0].Agent != hooktest.Agent || r[0].Blocked {
				t.Errorf("tool:result context = %+v", r)
			}
		})
	}
}

// A tool:result hook sees what the model is told of a declined call.
func TestRunToolResultOfDeclinedCall(t *testing.T) {
	var seen recorder[hooks.ToolResultContext]
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.ToolBeforeCall, "gate", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
			c.Decline("not now")
			return nil
		}),
		hooks.Handle(hooks.ToolResult, "look", func(_ context.Context, c *hooks.ToolResultContext) error {
			seen.add(*c)
			return nil
		}),
	)
	_, ts := clockTools(t)
	srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("call_1", "clock", `{}`)), llmtest.Text("Sorry."))
	if _, err := agents.Run(turnCtx(hooktest.Context(t)), modelRun(testModel(t, srv), ts, reg, "time?")); err != nil {
		t.Fatal(err)
	}
	got := seen.all()
	if len(got) != 1 || !got[0].Blocked || got[0].Content != agents.DeclinedResult("clock", "not now") || got[0].Error != "declined: not now" {
		t.Errorf("tool:result = %+v", got)
	}
}
