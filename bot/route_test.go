package bot

import (
	"context"
	"errors"
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

// TestUserError: what a person reads when a turn's model call fails — it
// says what went wrong in their terms and never the provider's raw text.
func TestUserError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"timeout", &agents.ModelError{Kind: agents.ErrorTimeout}, "the model took too long."},
		{"rate limited", &agents.ModelError{StatusCode: 429, Retryable: true}, "the model is busy (rate limited); try again in a moment."},
		{"bad key", &agents.ModelError{StatusCode: 401, Message: "invalid key sk-secret"}, "the model rejected hookroom's credentials."},
		{"forbidden", &agents.ModelError{StatusCode: 403}, "the model rejected hookroom's credentials."},
		{"overloaded", &agents.ModelError{StatusCode: 503, Retryable: true}, "the model is unavailable right now; try again in a moment."},
		{"bad request", &agents.ModelError{StatusCode: 400, Message: "context too long"}, "the model returned an error."},
		{"wrapped", fmt.Errorf("failed to run turn: %w", &agents.ModelError{StatusCode: 429}), "the model is busy (rate limited); try again in a moment."},
		{"too many tools", fmt.Errorf("failed: %w", agents.ErrToolIterations), "it needed too many tool calls."},
		{"the turn's deadline", errTurnTimeout, "it took longer than 10m0s."},
		{"anything else", errors.New("connection reset by peer"), "the model call failed."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := userError(tt.err); got != tt.want {
				t.Errorf("userError = %q, want %q", got, tt.want)
			}
		})
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
