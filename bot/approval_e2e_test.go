package bot

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// approvalLog records tool calls and approval outcomes.
type approvalLog struct {
	rec      *events
	mu       sync.Mutex
	calls    []hooks.ToolAfterCallContext
	resolved []hooks.ToolApprovalResolvedContext
}

func (l *approvalLog) hooks() []hooks.Hook {
	return []hooks.Hook{
		hooks.Handle(hooks.ToolAfterCall, "calls", func(_ context.Context, c *hooks.ToolAfterCallContext) error {
			l.mu.Lock()
			l.calls = append(l.calls, *c)
			l.mu.Unlock()
			l.rec.add("tool:" + c.Tool)
			return nil
		}),
		hooks.Handle(hooks.ToolApprovalResolved, "resolved", func(_ context.Context, c *hooks.ToolApprovalResolvedContext) error {
			l.mu.Lock()
			l.resolved = append(l.resolved, *c)
			l.mu.Unlock()
			l.rec.add("resolved:" + string(c.Outcome))
			return nil
		}),
	}
}

func (l *approvalLog) snapshot() ([]hooks.ToolAfterCallContext, []hooks.ToolApprovalResolvedContext) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]hooks.ToolAfterCallContext(nil), l.calls...), append([]hooks.ToolApprovalResolvedContext(nil), l.resolved...)
}

// newApprovalEnv starts one agent "helper" with room_info and current_time
// whose calls of room_info need approval (timeout as given), and extra
// hooks. authYAML goes under authorization.
func newApprovalEnv(t *testing.T, timeout, authYAML string, extra ...hooks.Hook) (*turnEnv, *approvalLog) {
	l := &approvalLog{}
	top := authYAML + fmt.Sprintf("tool_approval:\n  timeout: %s\n  rules:\n    - tools: [builtin/room_info]\n      action: require_approval\n", timeout)
	e := newTurnEnvOn(t, top, []string{"helper"}, "    tools: [room_info, current_time]\n", append(l.hooks(), extra...)...)
	l.rec = e.rec
	return e, l
}

// waitForCard returns the approval card posted in the thread of q (the
// n-th one, counting from 1), as the person's client sees it.
func (e *turnEnv) waitForCard(q id.EventID, n int) *event.Event {
	e.t.Helper()
	var card *event.Event
	testkit.Eventually(e.t, 30*time.Second, fmt.Sprintf("approval card %d is in the thread of %s", n, q), func() bool {
		var cards []*event.Event
		rels, err := e.person.Client.GetRelations(context.Background(), e.room, q, &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionForward, Limit: 100})
		if err == nil {
			for _, ev := range rels.Chunk {
				_ = ev.Content.ParseRaw(ev.Type)
				if m := ev.Content.AsMessage(); ev.Sender == e.userID("router") && m != nil && strings.Contains(m.Body, "Approval needed") {
					cards = append(cards, ev)
				}
			}
		}
		if len(cards) >= n {
			card = cards[n-1]
		}
		return card != nil
	})
	return card
}

// waitCardRecorded waits until hookroom recorded card as its approval's
// card: the card can show in the room a moment before.
func (e *turnEnv) waitCardRecorded(card id.EventID) {
	e.t.Helper()
	testkit.Eventually(e.t, 30*time.Second, "the approval card is recorded", func() bool {
		a, err := e.bot.bot.approvals.ByCard(context.Background(), card)
		return err == nil && a.CardEventID == card
	})
}

// cardsIn counts the approval cards in the thread of q.
func (e *turnEnv) cardsIn(q id.EventID) int {
	e.t.Helper()
	rels, err := e.person.Client.GetRelations(context.Background(), e.room, q, &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionForward, Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, ev := range rels.Chunk {
		_ = ev.Content.ParseRaw(ev.Type)
		if m := ev.Content.AsMessage(); ev.Sender == e.userID("router") && m != nil && m.RelatesTo != nil && m.RelatesTo.Type == event.RelThread && strings.Contains(m.Body, "Approval needed") {
			n++
		}
	}
	return n
}

func react(t *testing.T, u *hstest.User, room id.RoomID, target id.EventID, key string) {
	t.Helper()
	if _, err := u.Client.SendReaction(context.Background(), room, target, key); err != nil {
		t.Fatalf("react: %v", err)
	}
}

// waitCardText waits until the card shows text containing want.
func (e *turnEnv) waitCardText(card id.EventID, want string) string {
	e.t.Helper()
	var text string
	e.waitUntil("the card to show "+want, func() bool {
		text, _, _ = e.visibleText(card)
		return strings.Contains(text, want)
	})
	return text
}

// lastToolResult is the tool message the model got in its last request.
func (e *turnEnv) lastToolResult() string {
	e.t.Helper()
	reqs := e.llm.Requests()
	msgs := reqs[len(reqs)-1].Body.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "tool" {
			return string(msgs[i].Content)
		}
	}
	e.t.Fatal("the last model request has no tool result")
	return ""
}

