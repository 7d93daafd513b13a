package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// turnEnv is a room with a person, agents on a scripted model and a
// running hookroom.
type turnEnv struct {
	*testEnv
	llm    *llmtest.Server
	person *hstest.User
	room   id.RoomID
	cfg    string // config body
	rec    *events
	bot    *running
	opts   Options // what bot was started with
	// terminal records message:after_response and message:cancelled.
	mu       sync.Mutex
	terminal []string
	results  []hooks.ResponseResult
}

// terminalHooks record message:after_response ("after:TEXT", with its
// result) and message:cancelled ("cancelled:REASON") in e.terminal.
func (e *turnEnv) terminalHooks() []hooks.Hook {
	return []hooks.Hook{
		hooks.Handle(hooks.MessageAfterResponse, "after", func(_ context.Context, c *hooks.AfterResponseContext) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.terminal = append(e.terminal, "after:"+c.Result.Text)
			e.results = append(e.results, c.Result)
			e.rec.add("terminal")
			return nil
		}),
		hooks.Handle(hooks.MessageCancelled, "cancelled", func(_ context.Context, c *hooks.CancelledContext) error {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.terminal = append(e.terminal, "cancelled:"+string(c.Info.Reason))
			e.rec.add("terminal")
			return nil
		}),
	}
}

// newTurnEnv sets up agents (names with their yaml) in one room; extra
// hooks join the recorder's plugin.
func newTurnEnv(t *testing.T, agentNames []string, agentYAML string, extra ...hooks.Hook) *turnEnv {
	return newTurnEnvOn(t, "", agentNames, agentYAML, extra...)
}

// newTurnEnvOn is newTurnEnv with top in config.yaml right after
// authorization.global_users: more authorization settings (two spaces in),
// then sections such as database (none: SQLite in data_dir), http or
// mcp_servers.
func newTurnEnvOn(t *testing.T, top string, agentNames []string, agentYAML string, extra ...hooks.Hook) *turnEnv {
	return newTurnEnvWith(t, nil, top, agentNames, agentYAML, extra...)
}

// newTurnEnvWith is newTurnEnvOn with prepare called on the environment
// and its Options just before hookroom starts.
func newTurnEnvWith(t *testing.T, prepare func(*turnEnv), top string, agentNames []string, agentYAML string, extra ...hooks.Hook) *turnEnv {
	e := &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}
	e.person = e.hs.RegisterUser(t, "alice")
	invite := []id.UserID{e.userID("router")}
	for _, a := range agentNames {
		invite = append(invite, e.userID(a))
	}
	e.room = createRoom(t, e.person, invite...)
	e.cfg = agentSetup{
		LLM: e.llm.URL, Model: "agent-model", Models: e.routerModels(),
		Room: e.room, Admins: []id.UserID{e.person.UserID}, Top: top,
		Agents: agentNames, AgentYAML: "    model: agent\n" + agentYAML,
		Extra: "router:\n  model: router\n",
	}.body(e.testEnv)
	e.opts = e.turnOptions(extra...)
	if prepare != nil {
		prepare(e)
	}
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
	return e
}

// routerModels are the models besides "agent" of a turnEnv, entries of the
// models section: "default" (echo) and "router", on e.llm like "agent".
func (e *turnEnv) routerModels() string {
	return fmt.Sprintf("  default:\n    provider: echo\n  router:\n    provider: openai\n    base_url: %s\n    model: router-model\n", e.llm.URL)
}

// turnOptions are the Options a turnEnv's bot runs with: short placeholder
// and edit delays, e.configOptions for reloading config.yaml, and the
// recorder's plugin next to one with e.terminalHooks and extra.
func (e *turnEnv) turnOptions(extra ...hooks.Hook) Options {
	hs := append(e.terminalHooks(), extra...)
	return Options{
		PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond,
		ConfigOptions: e.configOptions(),
		Registry: func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry([]hooks.Plugin{e.rec.plugin(), {Name: "test", Hooks: hs}}, hooks.Options{Services: s, Observer: traceObserver{}})
		},
	}
}

// toolMessages returns the tool results the model was sent in request i.
func toolMessages(e *turnEnv, i int) []string {
	var out []string
	reqs := e.llm.Requests()
	if i >= len(reqs) {
		return nil
	}
	for _, m := range reqs[i].Body.Messages {
		if m.Role == "tool" {
			out = append(out, string(m.Content))
		}
	}
	return out
}

