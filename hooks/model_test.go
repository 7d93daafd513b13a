package hooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// The static facts of the model events: name, mode, default timeout,
// listed among the built-ins, their namespaces reserved, and their
// designated fields.
func TestModelEventsFacts(t *testing.T) {
	cases := []struct {
		name    string
		mode    hooks.Mode
		timeout time.Duration
		ctx     hooks.Context
		fields  string
	}{
		{hooks.ModelResolve.Name(), hooks.ModelResolve.Mode(), hooks.ModelResolve.DefaultTimeout(), &hooks.ModelResolveContext{}, "model"},
		{hooks.ModelRequest.Name(), hooks.ModelRequest.Mode(), hooks.ModelRequest.DefaultTimeout(), &hooks.ModelRequestContext{}, "messages,tools,refused,refuse_reason"},
		{hooks.ModelResponse.Name(), hooks.ModelResponse.Mode(), hooks.ModelResponse.DefaultTimeout(), &hooks.ModelResponseContext{}, ""},
		{hooks.ToolResult.Name(), hooks.ToolResult.Mode(), hooks.ToolResult.DefaultTimeout(), &hooks.ToolResultContext{}, "content"},
		{hooks.UsageBudgetReached.Name(), hooks.UsageBudgetReached.Mode(), hooks.UsageBudgetReached.DefaultTimeout(), &hooks.BudgetReachedContext{}, ""},
	}
	want := map[string]struct {
		mode    hooks.Mode
		timeout time.Duration
	}{
		"model:resolve":        {hooks.Transformer, time.Second},
		"model:request":        {hooks.Transformer, time.Second},
		"model:response":       {hooks.Observer, time.Second},
		"tool:result":          {hooks.Transformer, 500 * time.Millisecond},
		"usage:budget_reached": {hooks.Observer, 3 * time.Second},
	}
	for _, tc := range cases {
		w, ok := want[tc.name]
		if !ok || tc.mode != w.mode || tc.timeout != w.timeout {
			t.Errorf("%s: mode %s timeout %s, want %+v", tc.name, tc.mode, tc.timeout, w)
		}
		if !slices.Contains(hooks.BuiltinEvents(), tc.name) {
			t.Errorf("BuiltinEvents lacks %s", tc.name)
		}
		var paths []string
		for _, f := range hooks.MutableFields(tc.ctx) {
			paths = append(paths, f.Path)
		}
		if got := strings.Join(paths, ","); got != tc.fields {
			t.Errorf("%s: designated fields %q, want %q", tc.name, got, tc.fields)
		}
	}
	for _, name := range []string{"model:mine", "usage:mine"} {
		if err := hooks.ValidateEventName(name); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("%s as a custom event: %v", name, err)
		}
	}
}