// A call that needs approval waits; the card names the tool, the
// arguments and who asked; the person's ✅ runs the tool, and the card
// shows the outcome.
func TestApprovalByReactionRunsTheTool(t *testing.T) {
	e, l := newApprovalEnv(t, "5m", "")
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)), llmtest.Text("This is the main room."))
	q := e.say("which room is this?", "")
	card := e.waitForCard(q, 1)
	body := card.Content.AsMessage().Body
	for _, w := range []string{"helper", "room_info", "{}", string(e.person.UserID), "✅", "❌", "approve", "deny", "UTC"} {
		if !strings.Contains(body, w) {
			t.Errorf("card %q lacks %q", body, w)
		}
	}
	if calls, _ := l.snapshot(); len(calls) != 0 {
		t.Fatalf("the tool ran before it was approved: %+v", calls)
	}
	react(t, e.person, e.room, card.ID, "✅️") // with a variation selector
	if got := e.waitTerminal(1); got[0] != "after:This is the main room." {
		t.Fatalf("terminal %v", got)
	}
	calls, resolved := l.snapshot()
	if len(calls) != 1 || calls[0].Blocked || !strings.Contains(calls[0].Result, string(e.room)) {
		t.Errorf("tool calls %+v, want room_info run once", calls)
	}
	if res := e.lastToolResult(); !strings.Contains(res, string(e.room)) {
		t.Errorf("the model got %q", res)
	}
	if len(resolved) != 1 || resolved[0].Outcome != hooks.ApprovalApproved || resolved[0].DecidedBy != e.person.UserID || resolved[0].Tool != "room_info" {
		t.Errorf("tool:approval_resolved %+v", resolved)
	}
	e.waitCardText(card.ID, "Approved by "+string(e.person.UserID))
}

// A denial by a reply in the thread gives the model a denied result with
// the person's reason; the reply itself starts no turn.
func TestApprovalDeniedByReplyTellsTheModel(t *testing.T) {
	e, l := newApprovalEnv(t, "5m", "")
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)), llmtest.Text("Alright, I will not look."))
	q := e.say("which room is this?", "")
	card := e.waitForCard(q, 1)
	e.say("No, not today", q)
	if got := e.waitTerminal(1); got[0] != "after:Alright, I will not look." {
		t.Fatalf("terminal %v", got)
	}
	res := e.lastToolResult()
	if !strings.Contains(res, "[tool call denied]") || !strings.Contains(res, "not today") || !strings.Contains(res, string(e.person.UserID)+" denied it") {
		t.Errorf("the model got %q", res)
	}
	calls, resolved := l.snapshot()
	if len(calls) != 1 || !calls[0].Blocked {
		t.Errorf("tool calls %+v, want one blocked", calls)
	}
	if len(resolved) != 1 || resolved[0].Outcome != hooks.ApprovalDenied || resolved[0].DecisionReason != "not today" {
		t.Errorf("tool:approval_resolved %+v", resolved)
	}
	e.waitCardText(card.ID, "Denied by "+string(e.person.UserID)+": not today")
	// Barrier: the next message in the thread is the next turn; the
	// denial got none of its own.
	e.llm.Script(llmtest.Text("You're welcome."))
	e.say("thanks", q)
	if got := e.waitTerminal(2); got[1] != "after:You're welcome." {
		t.Fatalf("terminal %v", got)
	}
	if n := e.llm.Count(); n != 3 {
		t.Errorf("%d model requests, want 3 (the denial is not a turn)", n)
	}
}