// lastToolMessage is the last of toolMessages(e, i), "" when there is none.
func lastToolMessage(e *turnEnv, i int) string {
	got := toolMessages(e, i)
	if len(got) == 0 {
		return ""
	}
	return got[len(got)-1]
}

// messageContents returns the contents of msgs (a model request's
// messages).
func messageContents(msgs []llmtest.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Content))
	}
	return out
}

// say sends text from the person (into thread, when set) and returns its id.
func (e *turnEnv) say(text string, thread id.EventID) id.EventID {
	e.t.Helper()
	return e.send(&event.MessageEventContent{MsgType: event.MsgText, Body: text}, thread)
}

// send sends content from the person (into thread, when set) and returns
// its id.
func (e *turnEnv) send(content *event.MessageEventContent, thread id.EventID) id.EventID {
	e.t.Helper()
	if thread != "" {
		content.RelatesTo = (&event.RelatesTo{}).SetThread(thread, thread)
	}
	resp, err := e.person.Client.SendMessageEvent(context.Background(), e.room, event.EventMessage, content)
	if err != nil {
		e.t.Fatalf("send: %v", err)
	}
	return resp.EventID
}

// waitTerminal waits for the n-th terminal event and returns all so far.
func (e *turnEnv) waitTerminal(n int) []string {
	e.t.Helper()
	e.rec.waitFor(e.t, "terminal", n, 60*time.Second)
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.terminal)
}