// logContext returns a context whose logger writes JSON lines to buf.
func logContext(buf *syncBuffer) context.Context {
	return zerolog.New(buf).WithContext(context.Background())
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// model:resolve: a hook chooses among the configured models; a choice of
// a model config.yaml does not define is that hook's error (logged,
// counted, dropped) and the next hook sees the model the hooks before it
// left. ResolveModel takes the conversation from the context.
func TestModelResolve(t *testing.T) {
	choose := func(model string) func(context.Context, *hooks.ModelResolveContext) error {
		return func(_ context.Context, c *hooks.ModelResolveContext) error {
			c.Model = model
			return nil
		}
	}
	cheapForLongTexts := func(_ context.Context, c *hooks.ModelResolveContext) error {
		if len(c.Text) > 20 && c.Source == hooks.ModelFromConfig {
			c.Model = "cheap"
		}
		return nil
	}
	models := []string{"smart", "cheap", "default"}
	cases := []struct {
		name      string
		choice    hooks.ModelChoice
		hooks     []func(context.Context, *hooks.ModelResolveContext) error
		want      string
		wantError string // logged
	}{
		{name: "no hooks: configured", choice: hooks.ModelChoice{Configured: "default", Models: models}, want: "default"},
		{name: "no hooks: the thread's choice", choice: hooks.ModelChoice{Configured: "default", Requested: "smart", Source: hooks.ModelFromThread, Models: models}, want: "smart"},
		{name: "hook chooses", choice: hooks.ModelChoice{Configured: "default", Models: models}, hooks: []func(context.Context, *hooks.ModelResolveContext) error{choose("smart")}, want: "smart"},
		{name: "routes by content", choice: hooks.ModelChoice{Text: "a very long question about many things", Configured: "default", Models: models},
			hooks: []func(context.Context, *hooks.ModelResolveContext) error{cheapForLongTexts}, want: "cheap"},
		{name: "respects the person's choice", choice: hooks.ModelChoice{Text: "a very long question about many things", Configured: "default", Requested: "smart", Source: hooks.ModelFromRoom, Models: models},
			hooks: []func(context.Context, *hooks.ModelResolveContext) error{cheapForLongTexts}, want: "smart"},
		{name: "unknown model is the hook's error", choice: hooks.ModelChoice{Configured: "default", Models: models},
			hooks: []func(context.Context, *hooks.ModelResolveContext) error{choose("gpt-9")}, want: "default",
			wantError: `the hook chose model \"gpt-9\", which is not configured (configured: cheap, default, smart)`},
		{name: "the next hook sees the last good choice", choice: hooks.ModelChoice{Configured: "default", Models: models},
			hooks: []func(context.Context, *hooks.ModelResolveContext) error{choose("cheap"), choose("gpt-9"), func(_ context.Context, c *hooks.ModelResolveContext) error {
				if c.Model != "cheap" {
					c.Model = "smart" // wrong: the failed hook's choice leaked
				}
				return nil
			}}, want: "cheap", wantError: "gpt-9"},
		{name: "a stale choice is ignored", choice: hooks.ModelChoice{Text: "hi", Configured: "default", Requested: "removed", Source: hooks.ModelFromRoom, Models: models},
			want: "default"},
		{name: "a stale choice is ignored, also with hooks", choice: hooks.ModelChoice{Text: "hi", Configured: "default", Requested: "removed", Source: hooks.ModelFromRoom, Models: models},
			hooks: []func(context.Context, *hooks.ModelResolveContext) error{func(_ context.Context, c *hooks.ModelResolveContext) error {
				if c.Source != hooks.ModelFromConfig || c.Requested != "" {
					return errors.New("the hook saw the stale choice")
				}
				return nil
			}}, want: "default"},
		{name: "empty model is refused too", choice: hooks.ModelChoice{Configured: "default", Models: models},
			hooks: []func(context.Context, *hooks.ModelResolveContext) error{choose("")}, want: "default", wantError: "not configured"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var hs []hooks.Hook
			var seen []hooks.Where
			for i, fn := range tc.hooks {
				hs = append(hs, hooks.Handle(hooks.ModelResolve, "h"+string(rune('a'+i)), func(ctx context.Context, c *hooks.ModelResolveContext) error {
					seen = append(seen, c.Where)
					return fn(ctx, c)
				}))
			}
			reg := hooktest.NewRegistry(t, hs...)
			var logs syncBuffer
			ctx := hooks.WithWhere(logContext(&logs), hooktest.Where())
			got, err := hooks.ResolveModel(ctx, reg, tc.choice)
			if err != nil || got != tc.want {
				t.Errorf("ResolveModel = %q, %v; want %q", got, err, tc.want)
			}
			for _, w := range seen {
				if w != hooktest.Where() {
					t.Errorf("hook saw %+v, want the context's Where", w)
				}
			}
			var errs uint64
			for _, s := range reg.Stats() {
				errs += s.Errors
			}
			if tc.wantError == "" {
				if errs != 0 {
					t.Errorf("%d hook errors, want none; log:\n%s", errs, logs.String())
				}
				return
			}
			if errs != 1 || !strings.Contains(logs.String(), tc.wantError) {
				t.Errorf("errors=%d, log lacks %q:\n%s", errs, tc.wantError, logs.String())
			}
		})
	}
}