// Nobody answers: at the deadline the call is denied and the model is told
// why; the card says it expired.
func TestApprovalDeniedAtDeadline(t *testing.T) {
	e, l := newApprovalEnv(t, "2s", "")
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)), llmtest.Text("Nobody let me look."))
	start := time.Now()
	q := e.say("which room is this?", "")
	card := e.waitForCard(q, 1)
	if got := e.waitTerminal(1); got[0] != "after:Nobody let me look." {
		t.Fatalf("terminal %v", got)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("denied after %v, before the 2s deadline", took)
	}
	if res := e.lastToolResult(); !strings.Contains(res, "[tool call denied]") || !strings.Contains(res, "nobody approved it before the deadline") {
		t.Errorf("the model got %q", res)
	}
	calls, resolved := l.snapshot()
	if len(calls) != 1 || !calls[0].Blocked {
		t.Errorf("tool calls %+v, want one blocked", calls)
	}
	if len(resolved) != 1 || resolved[0].Outcome != hooks.ApprovalExpired || resolved[0].DecidedBy != "" || resolved[0].Waited < 2*time.Second {
		t.Errorf("tool:approval_resolved %+v", resolved)
	}
	e.waitCardText(card.ID, "Expired")
}

// Someone else's answer is ignored, even from a person allowed to talk in
// the room; the requester's answer counts.
func TestApprovalIgnoresOtherPeople(t *testing.T) {
	e, l := newApprovalEnv(t, "5m", "  default_room_access: true\n")
	bob := e.hs.RegisterUser(t, "bob")
	if _, err := bob.Client.JoinRoomByID(context.Background(), e.room); err != nil {
		t.Fatal(err)
	}
	// bob's "approve" is no answer for him: it is a message like any
	// other, answered after the turn it waits behind.
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)), llmtest.Text("Approved, so I looked."), llmtest.Text("Hello bob."))
	q := e.say("which room is this?", "")
	card := e.waitForCard(q, 1)
	react(t, bob, e.room, card.ID, "✅")
	if _, err := bob.Client.SendMessageEvent(context.Background(), e.room, event.EventMessage, &event.MessageEventContent{
		MsgType: event.MsgText, Body: "approve", RelatesTo: (&event.RelatesTo{}).SetThread(q, q),
	}); err != nil {
		t.Fatal(err)
	}
	// Barrier: bob's reaction went past the approval (reaction:received saw it).
	e.rec.waitFor(t, "reaction:✅:"+string(card.ID), 1, 30*time.Second)
	if calls, _ := l.snapshot(); len(calls) != 0 {
		t.Fatalf("the tool ran on bob's answer: %+v", calls)
	}
	react(t, e.person, e.room, card.ID, "👍")
	e.rec.waitFor(t, "tool:", 1, 30*time.Second)
	calls, resolved := l.snapshot()
	if len(calls) != 1 || calls[0].Blocked {
		t.Errorf("tool calls %+v, want room_info run once", calls)
	}
	if len(resolved) != 1 || resolved[0].DecidedBy != e.person.UserID {
		t.Errorf("tool:approval_resolved %+v, want decided by %s", resolved, e.person.UserID)
	}
	e.waitCardText(card.ID, "Approved by "+string(e.person.UserID))
	if got := e.waitTerminal(2); got[0] != "after:Approved, so I looked." || got[1] != "after:Hello bob." {
		t.Errorf("terminal %v", got)
	}
}

// A restart while an approval is pending: the answer given while hookroom
// was down is used by the replayed turn (same call, no second card). A
// replayed turn that no longer makes the call cancels its approval
// visibly.
// An approval answered (✅ on the card) while hookroom is down counts when
// hookroom comes back after the deadline: the answer was given before it.
func TestApprovalAnsweredWhileDownCountsAfterTheDeadline(t *testing.T) {
	e, l := newApprovalEnv(t, "6s", "")
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)))
	q := e.say("which room is this?", "")
	card := e.waitForCard(q, 1)
	e.waitCardRecorded(card.ID)
	a, err := e.bot.bot.approvals.ByCard(t.Context(), card.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.bot.stop(t)

	react(t, e.person, e.room, card.ID, "✅")
	testkit.Eventually(t, 30*time.Second, "the approval's deadline passes while hookroom is down", func() bool {
		return time.Now().After(a.ExpiresAt)
	})
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)), llmtest.Text("Approved while I was away."))
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
	if got := e.waitTerminal(2); got[0] != "cancelled:shutdown" || got[1] != "after:Approved while I was away." {
		t.Fatalf("terminal %v", got)
	}
	calls, resolved := l.snapshot()
	if len(calls) != 1 || calls[0].Blocked {
		t.Errorf("tool calls %+v, want room_info run once", calls)
	}
	if len(resolved) != 1 || resolved[0].Outcome != hooks.ApprovalApproved || resolved[0].DecidedBy != e.person.UserID {
		t.Errorf("tool:approval_resolved %+v, want approved by %s", resolved, e.person.UserID)
	}
	e.waitCardText(card.ID, "Approved by "+string(e.person.UserID))
}

