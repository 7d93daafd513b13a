package bot

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
)

// Choosing the model from chat and from hooks, on a real homeserver: a
// thread switched with `!model big` runs on big, other threads stay on the
// agent's model; a model:resolve hook routes a message to another model and
// sees the `!model` choice; `!model room` sets the room's default and
// `!model reset` undoes a thread's choice. usage:budget_reached fires once
// for the turn that crosses a share of the person's daily budget.
func TestModelChoiceAndBudgetAlert(t *testing.T) {
	var (
		mu       sync.Mutex
		resolved []hooks.ModelResolveContext
		alerts   []hooks.BudgetReachedContext
	)
	router := hooks.Handle(hooks.ModelResolve, "router", func(_ context.Context, c *hooks.ModelResolveContext) error {
		mu.Lock()
		resolved = append(resolved, *c)
		mu.Unlock()
		if strings.Contains(c.Text, "hard question") {
			c.Model = "big"
		}
		return nil
	})
	alert := hooks.Handle(hooks.UsageBudgetReached, "alert", func(_ context.Context, c *hooks.BudgetReachedContext) error {
		mu.Lock()
		alerts = append(alerts, *c)
		mu.Unlock()
		return nil
	})
	e := newTurnEnvWith(t, func(e *turnEnv) {
		e.cfg = strings.Replace(e.cfg, "models:\n", "models:\n  big:\n    provider: openai\n    base_url: "+e.llm.URL+"\n    model: big-model\n", 1)
		e.cfg += "usage:\n  daily_tokens_per_user: 1000\n  alert_at: [0.5]\n"
	}, "", []string{"helper"}, "", router, alert)
	modelOf := func(i int) string {
		t.Helper()
		reqs := e.llm.Requests()
		if i >= len(reqs) {
			t.Fatalf("%d model requests, want more than %d", len(reqs), i)
		}
		return reqs[i].Body.Model
	}
	e.llm.Script(
		llmtest.Text("On the agent's model.").WithUsage(100, 20),
		llmtest.Text("On big, by !model.").WithUsage(300, 200),
		llmtest.Text("On big, by a hook.").WithUsage(10, 10),
		llmtest.Text("On big, the room's default.").WithUsage(10, 10),
	)
	q1 := e.say("hello", "")
	e.waitTerminal(1)
	if got := modelOf(0); got != "agent-model" {
		t.Fatalf("first turn on %q, want agent-model", got)
	}

	// !model big in the thread: the thread's next turn runs on big.
	e.say("!model big", q1)
	waitMessageFrom(t, e.person, e.room, e.userID("router"), "this thread runs on **big**")
	e.say("and now?", q1)
	e.waitTerminal(2)
	if got := modelOf(1); got != "big-model" {
		t.Errorf("turn after !model big on %q, want big-model", got)
	}
	mu.Lock()
	if r := resolved[len(resolved)-1]; r.Requested != "big" || r.Source != hooks.ModelFromThread || r.Configured != "agent" {
		t.Errorf("model:resolve saw %+v, want the thread's choice big over agent", r)
	}
	// The second turn took the person past half of 1000 tokens: one alert.
	if len(alerts) != 1 || alerts[0].Scope != hooks.BudgetPerson || alerts[0].Threshold != 0.5 || alerts[0].Used != 620 ||
		alerts[0].Subject != string(e.person.UserID) {
		t.Errorf("budget alerts %+v, want one for the person at 0.5 with 620 used", alerts)
	}
	mu.Unlock()

	// A new thread is on the agent's model, unless a hook routes it.
	e.say("a hard question", "")
	e.waitTerminal(3)
	if got := modelOf(2); got != "big-model" {
		t.Errorf("the hook's choice: turn on %q, want big-model", got)
	}

	// The room's default applies to new threads; reset is per thread.
	e.say("!model room big", "")
	waitMessageFrom(t, e.person, e.room, e.userID("router"), "this room runs on **big**")
	e.say("!model reset", q1)
	waitMessageFrom(t, e.person, e.room, e.userID("router"), "the room's default, **big**, applies")
	e.say("easy one", "")
	e.waitTerminal(4)
	if got := modelOf(3); got != "big-model" {
		t.Errorf("turn in a new thread after !model room big on %q, want big-model", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(alerts); n != 1 {
		t.Errorf("%d budget alerts, want still 1 (the share is crossed once a day)", n)
	}
	if r := resolved[len(resolved)-1]; r.Source != hooks.ModelFromRoom {
		t.Errorf("model:resolve saw source %q, want room", r.Source)
	}
	if got := e.llm.Unscripted(); got != 0 {
		t.Errorf("%d unscripted model requests", got)
	}
}

// The model's traffic seen by hooks on a real homeserver: a model:request
// hook's redaction is what the model server receives (the person's message
// in the room and in the stored history keep the original); a tool:result
// hook's mask is what the model's next request and the thread's stored
// history hold; a model:request refusal ends the turn with its reason.
func TestModelRequestAndToolResultHooks(t *testing.T) {
	redact := hooks.Handle(hooks.ModelRequest, "redact", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.ReplaceText("4111-1111-1111-1111", "[card number]")
		if c.Round == 1 && len(c.Messages) > 0 && strings.Contains(c.Messages[len(c.Messages)-1].Content, "forbidden topic") {
			c.Refuse("this assistant does not discuss that")
		}
		return nil
	})
	mask := hooks.Handle(hooks.ToolResult, "mask", func(_ context.Context, c *hooks.ToolResultContext) error {
		c.Content = strings.ReplaceAll(c.Content, "T", "*")
		return nil
	})
	e := newTurnEnv(t, []string{"helper"}, "    tools: [current_time]\n", redact, mask)
	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("c1", "current_time", `{}`)),
		llmtest.Text("Noted."),
	)
	q := e.say("my card is 4111-1111-1111-1111, what time is it?", "")
	e.waitTerminal(1)
	reqs := e.llm.Requests()
	for i, r := range reqs {
		if strings.Contains(string(r.Raw), "4111-1111") {
			t.Errorf("model request %d holds the card number", i)
		}
	}
	if !strings.Contains(string(reqs[0].Raw), "[card number]") {
		t.Errorf("the first request lacks the redaction:\n%s", reqs[0].Raw)
	}
	tool := lastToolMessage(e, 1)
	if tool == "" || strings.Contains(tool, "T") {
		t.Errorf("the tool result the model got is not masked: %q", tool)
	}
	checkStoredToolMasked(t, e.history(q))

	// A refusal: no model call, the person reads the reason.
	before := e.llm.Count()
	e.say("tell me about the forbidden topic", "")
	if got := e.waitTerminal(2); got[1] != "cancelled:model_error" {
		t.Fatalf("terminal %v, want the refused turn cancelled", got)
	}
	if n := e.llm.Count(); n != before {
		t.Errorf("%d model calls for a refused request", n-before)
	}
	waitMessageFrom(t, e.person, e.room, e.userID("helper"), "this assistant does not discuss that")
}

// checkStoredToolMasked fails t unless the stored history holds a tool
// message and none holds the unmasked time (the mask hook turns "T" into "*").
func checkStoredToolMasked(t *testing.T, stored []agents.Message) {
	t.Helper()
	var sawTool bool
	for _, m := range stored {
		if m.Role == "tool" {
			sawTool = true
			if strings.Contains(m.Content, "T") {
				t.Errorf("the stored history holds the unmasked tool result %q", m.Content)
			}
		}
	}
	if !sawTool {
		t.Errorf("the stored history of the thread has no tool message: %+v", stored)
	}
}
