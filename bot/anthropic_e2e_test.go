package bot

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
)

// anthropicKey is the API key config.yaml gives the anthropic model.
const anthropicKey = "sk-ant-test-SECRET-0123456789"

// newAnthropicTurnEnv is newTurnEnv with the agent on an anthropic model
// (provider: anthropic, the llmtest server's Messages API); the router
// stays on openai.
// The bot's log goes to the returned buffer too.
func newAnthropicTurnEnv(t *testing.T, agentName, agentYAML string, extra ...hooks.Hook) (*turnEnv, *logBuffer) {
	e := &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}
	logs := &logBuffer{}
	e.testEnv.logs = logs
	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID(agentName))
	e.cfg = agentSetup{
		LLM: e.llm.RootURL, Provider: "anthropic", Model: "claude-test",
		ModelYAML: "    api_key: " + anthropicKey + "\n    max_tokens: 1024\n", Models: e.routerModels(),
		Room: e.room, Admins: []id.UserID{e.person.UserID},
		Agents: []string{agentName}, AgentYAML: "    model: agent\n" + agentYAML,
		Extra: "router:\n  model: router\n",
	}.body(e.testEnv)
	e.opts = e.turnOptions(extra...)
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
	return e, logs
}

// A turn on Dendrite whose model speaks Anthropic's Messages API: the
// streamed tool_use runs the tool, its tool_result goes back, the answer
// is delivered; the agent's stable system prompt carries the cache
// breakpoint and the cached tokens reach the turn's usage.
func TestAnthropicAgentCallsATool(t *testing.T) {
	var turnNo atomic.Int32
	e, logs := newAnthropicTurnEnv(t, "claude", "    tools: [current_time]\n    instructions: Answer briefly.\n",
		hooks.Handle(hooks.SystemEnrich, "context", func(_ context.Context, c *hooks.SystemEnrichContext) error {
			c.AddInstruction("team", "The team is backend.", hooks.StableItem)
			c.AddInstruction("mood", fmt.Sprintf("Turn %d.", turnNo.Add(1)))
			return nil
		}),
	)
	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("toolu_1", "current_time", `{"timezone":"Europe/Paris"}`).WithPieces(4)).
			WithText("Let me check.").WithCachedUsage(1200, 1000, 20),
		llmtest.Reply{Text: llmtest.Split("It is late in Paris.", 4), ChunkDelay: 20 * time.Millisecond}.WithCachedUsage(1300, 1000, 10),
	)
	q := e.say("@"+e.localpart("claude")+" what time is it in Paris?", "")
	got := e.waitTerminal(1)
	if got[0] != "after:Let me check.\n\nIt is late in Paris." {
		t.Fatalf("terminal %v", got)
	}
	res := e.results[0]
	e.waitVisibleText(res.EventID, "Let me check.\n\nIt is late in Paris.")
	if u := res.Usage; u.InputTokens != 2500 || u.CachedTokens != 2000 || u.OutputTokens != 30 {
		t.Errorf("usage %+v, want 2500 input (2000 cached), 30 output", u)
	}

	reqs := e.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Format != llmtest.FormatAnthropic || r.Path != "/v1/messages" || r.Anthropic.Model != "claude-test" || r.Anthropic.MaxTokens != 1024 || !r.Anthropic.Stream {
			t.Errorf("request %d: %s %s model %q max_tokens %d", i, r.Format, r.Path, r.Anthropic.Model, r.Anthropic.MaxTokens)
		}
		if !r.HasTool("current_time") {
			t.Errorf("request %d does not offer current_time", i)
		}
		// The breakpoint ends after the agent's prompt and the stable item;
		// the volatile item follows in a block of its own.
		sys := r.Anthropic.System
		if bps := r.CacheBreakpoints(); len(bps) != 1 || bps[0] != "system[0]" || len(sys) != 2 {
			t.Fatalf("request %d: breakpoints %q, system %+v", i, bps, sys)
		}
		if head := sys[0].Text; !strings.HasPrefix(head, "You are claude") || !strings.Contains(head, "Answer briefly.") ||
			!strings.HasSuffix(head, "The team is backend.\n</item>") || strings.Contains(head, "Turn ") {
			t.Errorf("request %d: cached system block %q", i, head)
		}
		if !strings.Contains(sys[1].Text, "Turn ") {
			t.Errorf("request %d: volatile system block %q", i, sys[1].Text)
		}
	}
	if reqs[0].Anthropic.System[0].Text != reqs[1].Anthropic.System[0].Text {
		t.Errorf("the cached system block changed between the model calls")
	}
	msgs := reqs[1].Anthropic.Messages
	last := msgs[len(msgs)-1]
	use := msgs[len(msgs)-2]
	if use.Role != "assistant" || len(use.Content) != 2 || use.Content[1].Type != "tool_use" || use.Content[1].ID != "toolu_1" ||
		string(use.Content[1].Input) != `{"timezone":"Europe/Paris"}` {
		t.Errorf("assistant message %+v", use)
	}
	if last.Role != "user" || len(last.Content) != 1 || last.Content[0].Type != "tool_result" || last.Content[0].ToolUseID != "toolu_1" ||
		!strings.Contains(last.Content[0].Content.Text(), "Europe/Paris") {
		t.Errorf("tool result message %+v", last)
	}

	// The next turn in the thread re-sends the same cached prefix: tools,
	// then the same first system block, while the volatile item changed.
	e.llm.Script(llmtest.Text("Still late."))
	e.say("@"+e.localpart("claude")+" and now?", q) // in the thread: same history
	if got := e.waitTerminal(2); got[1] != "after:Still late." {
		t.Fatalf("terminal %v", got)
	}
	third := e.llm.LastRequest(t)
	// The second breakpoint ends the stored history: the first turn's
	// answer.
	var marked []string
	for _, m := range third.Anthropic.Messages {
		for _, b := range m.Content {
			if b.CacheControl != nil {
				marked = append(marked, m.Role+": "+b.Text)
			}
		}
	}
	if bps := third.CacheBreakpoints(); len(bps) != 2 || bps[0] != "system[0]" || len(marked) != 1 || marked[0] != "assistant: Let me check.\n\nIt is late in Paris." {
		t.Errorf("second turn: breakpoints %q on %q, want system[0] and the first answer", bps, marked)
	}
	if third.Anthropic.System[0].Text != reqs[0].Anthropic.System[0].Text || third.Anthropic.System[1].Text == reqs[0].Anthropic.System[1].Text {
		t.Errorf("second turn system blocks %+v", third.Anthropic.System)
	}
	if a, b := string(third.Body.Fields["tools"]), string(reqs[0].Body.Fields["tools"]); a != b {
		t.Errorf("the tools changed between turns:\n%s\n%s", a, b)
	}
	// A refusal that echoes the key: the turn fails visibly, and the key
	// went to the server but never into the room or the log.
	e.llm.Script(llmtest.HTTPError(401, "invalid x-api-key: "+anthropicKey))
	e.say("@"+e.localpart("claude")+" once more?", q)
	if got := e.waitTerminal(3); !strings.HasPrefix(got[2], "cancelled:") {
		t.Fatalf("terminal %v", got)
	}
	if auth := reqs[0].Header.Get("Authorization") + reqs[0].Header.Get("X-Api-Key"); !strings.Contains(auth, anthropicKey) {
		t.Errorf("the API key was not sent")
	}
	if !strings.Contains(logs.String(), "invalid x-api-key: [REDACTED]") {
		t.Errorf("the log does not have the scrubbed refusal")
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("the log shows the key")
	}
	assertNoKeyInRoom(t, e, e.room)
}

// assertNoKeyInRoom waits until the person was told that the model refused
// hookroom's credentials (Dendrite's /messages may lag a moment behind the
// notice's send), then fails if any event of room mentions the API key.
func assertNoKeyInRoom(t *testing.T, e *turnEnv, room id.RoomID) {
	t.Helper()
	var chunk []*event.Event
	testkit.Until(t, 30*time.Second, func() (bool, string) {
		msgs, err := e.person.Client.Messages(context.Background(), room, "", "", 'b', nil, 100)
		if err != nil {
			return false, fmt.Sprintf("reading the room's messages: %v", err)
		}
		chunk = msgs.Chunk
		for _, ev := range chunk {
			if strings.Contains(string(ev.Content.VeryRaw), "rejected hookroom's credentials") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("the room has no notice of the refused credentials (%d events read)", len(chunk))
	})
	for _, ev := range chunk {
		if raw := string(ev.Content.VeryRaw); strings.Contains(raw, "SECRET") {
			t.Errorf("the room shows the key: %s", raw)
		}
	}
}