func TestApprovalSurvivesRestart(t *testing.T) {
	e, l := newApprovalEnv(t, "5m", "")
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)))
	q := e.say("which room is this?", "")
	card := e.waitForCard(q, 1)
	e.waitCardRecorded(card.ID)
	e.bot.stop(t)

	react(t, e.person, e.room, card.ID, "✅")
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)), llmtest.Text("Looked after the restart."))
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
	// The stop ended the waiting turn (cancelled: shutdown); the restart
	// answered the message.
	if got := e.waitTerminal(2); got[0] != "cancelled:shutdown" || got[1] != "after:Looked after the restart." {
		t.Fatalf("terminal %v", got)
	}
	calls, resolved := l.snapshot()
	if len(calls) != 1 || calls[0].Blocked {
		t.Errorf("tool calls %+v, want room_info run once", calls)
	}
	if len(resolved) != 1 || resolved[0].Outcome != hooks.ApprovalApproved {
		t.Errorf("tool:approval_resolved %+v", resolved)
	}
	if n := e.cardsIn(q); n != 1 {
		t.Errorf("%d approval cards in the thread, want 1", n)
	}
	e.waitCardText(card.ID, "Approved by")

	// Pending across a restart, and the replayed run answers without the
	// call.
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c2", "room_info", `{}`)))
	q2 := e.say("and now?", "")
	card2 := e.waitForCard(q2, 1)
	e.waitCardRecorded(card2.ID)
	e.bot.stop(t)
	e.llm.Script(llmtest.Text("Never mind, I know it."))
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
	if got := e.waitTerminal(4); got[2] != "cancelled:shutdown" || got[3] != "after:Never mind, I know it." {
		t.Fatalf("terminal %v", got)
	}
	e.waitCardText(card2.ID, "Cancelled")
	e.rec.waitFor(t, "resolved:cancelled", 1, 30*time.Second)

	// Pending across a restart, answered after it: the replayed turn
	// waits on the same card.
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c3", "room_info", `{}`)))
	q3 := e.say("once more?", "")
	card3 := e.waitForCard(q3, 1)
	e.waitCardRecorded(card3.ID)
	e.bot.stop(t)
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c3", "room_info", `{}`)), llmtest.Text("Looked again."))
	before := e.llm.Count()
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
	e.waitUntil("the replayed turn to ask the model again", func() bool { return e.llm.Count() > before })
	react(t, e.person, e.room, card3.ID, "✅")
	if got := e.waitTerminal(6); got[4] != "cancelled:shutdown" || got[5] != "after:Looked again." {
		t.Fatalf("terminal %v", got)
	}
	if n := e.cardsIn(q3); n != 1 {
		t.Errorf("%d approval cards in the thread, want 1", n)
	}
	calls, _ = l.snapshot()
	if len(calls) != 2 || calls[1].Blocked {
		t.Errorf("tool calls %+v, want room_info run a second time", calls)
	}
}

