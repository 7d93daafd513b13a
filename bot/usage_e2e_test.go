package bot

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/internal/testkit"
	tokens "github.com/hookroom/hookroom/usage"
)

// cancelledEvents records the visible event of every message:cancelled.
type cancelledEvents struct {
	mu      sync.Mutex
	visible []id.EventID
	usage   []hooks.TokenUsage
}

func (c *cancelledEvents) hook() hooks.Hook {
	return hooks.Handle(hooks.MessageCancelled, "visible", func(_ context.Context, cc *hooks.CancelledContext) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.visible = append(c.visible, cc.Info.VisibleEventID)
		c.usage = append(c.usage, cc.Info.Usage)
		return nil
	})
}

// last waits until a message:cancelled was recorded and returns the last
// one: the recorder may run after the hook that told the test the turn
// ended (observers run one after the other).
func (c *cancelledEvents) last(t testing.TB) (id.EventID, hooks.TokenUsage) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "message:cancelled is recorded", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.visible) > 0
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.visible[len(c.visible)-1], c.usage[len(c.usage)-1]
}

// A turn's tokens (as llmtest reports them, cached ones included) reach
// message:after_response and the database, summed over the turn's model
// calls, and !usage reports them for the room.
func TestUsageRecordedAndReported(t *testing.T) {
	e := newTurnEnv(t, []string{"helper"}, "")
	e.llm.Script(
		llmtest.Text("First answer.").WithCachedUsage(120, 100, 8),
		// A round of tool calls, then the answer: two model calls.
		llmtest.Calls(llmtest.ToolCall("c1", "no_such_tool", "{}")).WithCachedUsage(50, 10, 3),
		llmtest.Text("Second answer.").WithCachedUsage(70, 40, 4),
	)
	q1 := e.say("hello", "")
	if got := e.waitTerminal(1); got[0] != "after:First answer." {
		t.Fatalf("terminal %v", got)
	}
	e.say("and again", q1)
	if got := e.waitTerminal(2); got[1] != "after:Second answer." {
		t.Fatalf("terminal %v", got)
	}
	e.mu.Lock()
	got := []hooks.TokenUsage{e.results[0].Usage, e.results[1].Usage}
	e.mu.Unlock()
	want := []hooks.TokenUsage{
		{Model: "agent-model", InputTokens: 120, OutputTokens: 8, CachedTokens: 100, TotalTokens: 128, ModelCalls: 1},
		{Model: "agent-model", InputTokens: 120, OutputTokens: 7, CachedTokens: 50, TotalTokens: 127, ModelCalls: 2},
	}
	if !slices.Equal(got, want) {
		t.Errorf("after_response usage %+v, want %+v", got, want)
	}

	// Recorded once per turn, with where and for whom.
	b := e.bot.bot
	sum, err := b.usage.Sum(t.Context(), tokens.Filter{Agent: "helper", RoomID: e.room, Requester: e.person.UserID})
	if err != nil {
		t.Fatal(err)
	}
	if wantSum := (tokens.Totals{Turns: 2, InputTokens: 240, OutputTokens: 15, CachedTokens: 150, TotalTokens: 255}); sum != wantSum {
		t.Errorf("recorded %+v, want %+v", sum, wantSum)
	}
	if th, err := b.usage.Sum(t.Context(), tokens.Filter{Agent: "helper", Since: time.Now().Add(-time.Hour)}); err != nil || th.Turns != 2 {
		t.Errorf("turns of the last hour: %+v, %v", th, err)
	}

	calls := e.llm.Count()
	q := e.say("!usage", "")
	text, _, _ := e.visibleText(e.waitForRouterReply(q))
	month := time.Now().UTC().Format("January")
	line := "**helper**: today 255 tokens (240 in, 150 of them cached, 15 out) in 2 turns · " + month + " 255 tokens (240 in, 150 of them cached, 15 out) in 2 turns"
	for _, w := range []string{"Token usage in this room", line, "You today: 255 tokens"} {
		if !strings.Contains(text, w) {
			t.Errorf("!usage answered %q, want it to contain %q", text, w)
		}
	}
	if n := e.llm.Count(); n != calls {
		t.Errorf("!usage made %d model calls", n-calls)
	}
}