// model:request: hooks redact, add messages and remove tools on their own
// copies; a refusal stops the chain; a message with an unknown role fails
// the hook; the caller's messages are never written in place.
func TestModelRequest(t *testing.T) {
	redact := hooks.Handle(hooks.ModelRequest, "redact", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.ReplaceText("hunter2", "[secret]")
		return nil
	})
	noShell := hooks.Handle(hooks.ModelRequest, "no_shell", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.RemoveTool("shell")
		return nil
	})
	addNote := hooks.Handle(hooks.ModelRequest, "note", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.Messages = append(c.Messages, hooks.ChatMessage{Role: hooks.RoleSystem, Content: "Be brief."})
		return nil
	})
	refuse := hooks.Handle(hooks.ModelRequest, "refuse", func(_ context.Context, c *hooks.ModelRequestContext) error {
		if strings.Contains(c.Messages[len(c.Messages)-1].Content, "forbidden") {
			c.Refuse("this topic is off limits")
		}
		return nil
	})
	badRole := hooks.Handle(hooks.ModelRequest, "bad_role", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.Messages[0].Role = "developer"
		c.Messages[1].Content = "leaked"
		return nil
	})
	var after []string
	witness := hooks.Handle(hooks.ModelRequest, "witness", func(_ context.Context, c *hooks.ModelRequestContext) error {
		after = append(after, c.Messages[1].Content)
		return nil
	})
	cases := []struct {
		name        string
		hooks       []hooks.Hook
		text        string
		wantLast    string
		wantCount   int
		wantTools   string
		wantRefused string
		wantSeen    string // what witness saw
	}{
		{name: "redaction", hooks: []hooks.Hook{redact}, text: "my password is hunter2", wantLast: "my password is [secret]", wantCount: 2, wantTools: "shell,clock"},
		{name: "tool removed", hooks: []hooks.Hook{noShell}, text: "hi", wantLast: "hi", wantCount: 2, wantTools: "clock"},
		{name: "message added", hooks: []hooks.Hook{addNote}, text: "hi", wantLast: "Be brief.", wantCount: 3, wantTools: "shell,clock"},
		{name: "refusal stops the chain", hooks: []hooks.Hook{refuse, witness}, text: "a forbidden thing", wantLast: "a forbidden thing", wantCount: 2, wantTools: "shell,clock", wantRefused: "this topic is off limits"},
		{name: "no refusal: the chain goes on", hooks: []hooks.Hook{refuse, witness}, text: "fine", wantLast: "fine", wantCount: 2, wantTools: "shell,clock", wantSeen: "fine"},
		{name: "unknown role fails the hook", hooks: []hooks.Hook{badRole, witness}, text: "hi", wantLast: "hi", wantCount: 2, wantTools: "shell,clock", wantSeen: "hi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			after = nil
			reg := hooktest.NewRegistry(t, tc.hooks...)
			c := hooktest.ModelRequest(tc.text, "shell", "clock")
			orig := c.Messages
			origJSON, _ := json.Marshal(orig)
			hooktest.Emit(t, reg, hooks.ModelRequest, c)
			if n := len(c.Messages); n != tc.wantCount || c.Messages[n-1].Content != tc.wantLast {
				t.Errorf("messages %+v, want %d ending in %q", c.Messages, tc.wantCount, tc.wantLast)
			}
			var names []string
			for _, tool := range c.Tools {
				names = append(names, tool.Name)
			}
			if got := strings.Join(names, ","); got != tc.wantTools {
				t.Errorf("tools %s, want %s", got, tc.wantTools)
			}
			if c.Refused != (tc.wantRefused != "") || c.RefuseReason != tc.wantRefused {
				t.Errorf("refused=%v %q, want %q", c.Refused, c.RefuseReason, tc.wantRefused)
			}
			if got := strings.Join(after, ","); got != tc.wantSeen {
				t.Errorf("the witness saw %q, want %q", got, tc.wantSeen)
			}
			if j, _ := json.Marshal(orig); !bytes.Equal(j, origJSON) {
				t.Errorf("the caller's messages were written in place:\n%s\n%s", origJSON, j)
			}
		})
	}
}