// visibleText returns what a client shows for evID: its latest edit's new
// content (Dendrite does not aggregate edits), and the number of edits.
func (e *turnEnv) visibleText(evID id.EventID) (string, int, *event.Event) {
	e.t.Helper()
	ctx := context.Background()
	var ev *event.Event
	testkit.Until(e.t, 5*time.Second, func() (bool, string) { // GET /event can lag a moment behind the send on Dendrite
		var err error
		ev, err = e.person.Client.GetEvent(ctx, e.room, evID)
		return err == nil, fmt.Sprintf("get event %s: %v", evID, err)
	})
	_ = ev.Content.ParseRaw(ev.Type)
	text := ev.Content.AsMessage().Body
	var rels *mautrix.RespGetRelations
	// Relations lag a moment behind sends on Dendrite: an edit may show
	// only after a moment, and a message without edits has none to show,
	// so this is a bounded retry, not a wait that fails.
	for range 50 {
		var err error
		rels, err = e.person.Client.GetRelations(ctx, e.room, evID, &mautrix.ReqGetRelations{RelationType: event.RelReplace, Dir: mautrix.DirectionForward, Limit: 100})
		if err != nil {
			e.t.Fatalf("relations: %v", err)
		}
		if len(rels.Chunk) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(rels.Chunk); n > 0 {
		last := rels.Chunk[n-1]
		_ = last.Content.ParseRaw(last.Type)
		if nc := last.Content.AsMessage().NewContent; nc != nil {
			text = nc.Body
		}
	}
	return text, len(rels.Chunk), ev
}

// waitVisibleText waits until evID shows want (the text of its latest
// edit) and returns visibleText's edit count and event: Dendrite indexes an
// edit for /relations a moment after it accepted it, later on a loaded
// machine, so right after a turn ended an earlier edit may still be the
// latest it shows.
func (e *turnEnv) waitVisibleText(evID id.EventID, want string) (int, *event.Event) {
	e.t.Helper()
	var (
		edits int
		ev    *event.Event
	)
	testkit.Until(e.t, 30*time.Second, func() (bool, string) {
		var text string
		text, edits, ev = e.visibleText(evID)
		return text == want, fmt.Sprintf("visible %q, want %q", text, want)
	})
	return edits, ev
}

func TestMentionGetsStreamedThreadedReply(t *testing.T) {
	answer := "Hello Alice, the weather in Paris is mild today."
	var (
		sessMu   sync.Mutex
		sessions []hooks.SessionContext
	)
	e := newTurnEnv(t, []string{"helper", "other"}, "", hooks.Handle(hooks.MessageEnrich, "location", func(_ context.Context, c *hooks.MessageEnrichContext) error {
		c.AddMetadata("location", "Alice is in Paris", hooks.StableItem)
		return nil
	}), hooks.Handle(hooks.SessionStarted, "sessions", func(_ context.Context, c *hooks.SessionContext) error {
		sessMu.Lock()
		defer sessMu.Unlock()
		sessions = append(sessions, *c)
		return nil
	}))
	e.llm.Script(
		llmtest.Reply{Text: llmtest.Split(answer, 8), ChunkDelay: 60 * time.Millisecond},
		llmtest.Text("Second answer."),
	)
	q := e.say("@"+e.localpart("helper")+" what is the weather?", "")
	got := e.waitTerminal(1)
	if len(got) != 1 || got[0] != "after:"+answer {
		t.Fatalf("terminal events %v, want after_response with the scripted text", got)
	}
	res := e.results[0]
	if res.DeliveryKind != hooks.DeliveryEdited {
		t.Errorf("delivery %s, want edited (streamed)", res.DeliveryKind)
	}
	edits, ev := e.waitVisibleText(res.EventID, answer)
	if edits < 2 {
		t.Errorf("%d edits, want streaming edits and a final one", edits)
	}
	if rel := ev.Content.AsMessage().RelatesTo; rel == nil || rel.Type != event.RelThread || rel.EventID != q {
		t.Errorf("reply relation %+v, want the thread of %s", rel, q)
	}
	if ev.Sender != e.userID("helper") {
		t.Errorf("reply from %s, want the mentioned agent", ev.Sender)
	}
	req := e.llm.LastRequest(t)
	firstPrompt := string(req.Body.Messages[len(req.Body.Messages)-1].Content)
	if !strings.Contains(firstPrompt, "<hookroom_message_context>") || !strings.Contains(firstPrompt, "Alice is in Paris") {
		t.Errorf("user turn sent to the model lacks the message context block:\n%s", firstPrompt)
	}

	// The stored history holds the enriched turn…
	scope := agents.NewScopeKey(e.room, q)
	hist, err := e.bot.bot.history.Load(context.Background(), scope)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Content != firstPrompt || hist[1].Content != answer {
		t.Fatalf("history %+v, want the enriched prompt and the answer", hist)
	}
	// …and the next turn in the thread (no mention: the thread's agent
	// continues) replays it byte for byte.
	e.say("and tomorrow?", q)
	got = e.waitTerminal(2)
	if got[1] != "after:Second answer." {
		t.Fatalf("second turn: %v", got)
	}
	reqs := e.llm.Requests()
	replayed := messageContents(reqs[len(reqs)-1].Body.Messages)
	if !slices.Contains(replayed, firstPrompt) || !slices.Contains(replayed, answer) {
		t.Errorf("second request does not replay the first turn byte-identically: %q", replayed)
	}
	if first, _ := json.Marshal(firstPrompt); !strings.Contains(string(reqs[len(reqs)-1].Raw), strings.Trim(string(first), `"`)) {
		t.Errorf("raw second request lacks the first prompt's exact JSON encoding")
	}

	// session:started fired once, for the first turn (it runs before
	// after_response), and names the conversation as envelopes do.
	sessMu.Lock()
	defer sessMu.Unlock()
	if len(sessions) != 1 {
		t.Fatalf("session:started fired %d times, want once", len(sessions))
	}
	s := sessions[0]
	if s.SessionID != string(scope) || s.SessionID != res.Envelope.SessionID {
		t.Errorf("session:started session_id %q, want the scope %q (envelope: %q)", s.SessionID, scope, res.Envelope.SessionID)
	}
	if s.HistoryID == "" || s.HistoryID == s.SessionID {
		t.Errorf("session:started history_id %q, want the stored history's own id", s.HistoryID)
	}
	if s.Agent != "helper" || s.RoomID != e.room || s.ThreadID != q {
		t.Errorf("session:started %+v, want helper in the thread of %s", s, q)
	}
}

func TestRouterPicksAgentWithoutMention(t *testing.T) {
	e := newTurnEnv(t, []string{"alpha", "beta"}, "    role: Knows about birds.\n")
	e.llm.On(llmtest.ModelIs("router-model"), llmtest.Text("beta"))
	e.llm.On(llmtest.ModelIs("agent-model"), llmtest.Text("Beta answers."))
	e.say("which bird sings at dawn?", "")
	got := e.waitTerminal(1)
	if got[0] != "after:Beta answers." {
		t.Fatalf("terminal %v", got)
	}
	_, _, ev := e.visibleText(e.results[0].EventID)
	if ev.Sender != e.userID("beta") {
		t.Errorf("answered by %s, want the router's choice beta", ev.Sender)
	}
	var routerAsked bool
	for _, r := range e.llm.Requests() {
		if r.Body.Model == "router-model" {
			routerAsked = true
			if sys := string(r.Body.Messages[0].Content); !strings.Contains(sys, "alpha") || !strings.Contains(sys, "beta") {
				t.Errorf("router prompt lacks the agents: %s", r.Body.Messages[0].Content)
			}
		}
	}
	if !routerAsked {
		t.Error("the router model was not asked")
	}
}

func TestToolCallsGoThroughGates(t *testing.T) {
	var mu sync.Mutex
	var before []string
	var after []hooks.ToolAfterCallContext
	e := newTurnEnv(t, []string{"helper"}, "    tools: [current_time, room_info]\n",
		hooks.Handle(hooks.ToolBeforeCall, "no_room_info", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
			mu.Lock()
			before = append(before, c.Tool+"@"+string(c.Agent)+"@"+string(c.RoomID))
			mu.Unlock()
			if c.Tool == "room_info" {
				c.Decline("room info is private here")
			}
			return nil
		}),
		hooks.Handle(hooks.ToolAfterCall, "record", func(_ context.Context, c *hooks.ToolAfterCallContext) error {
			mu.Lock()
			after = append(after, *c)
			mu.Unlock()
			return nil
		}),
	)
	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("call_1", "room_info", `{}`)),
		llmtest.Calls(llmtest.ToolCall("call_2", "current_time", `{"timezone":"Europe/Paris"}`)),
		llmtest.Text("It is late."),
	)
	e.say("what time is it here?", "")
	if got := e.waitTerminal(1); got[0] != "after:It is late." {
		t.Fatalf("terminal %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	room := string(e.room)
	if want := []string{"room_info@helper@" + room, "current_time@helper@" + room}; !slices.Equal(before, want) {
		t.Errorf("tool:before_call saw %v, want %v", before, want)
	}
	if len(after) != 2 || !after[0].Blocked || after[0].Result != "" || after[1].Blocked || after[1].Error != "" || !strings.Contains(after[1].Result, "Europe/Paris") {
		t.Errorf("tool:after_call contexts %+v", after)
	}
	declined := lastToolMessage(e, 1)
	if declined != agents.DeclinedResult("room_info", "room info is private here") {
		t.Errorf("model saw %q for the declined call", declined)
	}
}

func TestTerminalEvents(t *testing.T) {
	t.Run("before_response suppresses", func(t *testing.T) {
		e := newTurnEnv(t, []string{"helper"}, "", hooks.Handle(hooks.MessageBeforeResponse, "hush", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			c.Draft.Suppress = strings.Contains(c.Draft.Text, "secret")
			return nil
		}))
		e.llm.Script(llmtest.Text("the secret is 42"))
		e.say("tell me", "")
		if got := e.waitTerminal(1); !slices.Equal(got, []string{"cancelled:suppressed_by_hook"}) {
			t.Fatalf("terminal %v", got)
		}
	})
	t.Run("final transform rewrites the last edit", func(t *testing.T) {
		e := newTurnEnv(t, []string{"helper"}, "", hooks.Handle(hooks.MessageFinalResponseTransform, "sign", func(_ context.Context, c *hooks.FinalResponseContext) error {
			c.Draft.Text += "\n\n— signed"
			return nil
		}))
		e.llm.Script(llmtest.Reply{Text: llmtest.Split("a slowly streamed answer", 6), ChunkDelay: 60 * time.Millisecond})
		e.say("go", "")
		want := "a slowly streamed answer\n\n— signed"
		if got := e.waitTerminal(1); !slices.Equal(got, []string{"after:" + want}) {
			t.Fatalf("terminal %v", got)
		}
		e.waitVisibleText(e.results[0].EventID, want)
	})
	t.Run("unauthorized sender gets nothing", func(t *testing.T) {
		e := newTurnEnv(t, []string{"helper"}, "")
		stranger := e.hs.RegisterUser(t, "mallory")
		if _, err := stranger.Client.JoinRoomByID(context.Background(), e.room); err != nil {
			t.Fatal(err)
		}
		e.llm.Script(llmtest.Text("should never be asked"))
		if _, err := stranger.Client.SendText(context.Background(), e.room, "hello bots"); err != nil {
			t.Fatal(err)
		}
		// The person's message after it is answered; the stranger's never.
		e.llm.Script(llmtest.Text("hi alice"))
		e.say("hello", "")
		if got := e.waitTerminal(1); !slices.Equal(got, []string{"after:should never be asked"}) && !slices.Equal(got, []string{"after:hi alice"}) {
			t.Fatalf("terminal %v", got)
		}
		// A room's messages are handled in order: by the time alice's was
		// answered, the stranger's had been refused (or its turn started).
		if n := e.llm.Count(); n != 1 {
			t.Errorf("%d model calls, want 1 (none for the stranger)", n)
		}
	})
	t.Run("stop reaction cancels", func(t *testing.T) {
		e := newTurnEnv(t, []string{"helper"}, "")
		e.llm.Script(llmtest.Reply{Text: llmtest.Split(strings.Repeat("word ", 200), 200), ChunkDelay: 50 * time.Millisecond})
		q := e.say("write a long essay", "")
		reply := e.waitForAgentMessage(q)
		if _, err := e.person.Client.SendReaction(context.Background(), e.room, reply, turn.StopKey); err != nil {
			t.Fatal(err)
		}
		if got := e.waitTerminal(1); !slices.Equal(got, []string{"cancelled:cancelled_by_user"}) {
			t.Fatalf("terminal %v", got)
		}
	})
	t.Run("model error", func(t *testing.T) {
		e := newTurnEnv(t, []string{"helper"}, "")
		e.llm.Script(llmtest.HTTPError(500, "upstream exploded"))
		q := e.say("hi", "")
		if got := e.waitTerminal(1); !slices.Equal(got, []string{"cancelled:model_error"}) {
			t.Fatalf("terminal %v", got)
		}
		text, _, _ := e.visibleText(e.waitForAgentMessage(q))
		if !strings.HasPrefix(text, "⚠️ Sorry") {
			t.Errorf("person sees %q, want a short error", text)
		}
		// The server keeps serving.
		e.llm.Script(llmtest.Text("better now"))
		e.say("again?", "")
		if got := e.waitTerminal(2); got[1] != "after:better now" {
			t.Errorf("after an error: %v", got)
		}
	})
	t.Run("shutdown cancels, the restart answers", func(t *testing.T) {
		e := newTurnEnv(t, []string{"helper"}, "")
		e.llm.Script(
			llmtest.Reply{Text: llmtest.Split(strings.Repeat("word ", 400), 400), ChunkDelay: 50 * time.Millisecond},
			llmtest.Text("Answered after the restart."),
		)
		q := e.say("write a long essay", "")
		e.waitForAgentMessage(q) // the turn is streaming
		e.restart(func() {
			// hookroom stopped mid-turn: exactly one terminal event.
			if got := e.waitTerminal(1); !slices.Equal(got, []string{"cancelled:shutdown"}) {
				t.Fatalf("terminal at shutdown %v, want cancelled:shutdown", got)
			}
		})
		// The message stayed unhandled: the restarted hookroom answers it.
		if got := e.waitTerminal(2); got[1] != "after:Answered after the restart." {
			t.Fatalf("terminal after the restart %v", got)
		}
	})
	t.Run("garbage stream", func(t *testing.T) {
		e := newTurnEnv(t, []string{"helper"}, "")
		e.llm.Script(llmtest.Garbage("data: {not json", "data: ]]]"))
		e.say("hi", "")
		if got := e.waitTerminal(1); !slices.Equal(got, []string{"cancelled:model_error"}) {
			t.Fatalf("terminal %v", got)
		}
	})
}