// An agent whose daily budget is used up answers with a notice saying when
// it resets, without calling the model, and the turn ends with
// message:cancelled (over_budget). Raising the budget by a reload lets it
// answer again.
func TestAgentBudgetBlocksTurn(t *testing.T) {
	var c cancelledEvents
	e := newTurnEnv(t, []string{"helper"}, "    daily_token_budget: 100\n", c.hook())
	e.llm.Script(llmtest.Text("That was expensive.").WithUsage(90, 30))
	q1 := e.say("tell me everything", "")
	if got := e.waitTerminal(1); got[0] != "after:That was expensive." {
		t.Fatalf("terminal %v", got)
	}
	q2 := e.say("and more", q1)
	if got := e.waitTerminal(2); got[1] != "cancelled:over_budget" {
		t.Fatalf("terminal %v, want the second turn cancelled over budget", got)
	}
	if n := e.llm.Count(); n != 1 {
		t.Errorf("%d model requests, want 1 (none for the turn over budget)", n)
	}
	notice, u := c.last(t)
	if u != (hooks.TokenUsage{}) {
		t.Errorf("cancelled usage %+v, want none", u)
	}
	text, _, ev := e.visibleText(notice)
	if ev.Sender != e.userID("helper") || !strings.Contains(text, "helper has used up its daily budget of 100 tokens") || !strings.Contains(text, "resets at 00:00 UTC") {
		t.Errorf("notice %q from %s", text, ev.Sender)
	}
	if m := ev.Content.AsMessage(); m.RelatesTo == nil || m.RelatesTo.GetThreadParent() != q1 {
		t.Errorf("notice is not in the thread of %s: %+v", q1, m.RelatesTo)
	}
	if e.pending(q2) {
		t.Error("the message over budget is still pending")
	}

	q := e.say("!usage", "")
	text, _, _ = e.visibleText(e.waitForRouterReply(q))
	for _, w := range []string{"today 120 tokens (90 in, 30 out) in 1 turn", "Agent budgets today, everywhere: helper 120 of 100.", "Budgets reset at 00:00 UTC"} {
		if !strings.Contains(text, w) {
			t.Errorf("!usage answered %q, want it to contain %q", text, w)
		}
	}

	// Unlimited for this agent from now on.
	cur, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.yaml, []byte(strings.Replace(string(cur), "daily_token_budget: 100", "daily_token_budget: 0", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := e.bot.bot.Reload(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	e.llm.Script(llmtest.Text("Back again."))
	e.say("now?", q1)
	if got := e.waitTerminal(3); got[2] != "after:Back again." {
		t.Fatalf("after the reload: terminal %v", got)
	}
}

// A person whose daily budget is used up is told so, and no agent calls
// the model for them; !usage shows their own count against it. On
// PostgreSQL: the usage is recorded in the turn's transaction there too.
func TestPersonBudgetBlocksTurnOnPostgres(t *testing.T) {
	var c cancelledEvents
	top := fmt.Sprintf("database:\n  type: postgres\n  uri: %q\nusage:\n  daily_tokens_per_user: 50\n", pgtest.URL(t))
	e := newTurnEnvOn(t, top, []string{"helper"}, "", c.hook())
	e.llm.Script(llmtest.Text("Sure.").WithUsage(40, 20))
	e.say("hi", "")
	if got := e.waitTerminal(1); got[0] != "after:Sure." {
		t.Fatalf("terminal %v", got)
	}
	e.say("hi again", "")
	if got := e.waitTerminal(2); got[1] != "cancelled:over_budget" {
		t.Fatalf("terminal %v, want the second turn cancelled over budget", got)
	}
	if n := e.llm.Count(); n != 1 {
		t.Errorf("%d model requests, want 1", n)
	}
	notice, _ := c.last(t)
	text, _, _ := e.visibleText(notice)
	if !strings.Contains(text, "You have used up your daily budget of 50 tokens (60 used today)") || !strings.Contains(text, "00:00 UTC") {
		t.Errorf("notice %q", text)
	}
	q := e.say("!usage", "")
	text, _, _ = e.visibleText(e.waitForRouterReply(q))
	if !strings.Contains(text, "You today: 60 of your daily budget of 50 tokens.") {
		t.Errorf("!usage answered %q", text)
	}
}
