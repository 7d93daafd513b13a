package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
)

func TestMentionedAgents(t *testing.T) {
	cfg, err := config.Parse([]byte(`matrix:
  homeserver: http://localhost:8008
  server_name: example.org
models:
  default:
    provider: echo
agents:
  helper:
    username: helper
    display_name: Helper Bot
  helper2:
    username: helper-two
  coder:
    username: code-agent
    display_name: Cody
`), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	users := map[hooks.AgentName]id.UserID{
		"helper": "@helper:example.org", "helper2": "@helper-two:example.org", "coder": "@code-agent:example.org",
	}
	userID := func(n hooks.AgentName) id.UserID { return users[n] }
	all := []hooks.AgentName{"coder", "helper", "helper2"}
	tests := []struct {
		name     string
		body     string
		mentions []id.UserID
		cands    []hooks.AgentName
		want     []hooks.AgentName
	}{
		{name: "nobody", body: "what is the weather?"},
		{name: "@name", body: "@coder fix this", want: []hooks.AgentName{"coder"}},
		{name: "@localpart", body: "hey @code-agent, fix this", want: []hooks.AgentName{"coder"}},
		{name: "full user id", body: "@code-agent:example.org fix this", want: []hooks.AgentName{"coder"}},
		{name: "display name, any case", body: "@cody please", want: []hooks.AgentName{"coder"}},
		{name: "display name with a space", body: "@helper bot: hi", want: []hooks.AgentName{"helper"}},
		{name: "a longer name is not a mention of a shorter one", body: "@helper2 hi", want: []hooks.AgentName{"helper2"}},
		{name: "name followed by punctuation", body: "thanks @helper.", want: []hooks.AgentName{"helper"}},
		{name: "name inside a word", body: "email me at x@helperz.org", want: nil},
		{name: "in order of appearance", body: "@helper2 and @coder and @helper", want: []hooks.AgentName{"helper2", "coder", "helper"}},
		{name: "m.mentions comes first", body: "@coder look, Helper Bot too", mentions: []id.UserID{"@helper:example.org"},
			want: []hooks.AgentName{"helper", "coder"}},
		{name: "only candidates count", body: "@coder and @helper", cands: []hooks.AgentName{"helper"}, want: []hooks.AgentName{"helper"}},
		{name: "an agent without an account is found by name", body: "@helper hi", cands: []hooks.AgentName{"helper"},
			want: []hooks.AgentName{"helper"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := &event.MessageEventContent{MsgType: event.MsgText, Body: tt.body}
			if tt.mentions != nil {
				msg.Mentions = &event.Mentions{UserIDs: tt.mentions}
			}
			cands := tt.cands
			if cands == nil {
				cands = all
			}
			got := mentionedAgents(cfg, userID, msg, cands)
			if !slices.Equal(got, tt.want) {
				t.Errorf("mentionedAgents(%q) = %v, want %v", tt.body, got, tt.want)
			}
		})
	}
	// An agent a reload removed has no account any more: no panic, found
	// by its configured names only.
	none := func(hooks.AgentName) id.UserID { return "" }
	msg := &event.MessageEventContent{Body: "@helper hi", Mentions: &event.Mentions{UserIDs: []id.UserID{""}}}
	if got := mentionedAgents(cfg, none, msg, []hooks.AgentName{"helper", "gone"}); !slices.Equal(got, []hooks.AgentName{"helper"}) {
		t.Errorf("without accounts: %v", got)
	}
}

func TestAgentNamedIn(t *testing.T) {
	cands := []hooks.AgentName{"helper", "helper2", "coder"}
	tests := []struct {
		answer string
		want   hooks.AgentName
		ok     bool
	}{
		{"coder", "coder", true},
		{"Coder.", "coder", true},
		{"  HELPER2\n", "helper2", true},
		{"helper", "helper", true},
		{"I would pick coder, not helper", "coder", true},
		{"nobody fits", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := agentNamedIn(tt.answer, cands)
		if got != tt.want || ok != tt.ok {
			t.Errorf("agentNamedIn(%q) = %q, %v; want %q, %v", tt.answer, got, ok, tt.want, tt.ok)
		}
	}
}

func TestPreRoute(t *testing.T) {
	b := offlineBot(t, "")
	ctx := context.Background()
	tests := []struct {
		name   string
		env    hooks.Envelope
		cands  []hooks.AgentName
		want   routeDecision
		wantOK bool
	}{
		{name: "the first mention wins", env: hooks.Envelope{MentionedAgents: []hooks.AgentName{"b", "a"}},
			cands: []hooks.AgentName{"a", "b"}, want: routeDecision{"b", "mention"}, wantOK: true},
		{name: "the only agent in the room", cands: []hooks.AgentName{"a"}, want: routeDecision{"a", "single"}, wantOK: true},
		{name: "several agents and no mention: ask the router", cands: []hooks.AgentName{"a", "b"}},
		{name: "nobody in the room", cands: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := b.preRoute(ctx, tt.env, tt.cands)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("preRoute = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestRoute: who answers a message in a room with two agents, decided by
// a mention, the thread's agent, the router's model, or the fallback when
// the router cannot decide — and what the router model is asked.
func TestRoute(t *testing.T) {
	const room id.RoomID = "!two:example.org"
	tests := []struct {
		name   string
		body   string
		thread id.EventID // the thread the message is in
		// threadAgent, when set, answered the thread before.
		threadAgent hooks.AgentName
		router      pacedModel // what the router model answers
		echoRouter  bool       // the router runs on the echo model: no routing model
		want        routeDecision
		asked       bool // the router model was asked
	}{
		{name: "a mention wins over everything", body: "@coder fix it", router: pacedModel{pieces: []string{"helper"}},
			want: routeDecision{"coder", "mention"}},
		{name: "the thread's agent answers in its thread", body: "and then?", thread: "$root", threadAgent: "coder",
			router: pacedModel{pieces: []string{"helper"}}, want: routeDecision{"coder", "thread"}},
		{name: "a new thread asks the router", body: "write a sort function", router: pacedModel{pieces: []string{"Coder"}},
			want: routeDecision{"coder", "router"}, asked: true},
		{name: "the router's answer may say more than the name", body: "hello", router: pacedModel{pieces: []string{"I'd pick ", "helper."}},
			want: routeDecision{"helper", "router"}, asked: true},
		{name: "the router names no agent: the first agent by name", body: "hm", router: pacedModel{pieces: []string{"nobody"}},
			want: routeDecision{"coder", "fallback"}, asked: true},
		{name: "the router model fails: the first agent by name", body: "hm",
			router: pacedModel{err: &agents.ModelError{Kind: agents.ErrorHTTP, StatusCode: 500, Message: "down"}},
			want:   routeDecision{"coder", "fallback"}, asked: true},
		{name: "an echo router does not route", body: "hm", echoRouter: true, want: routeDecision{"coder", "fallback"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			routerModel := "r"
			if tt.echoRouter {
				routerModel = "m"
			}
			ctx, b := unstartedBot(t, fmt.Sprintf(`
models:
  m: {provider: echo}
  r: {provider: openai, base_url: "http://127.0.0.1:9", model: router-model}
router: {model: %s}
agents:
  helper: {model: m, role: everyday questions}
  coder: {model: m, role: code}
`, routerModel))
			asked := 0
			w := b.w()
			w.models["r"] = countingModel{Model: tt.router, calls: &asked}
			w.joined = map[hooks.AgentName][]id.RoomID{"helper": {room}, "coder": {room}}
			if tt.threadAgent != "" {
				scope := agents.NewScopeKey(room, tt.thread)
				if _, err := b.history.AppendTurn(ctx, scope, tt.threadAgent, "$earlier", nil,
					agents.Message{Role: agents.RoleUser, Content: "hi"}); err != nil {
					t.Fatal(err)
				}
			}
			msg := &event.MessageEventContent{MsgType: event.MsgText, Body: tt.body}
			if tt.thread != "" {
				msg.RelatesTo = (&event.RelatesTo{}).SetThread(tt.thread, tt.thread)
			}
			ev := &event.Event{ID: "$m", RoomID: room, Sender: "@alice:example.org", Type: event.EventMessage,
				Content: event.Content{Parsed: msg}}
			got, ok := b.route(ctx, w, ev, msg, b.envelope(w, ev, msg))
			if !ok || got != tt.want {
				t.Errorf("route = %+v, %v; want %+v", got, ok, tt.want)
			}
			if (asked > 0) != tt.asked {
				t.Errorf("the router model was asked %d times, want asked = %v", asked, tt.asked)
			}
		})
	}
}

// countingModel counts the requests to Model.
type countingModel struct {
	agents.Model
	calls *int
}

func (m countingModel) Stream(ctx context.Context, req *agents.Request) (agents.Stream, error) {
	*m.calls++
	return m.Model.Stream(ctx, req)
}

func TestParseCommand(t *testing.T) {
	tests := []struct {
		body string
		want command
		ok   bool
	}{
		{"!help", command{name: "help", args: []string{}}, true},
		{"  !Usage all  ", command{name: "usage", args: []string{"all"}}, true},
		{"!schedule in 2 seconds say hi", command{name: "schedule", args: []string{"in", "2", "seconds", "say", "hi"}}, true},
		{"!", command{}, false},
		{"hello !help", command{}, false},
		{"", command{}, false},
	}
	for _, tt := range tests {
		got, ok := parseCommand(tt.body)
		if ok != tt.ok || got.name != tt.want.name || !slices.Equal(got.args, tt.want.args) {
			t.Errorf("parseCommand(%q) = %+v, %v; want %+v, %v", tt.body, got, ok, tt.want, tt.ok)
		}
	}
}

// TestStartTurnWithoutTheAgentsAccount: a turn starts from the world its
// message was routed in; an agent without an account there is refused with
// a log line, never a nil account that panics later.
func TestStartTurnWithoutTheAgentsAccount(t *testing.T) {
	b := offlineBot(t, "")
	w := b.w()
	var log strings.Builder
	ctx := zerolog.New(&log).WithContext(context.Background())
	b.startTurn(ctx, w, &event.Event{ID: "$m", RoomID: "!r:example.org"}, hooks.Envelope{}, "gone", nil, false)
	if !strings.Contains(log.String(), "the routed agent has no account") {
		t.Errorf("log %q, want the refusal", log.String())
	}
}

// TestWhatReachesThePipeline: which inbound events hookroom acts on at
// all. A person's message in a room with an agent runs message:received
// and is routed to a turn; messages of hookroom's own accounts and of
// configured bots, of people authorization does not allow, edits and
// malformed messages are not; a message in a room without agents is
// received but not answered. Reactions of allowed people reach
// reaction:received.
func TestWhatReachesThePipeline(t *testing.T) {
	const (
		room  id.RoomID = "!room:example.org"
		empty id.RoomID = "!empty:example.org"
		alice id.UserID = "@alice:example.org"
		eve   id.UserID = "@eve:example.org"
		bot   id.UserID = "@rss:example.org"
		agent id.UserID = "@helper:example.org"
	)
	text := func(body string) *event.MessageEventContent {
		return &event.MessageEventContent{MsgType: event.MsgText, Body: body}
	}
	edit := text("* fixed")
	edit.RelatesTo = (&event.RelatesTo{}).SetReplace("$old")
	tests := []struct {
		name     string
		sender   id.UserID
		room     id.RoomID
		typ      event.Type
		content  any
		raw      map[string]any // instead of content
		received bool           // message:received or reaction:received fired
		async    bool           // a turn was started (handled in the background)
	}{
		{name: "a person's message", sender: alice, room: room, typ: event.EventMessage, content: text("hello"), received: true, async: true},
		{name: "a message in a room without agents", sender: alice, room: empty, typ: event.EventMessage, content: text("hello"), received: true},
		{name: "an agent's own message", sender: agent, room: room, typ: event.EventMessage, content: text("hello")},
		{name: "a configured bot's message", sender: bot, room: room, typ: event.EventMessage, content: text("hello")},
		{name: "someone authorization does not allow", sender: eve, room: room, typ: event.EventMessage, content: text("hello")},
		{name: "an edit", sender: alice, room: room, typ: event.EventMessage, content: edit},
		{name: "a body that is not a string", sender: alice, room: room, typ: event.EventMessage, raw: map[string]any{"msgtype": "m.text", "body": 42}},
		{name: "a person's reaction", sender: alice, room: room, typ: event.EventReaction, received: true,
			content: &event.ReactionEventContent{RelatesTo: *(&event.RelatesTo{}).SetAnnotation("$m", "👍")}},
		{name: "a reaction of someone not allowed", sender: eve, room: room, typ: event.EventReaction,
			content: &event.ReactionEventContent{RelatesTo: *(&event.RelatesTo{}).SetAnnotation("$m", "👍")}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			received := 0
			count := func(context.Context, *hooks.MessageReceivedContext) error { received++; return nil }
			countReaction := func(context.Context, *hooks.ReactionReceivedContext) error { received++; return nil }
			ctx, b := unstartedBot(t, fmt.Sprintf(`
models: {m: {provider: echo}}
agents: {helper: {model: m}}
# the bot and the agent would be allowed, were they not bots
authorization: {global_users: [%q, %q, %q]}
`, alice, bot, agent), hooks.Handle(hooks.MessageReceived, "count", count), hooks.Handle(hooks.ReactionReceived, "count_reactions", countReaction))
			w := b.w()
			w.joined = map[hooks.AgentName][]id.RoomID{"helper": {room}}
			w.accounts = map[id.UserID]entity{agent: {name: "helper"}}
			w.cfg.Matrix.BotAccounts = []id.UserID{bot}
			ev := &event.Event{ID: id.EventID(fmt.Sprintf("$e%d", i)), RoomID: tt.room, Sender: tt.sender, Type: tt.typ}
			if tt.raw != nil {
				ev.Content.Raw = tt.raw
			} else {
				raw, err := json.Marshal(tt.content)
				if err != nil {
					t.Fatal(err)
				}
				ev.Content.VeryRaw = raw
			}
			if err := ev.Content.ParseRaw(ev.Type); err != nil && tt.raw == nil {
				t.Fatal(err)
			}
			async := b.handleEvent(ctx, ev, false)
			if async != tt.async || (received > 0) != tt.received {
				t.Errorf("handled in a turn = %v, hooks fired %d times; want %v, %v", async, received, tt.async, tt.received)
			}
		})
	}
}