// waitForAgentMessage returns the first message an agent posted in the
// thread of q.
func (e *turnEnv) waitForAgentMessage(q id.EventID) id.EventID {
	e.t.Helper()
	var msg id.EventID
	testkit.Eventually(e.t, 30*time.Second, fmt.Sprintf("an agent message shows in the thread of %s", q), func() bool {
		rels, err := e.person.Client.GetRelations(context.Background(), e.room, q, &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionForward, Limit: 50})
		if err != nil {
			return false
		}
		for _, ev := range rels.Chunk {
			if ev.Sender != e.person.UserID {
				msg = ev.ID
				return true
			}
		}
		return false
	})
	return msg
}

const childTurnEnv = "HOOKROOM_TEST_CHILD_TURN"

// A turn killed by SIGKILL while streaming is answered exactly once after
// the restart: the placeholder of the first run is reused, nothing is lost.
func TestSIGKILLMidStream(t *testing.T) {
	e := newTurnEnv(t, []string{"helper"}, "")
	e.bot.stop(t)
	e.llm.Script(llmtest.Reply{Text: llmtest.Split(strings.Repeat("slow ", 100), 100), ChunkDelay: 100 * time.Millisecond})

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+e.yaml, childSecret+"="+e.hs.Secret, childTurnEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	q := e.say("tell me a long story", "")
	first := e.waitForAgentMessage(q)
	// Wait until the stream has visibly started, then kill.
	testkit.Eventually(t, 20*time.Second, "the child streams", func() bool {
		_, edits, _ := e.visibleText(first)
		return edits > 0
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()

	e.llm.Script(llmtest.Text("The whole story, at last."))
	e.start(e.config(e.cfg), e.rec, Options{PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond,
		Registry: func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry([]hooks.Plugin{e.rec.plugin(), {Name: "test", Hooks: []hooks.Hook{
				hooks.Handle(hooks.MessageAfterResponse, "after", func(_ context.Context, c *hooks.AfterResponseContext) error {
					e.mu.Lock()
					e.results = append(e.results, c.Result)
					e.mu.Unlock()
					e.rec.add("terminal")
					return nil
				}),
			}}}, hooks.Options{Services: s})
		}})
	e.rec.waitFor(t, "terminal", 1, 60*time.Second)
	if e.results[0].EventID != first {
		t.Errorf("answer delivered as %s, want the first run's placeholder %s edited", e.results[0].EventID, first)
	}
	// Exactly one agent message in the thread (edits aside). A barrier:
	// once the restarted hookroom saw a later message of the room,
	// everything the replay sent before it is in the room.
	e.llm.Script(llmtest.Text("barrier answer")) // the barrier is a message like any other
	barrier(t, e.rec, e.person, e.room)
	rels, err := e.person.Client.GetRelations(context.Background(), e.room, q, &mautrix.ReqGetRelations{RelationType: event.RelThread, Dir: mautrix.DirectionForward, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var agentMsgs int
	for _, ev := range rels.Chunk {
		if ev.Sender == e.userID("helper") {
			agentMsgs++
		}
	}
	if agentMsgs != 1 {
		t.Errorf("%d agent messages in the thread, want 1", agentMsgs)
	}
	e.waitVisibleText(first, "The whole story, at last.")
}

// On PostgreSQL, a turn is answered, hookroom restarts on the same database, and the next
// turn is answered with the first one in its history.
func TestTurnsOnPostgresSurviveRestart(t *testing.T) {
	e := newTurnEnvOn(t, fmt.Sprintf("database:\n  type: postgres\n  uri: %q\n", pgtest.URL(t)), []string{"helper"}, "")
	e.llm.Script(llmtest.Text("First answer."))
	q := e.say("what is the first question?", "")
	if got := e.waitTerminal(1); got[0] != "after:First answer." {
		t.Fatalf("terminal %v", got)
	}
	e.bot.stop(t)

	e.llm.Script(llmtest.Text("Second answer."))
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
	e.say("and the second?", q) // in the first turn's thread: its history
	if got := e.waitTerminal(2); got[1] != "after:Second answer." {
		t.Fatalf("terminal %v", got)
	}
	reqs := e.llm.Requests()
	joined := strings.Join(messageContents(reqs[len(reqs)-1].Body.Messages), "\n")
	if !strings.Contains(joined, "what is the first question?") || !strings.Contains(joined, "First answer.") {
		t.Errorf("the turn after the restart lacks the first turn (history on PostgreSQL): %s", joined)
	}
}