// tool:result: a hook replaces the content; a failing hook's replacement
// is dropped and the next hook gets the previous content.
func TestToolResult(t *testing.T) {
	mask := hooks.Handle(hooks.ToolResult, "mask", func(_ context.Context, c *hooks.ToolResultContext) error {
		c.Content = strings.ReplaceAll(c.Content, "AKIA1234", "AKIA****")
		return nil
	})
	broken := hooks.Handle(hooks.ToolResult, "broken", func(_ context.Context, c *hooks.ToolResultContext) error {
		c.Content = "garbage"
		return context.DeadlineExceeded
	})
	cases := []struct {
		name  string
		hooks []hooks.Hook
		want  string
	}{
		{"masked", []hooks.Hook{mask}, "key=AKIA****"},
		{"failed hook dropped", []hooks.Hook{broken, mask}, "key=AKIA****"},
		{"only a failed hook", []hooks.Hook{broken}, "key=AKIA1234"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := hooktest.NewRegistry(t, tc.hooks...)
			c := hooktest.ToolResult("env", "", "key=AKIA1234")
			hooktest.Emit(t, reg, hooks.ToolResult, c)
			if c.Content != tc.want {
				t.Errorf("content %q, want %q", c.Content, tc.want)
			}
		})
	}
}

// The model events route by the embedded Where: agents= and rooms=
// filters match it, and their JSON flattens it.
func TestModelEventsRouteByWhere(t *testing.T) {
	var ran []string
	observe := func(name string) hooks.Hook {
		return hooks.Handle(hooks.ModelResponse, name, func(context.Context, *hooks.ModelResponseContext) error {
			ran = append(ran, name)
			return nil
		}, hooks.Agents(hooktest.Agent))
	}
	other := hooks.Handle(hooks.ModelResponse, "other", func(context.Context, *hooks.ModelResponseContext) error {
		ran = append(ran, "other")
		return nil
	}, hooks.Agents("coder"))
	budget := hooks.Handle(hooks.UsageBudgetReached, "budget", func(_ context.Context, c *hooks.BudgetReachedContext) error {
		ran = append(ran, "budget:"+string(c.Person()))
		return nil
	}, hooks.Rooms(hooktest.Room))
	reg := hooktest.NewRegistry(t, observe("mine"), other, budget)
	hooktest.Emit(t, reg, hooks.ModelResponse, hooktest.ModelResponse("hello"))
	hooktest.Emit(t, reg, hooks.UsageBudgetReached, hooktest.BudgetReached(hooks.BudgetPerson, 1000, 800, 0.8))
	if got := strings.Join(ran, ","); got != "mine,budget:"+string(hooktest.Sender) {
		t.Errorf("ran %s", got)
	}
	raw, _ := json.Marshal(hooktest.ModelResponse("hello"))
	for _, want := range []string{`"agent":"assistant"`, `"room_id":"!room:localhost"`, `"latency_ns":250000000`, `"round":1`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("JSON lacks %s: %s", want, raw)
		}
	}
}

// The check blames only a hook that changed the model: one that leaves a
// model it got alone (even one config.yaml no longer defines) succeeds.
func TestModelResolveCheckBlamesTheChange(t *testing.T) {
	keep := hooks.Handle(hooks.ModelResolve, "keep", func(context.Context, *hooks.ModelResolveContext) error { return nil })
	reg := hooktest.NewRegistry(t, keep)
	c := hooktest.ModelResolve("hi", "default", "default", "cheap")
	c.Model = "removed"
	hooktest.Emit(t, reg, hooks.ModelResolve, c)
	if s := reg.Stats()[0]; s.Errors != 0 || s.Invocations != 1 || c.Model != "removed" {
		t.Errorf("stats %+v, model %q", s, c.Model)
	}
}

// Subscribed is Has for a typed event.
func TestSubscribed(t *testing.T) {
	nop := func(context.Context, *hooks.ModelRequestContext) error { return nil }
	todo := hooks.MustCustomEvent("todo:done")
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.ModelRequest, "r", nop),
		hooks.Handle(todo, "c", func(context.Context, *hooks.CustomEventContext) error { return nil }))
	cases := []struct {
		name string
		got  bool
		want bool
	}{
		{"nil registry", hooks.Subscribed(nil, hooks.ModelRequest), false},
		{"registered", hooks.Subscribed(reg, hooks.ModelRequest), true},
		{"other event", hooks.Subscribed(reg, hooks.ModelResponse), false},
		{"custom", hooks.Subscribed(reg, todo), true},
		{"other custom", hooks.Subscribed(reg, hooks.MustCustomEvent("todo:other")), false},
		{"empty registry", hooks.Subscribed(hooktest.NewRegistry(t), hooks.ModelRequest), false},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
		if tc.name == "registered" && tc.got != reg.Has("model:request") {
			t.Errorf("Subscribed and Has disagree")
		}
	}
}