// A tool:before_call hook asks for approval (no rule does); its reason is
// on the card, and an "approve" reply runs the call. A
// tool:approval_requested hook decides other calls without a card.
func TestGateHookRequiresApproval(t *testing.T) {
	l := &approvalLog{}
	gate := hooks.Handle(hooks.ToolBeforeCall, "ask", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
		c.RequireApproval("reading the clock is sensitive here")
		return nil
	})
	auto := hooks.Handle(hooks.ToolApprovalRequested, "auto", func(_ context.Context, c *hooks.ToolApprovalRequestedContext) error {
		if strings.Contains(string(c.Arguments), "UTC") {
			c.Approve("UTC is harmless")
		}
		return nil
	})
	e := newTurnEnv(t, []string{"helper"}, "    tools: [room_info, current_time]\n", append(l.hooks(), gate, auto)...)
	l.rec = e.rec
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "current_time", `{"timezone":"Europe/Berlin"}`)), llmtest.Text("It is late in Berlin."))
	q := e.say("what time is it in Berlin?", "")
	card := e.waitForCard(q, 1)
	if body := card.Content.AsMessage().Body; !strings.Contains(body, "reading the clock is sensitive here") || !strings.Contains(body, "Europe/Berlin") {
		t.Errorf("card %q lacks the hook's reason or the arguments", body)
	}
	e.say("approve", q)
	if got := e.waitTerminal(1); got[0] != "after:It is late in Berlin." {
		t.Fatalf("terminal %v", got)
	}
	calls, _ := l.snapshot()
	if len(calls) != 1 || calls[0].Blocked {
		t.Errorf("tool calls %+v, want current_time run", calls)
	}

	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c2", "current_time", `{"timezone":"UTC"}`)), llmtest.Text("It is noon UTC."))
	q2 := e.say("and in UTC?", "")
	if got := e.waitTerminal(2); got[1] != "after:It is noon UTC." {
		t.Fatalf("terminal %v", got)
	}
	calls, resolved := l.snapshot()
	if len(calls) != 2 || calls[1].Blocked {
		t.Errorf("tool calls %+v, want the second run by the hook's approval", calls)
	}
	if len(resolved) != 2 || resolved[1].Outcome != hooks.ApprovalApproved || resolved[1].DecidedBy != "" || resolved[1].DecisionReason != "UTC is harmless" {
		t.Errorf("tool:approval_resolved %+v", resolved)
	}
	if n := e.cardsIn(q2); n != 0 {
		t.Errorf("%d cards for the call a hook approved, want 0", n)
	}
}

// In an encrypted room the card is encrypted and readable, and an answer
// in the thread is decrypted and counts.
func TestApprovalInEncryptedRoom(t *testing.T) {
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice := e.hs.RegisterUser(t, "alice")
	setup := e.secretRoomSetup(llm, alice)
	setup.AgentYAML = "    tools: [room_info]\n"
	setup.Extra = `tool_approval:
  rules:
    - tools: [room_info]
      action: require_approval
`
	cfg := e.configAgents(setup)
	rec := &events{}
	l := &approvalLog{rec: rec}
	r := e.start(cfg, rec, Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
		return hooks.NewRegistry([]hooks.Plugin{rec.plugin(), {Name: "test", Hooks: l.hooks()}}, hooks.Options{Services: s})
	}})
	room := r.bot.w().rooms["secret"]
	phone := e.joinEncrypted(t, hstest.Nio, alice, room)

	llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)), llmtest.Text("A secret room."))
	q := phone.SendText(t, room, "which room is this?")
	card := phone.WaitMessage(t, room, hstest.Match{Sender: e.userID("router"), Contains: "Approval needed", ThreadRoot: q})
	if !card.Encrypted || card.Undecryptable || !strings.Contains(card.FinalBody, "room_info") {
		t.Fatalf("card encrypted=%v undecryptable=%v body %q", card.Encrypted, card.Undecryptable, card.FinalBody)
	}
	phone.Send(t, room, hstest.Outgoing{Body: "yes", ThreadRoot: q})
	phone.WaitMessage(t, room, hstest.Match{Sender: e.userID("helper"), Contains: "A secret room.", ThreadRoot: q})
	calls, resolved := l.snapshot()
	if len(calls) != 1 || calls[0].Blocked {
		t.Errorf("tool calls %+v, want room_info run once", calls)
	}
	if len(resolved) != 1 || resolved[0].DecidedBy != alice.UserID {
		t.Errorf("tool:approval_resolved %+v", resolved)
	}
	testkit.Eventually(t, 30*time.Second, "the card to show the approval", func() bool {
		got := phone.WaitMessage(t, room, hstest.Match{EventID: card.EventID})
		return strings.Contains(got.FinalBody, "Approved by "+string(alice.UserID))
	})
}
