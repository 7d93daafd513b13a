package bot

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// People steer the model from the clients they use, in an encrypted room:
// alice (matrix-nio with libolm) says `!model big` in her thread, and only
// that thread's next request is on big; bob (matrix-js-sdk with its Rust
// crypto, Element's stack) asks in his own thread, on the agent's model,
// and the card number he types reaches the model server redacted by a
// model:request hook, as does everything after; bob's "hard question" is
// routed to big by a model:resolve hook over the agent's model; a tool's
// output masked by a tool:result hook is what the model and the stored
// history get.
func TestModelCommandFromIndependentClients(t *testing.T) {
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice := e.hs.RegisterUser(t, "alice")
	bob := e.hs.RegisterUser(t, "bob")
	redact := hooks.Handle(hooks.ModelRequest, "redact", func(_ context.Context, c *hooks.ModelRequestContext) error {
		c.ReplaceText("4111-1111-1111-1111", "[card number]")
		return nil
	})
	resolve := hooks.Handle(hooks.ModelResolve, "route", func(_ context.Context, c *hooks.ModelResolveContext) error {
		if strings.Contains(c.Text, "hard question") {
			c.Model = "big"
		}
		return nil
	})
	mask := hooks.Handle(hooks.ToolResult, "mask", func(_ context.Context, c *hooks.ToolResultContext) error {
		c.Content = strings.ReplaceAll(c.Content, "T", "*")
		return nil
	})
	var rec events
	// The reply is sent before its turn is stored: the test waits for the
	// turn's end (message:after_response) before it reads the history.
	answered := hooks.Handle(hooks.MessageAfterResponse, "answered", func(_ context.Context, c *hooks.AfterResponseContext) error {
		rec.add("answered:" + string(c.Result.Envelope.SourceEventID))
		return nil
	})
	setup := agentSetup{
		LLM:        llm.URL,
		Models:     fmt.Sprintf("  big:\n    provider: openai\n    base_url: %s\n    model: big-model\n", llm.URL),
		Rooms:      fmt.Sprintf("  secret:\n    alias: %s\n    invite: [%q, %q]\n", e.localpart("secret"), alice.UserID, bob.UserID),
		AgentRooms: "secret",
		AgentYAML:  "    model: agent\n    tools: [current_time]\n",
		Admins:     []id.UserID{alice.UserID, bob.UserID},
	}
	r := e.start(e.config(setup.body(e)), &rec, Options{
		Registry: func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry([]hooks.Plugin{rec.plugin(), {Name: "guard", Hooks: []hooks.Hook{redact, resolve, mask, answered}}}, hooks.Options{Services: s})
		},
	})
	room := r.bot.w().rooms["secret"]
	agent, router := e.userID("helper"), e.userID("router")
	phone := e.joinEncrypted(t, hstest.Nio, alice, room)
	browser := e.joinEncrypted(t, hstest.JS, bob, room)
	mention := "@" + agent.Localpart() + " "
	modelOf := func(i int) string {
		t.Helper()
		reqs := llm.Requests()
		if i >= len(reqs) {
			t.Fatalf("%d model requests, want more than %d", len(reqs), i)
		}
		return reqs[i].Body.Model
	}

	llm.Script(llmtest.Text("On the agent's model."), llmtest.Text("On big now."), llmtest.Text("Bob's answer."))
	q := phone.SendText(t, room, mention+"hello")
	phone.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: "On the agent's model.", ThreadRoot: q})
	if got := modelOf(0); got != "m" {
		t.Fatalf("first request on %q, want the agent's model m", got)
	}

	phone.Send(t, room, hstest.Outgoing{Body: "!model big", ThreadRoot: q})
	phone.WaitMessage(t, room, hstest.Match{Sender: router, Contains: "this thread runs on **big**", ThreadRoot: q})
	phone.Send(t, room, hstest.Outgoing{Body: mention + "and now?", ThreadRoot: q})
	phone.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: "On big now.", ThreadRoot: q})
	if got := modelOf(1); got != "big-model" {
		t.Errorf("the thread's request after !model big on %q, want big-model", got)
	}

	// Bob's own thread: the agent's model, and his card number redacted.
	b := browser.SendText(t, room, mention+"my card is 4111-1111-1111-1111, is it safe?")
	browser.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: "Bob's answer.", ThreadRoot: b})
	if got := modelOf(2); got != "m" {
		t.Errorf("bob's new thread on %q, want the agent's model m (!model is per thread)", got)
	}
	for i, req := range llm.Requests() {
		if strings.Contains(string(req.Raw), "4111-1111") {
			t.Errorf("model request %d holds bob's card number", i)
		}
	}
	if raw := string(llm.Requests()[2].Raw); !strings.Contains(raw, "[card number]") || !strings.Contains(raw, "is it safe?") {
		t.Errorf("bob's request lacks the redacted message:\n%s", raw)
	}

	// A hard question: the model:resolve hook puts it on big; the time the
	// tool gives reaches the model, and the history, masked.
	llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "current_time", `{}`)), llmtest.Text("It is late."))
	h := browser.SendText(t, room, mention+"a hard question: what time is it?")
	browser.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: "It is late.", ThreadRoot: h})
	if got := modelOf(3); got != "big-model" {
		t.Errorf("the hard question went to %q, want big-model (model:resolve)", got)
	}
	var tool string
	for _, m := range llm.Requests()[4].Body.Messages {
		if m.Role == "tool" {
			tool = string(m.Content)
		}
	}
	if tool == "" || strings.Contains(tool, "T") {
		t.Errorf("the tool result the model got is not masked: %q", tool)
	}
	rec.waitFor(t, "answered:"+string(h), 1, 30*time.Second)
	stored, err := r.bot.history.Load(context.Background(), agents.NewScopeKey(room, h))
	if err != nil {
		t.Fatal(err)
	}
	checkStoredToolMasked(t, stored)
}
