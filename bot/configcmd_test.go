package bot

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
)

// !config's arguments: the agent, the key (any case) and the rest of the
// message as the value, its newlines kept.
func TestParseConfigArgs(t *testing.T) {
	tests := []struct {
		body              string
		agent, key, value string
	}{
		{"!config", "", "", ""},
		{"  !config  helper ", "helper", "", ""},
		{"!config helper MODEL big", "helper", "model", "big"},
		{"!config helper tools current_time, web_*", "helper", "tools", "current_time, web_*"},
		{"!config helper instructions Be brief.\n\nAnswer in English.  ", "helper", "instructions", "Be brief.\n\nAnswer in English."},
		{"!config\nhelper\tinstructions\nline one\n  line two", "helper", "instructions", "line one\n  line two"},
	}
	for _, tt := range tests {
		agent, key, value := parseConfigArgs(tt.body)
		if agent != tt.agent || key != tt.key || value != tt.value {
			t.Errorf("parseConfigArgs(%q) = %q, %q, %q; want %q, %q, %q", tt.body, agent, key, value, tt.agent, tt.key, tt.value)
		}
	}
}

// Typed values: tools as a comma-separated list or none, a model as one
// word, instructions as they are.
func TestParseConfigValue(t *testing.T) {
	tests := []struct {
		key, raw string
		want     any
		err      string
	}{
		{"tools", "current_time, web_*", []string{"current_time", "web_*"}, ""},
		{"tools", "current_time", []string{"current_time"}, ""},
		{"tools", "None", []string{}, ""},
		{"tools", "a,,b", nil, "comma-separated list"},
		{"tools", "a b", nil, "is not a tool name"},
		{"model", "big", "big", ""},
		{"model", "big one", nil, "one name"},
		{"instructions", "Be brief.\nReally.", "Be brief.\nReally.", ""},
	}
	for _, tt := range tests {
		got, err := parseConfigValue(tt.key, tt.raw)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("parseConfigValue(%q, %q) = %v, %v; want an error containing %q", tt.key, tt.raw, got, err, tt.err)
			}
			continue
		}
		if err != nil || !sameSetting(got, tt.want) {
			t.Errorf("parseConfigValue(%q, %q) = %#v, %v; want %#v", tt.key, tt.raw, got, err, tt.want)
		}
	}
}

// Only the proposer's ✅ answers a proposal, once; after five minutes it
// expires; a proposal of another bot (before a restart) is not known.
func TestConfigProposalAnswers(t *testing.T) {
	alice, bob := id.UserID("@alice:example.org"), id.UserID("@bob:example.org")
	tests := []struct {
		name    string
		answers []struct {
			by    id.UserID
			after time.Duration
			bot   int
		}
		want []configAnswer
	}{
		{"proposer in time", answersOf(alice, 4*time.Minute, 0), []configAnswer{configApply}},
		{"someone else, then the proposer", append(answersOf(bob, time.Minute, 0), answersOf(alice, 2*time.Minute, 0)...),
			[]configAnswer{configNotProposer, configApply}},
		{"proposer too late", answersOf(alice, configProposalTTL+time.Second, 0), []configAnswer{configExpired}},
		{"answered once", append(answersOf(alice, time.Minute, 0), answersOf(alice, 2*time.Minute, 0)...),
			[]configAnswer{configApply, configNotProposal}},
		{"another bot", answersOf(alice, time.Minute, 1), []configAnswer{configNotProposal}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bots := []*Bot{{}, {}}
				s := &configProposals{byEvent: make(map[id.EventID]*configProposal)}
				start := time.Now()
				s.add("$proposal", &configProposal{owner: bots[0], by: alice, expires: start.Add(configProposalTTL)}, start)
				var got []configAnswer
				for _, a := range tt.answers {
					time.Sleep(time.Until(start.Add(a.after)))
					_, verdict := s.answer(bots[a.bot], "$proposal", a.by, time.Now())
					got = append(got, verdict)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("answers %v, want %v", got, tt.want)
				}
			})
		})
	}
}

func answersOf(by id.UserID, after time.Duration, bot int) []struct {
	by    id.UserID
	after time.Duration
	bot   int
} {
	return []struct {
		by    id.UserID
		after time.Duration
		bot   int
	}{{by, after, bot}}
}

func TestIsConfirmKey(t *testing.T) {
	for key, want := range map[string]bool{"✅": true, "✅\ufe0f": true, " ✅ ": true, "👍": false, "❌": false, "": false} {
		if got := isConfirmKey(key); got != want {
			t.Errorf("isConfirmKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// What !config answers, from the refusals to a proposal: off by default,
// global users only, agents of the room, allow-listed keys, a change that
// would not validate refused before it is proposed.
func TestConfigReply(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	text := `matrix:
  homeserver: https://matrix.example.org
  server_name: example.org
  registration:
    shared_secret: s3cret
models:
  small: {provider: echo}
  big: {provider: echo}
rooms:
  main:
    id: "!main:example.org"
defaults:
  config_command: true
agents:
  helper:
    model: small   # kept
    tools: [current_time]
    rooms: [main]
  other:
    model: small
    rooms: [main]
  secretive:
    model: small
    instructions: "The code word is ${CODE_WORD}."
    rooms: [main]
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := config.WithLookupEnv(func(k string) (string, bool) { return "swordfish", k == "CODE_WORD" })
	cfg, err := config.Load(t.Context(), path, env)
	if err != nil {
		t.Fatal(err)
	}
	off := *cfg
	off.Defaults.ConfigCommand = false
	admin, person, room := id.UserID("@admin:example.org"), id.UserID("@someone:example.org"), id.RoomID("!main:example.org")
	cfg.Authorization.GlobalUsers = []id.UserID{admin}
	worldOf := func(c *config.Config) *world {
		return &world{cfg: c, rooms: map[string]id.RoomID{"main": room},
			joined: map[hooks.AgentName][]id.RoomID{"helper": {room}, "secretive": {room}}}
	}
	tests := []struct {
		name     string
		cfg      *config.Config
		sender   id.UserID
		body     string
		want     string
		proposal bool
	}{
		{"off", &off, admin, "!config", "turned off here (defaults.config_command", false},
		{"not an admin", cfg, person, "!config", "Only hookroom's administrators", false},
		{"show", cfg, admin, "!config", "**helper**: model `small`; tools `current_time`; instructions not set", false},
		{"agent of another room", cfg, admin, "!config other model big", "no agent `other` in this room; agents here: helper", false},
		{"unknown key", cfg, admin, "!config helper rooms main", "cannot change `rooms`; it can change: model, instructions, tools", false},
		{"thread mode", cfg, admin, "!config helper thread_mode room", "not a setting of one agent but of the room: `!config room thread_mode", false},
		{"show the room", cfg, admin, "!config", "This room (rooms.main): thread_mode `thread` (defaults.thread_mode)", false},
		{"the room's thread mode", cfg, admin, "!config room thread_mode", "This room's thread_mode is not set (in service: `thread`)", false},
		{"a room setting", cfg, admin, "!config room thread_mode room", "  rooms.main.thread_mode\n- \n+ room\n", true},
		{"a room setting's value", cfg, admin, "!config room thread_mode sideways", "thread_mode is `thread`", false},
		{"an unknown room setting", cfg, admin, "!config room topic hello", "`!config room` cannot change `topic`; it can change: thread_mode", false},
		{"one setting", cfg, admin, "!config helper tools", "helper's tools is `current_time`", false},
		{"same value", cfg, admin, "!config helper model small", "nothing to change", false},
		{"bad tools", cfg, admin, "!config helper tools a,,b", "comma-separated list", false},
		{"unknown model", cfg, admin, "!config helper model nosuch", "would not be valid", false},
		{"unknown model lists the models", cfg, admin, "!config helper model nosuch", "Configured models: big, small.", false},
		{"a value from the environment is shown as written", cfg, admin, "!config", "instructions `The code word is ${CODE_WORD}.`", false},
		{"and in a diff", cfg, admin, "!config secretive instructions No code word.", "- The code word is ${CODE_WORD}.\n+ No code word.\n", true},
		{"proposal", cfg, admin, "!config helper model big", "- small\n+ big\n", true},
		{"proposal of tools", cfg, admin, "!config helper tools current_time, web_*", "- [current_time]\n+ [current_time, web_*]\n", true},
	}
	b := &Bot{opts: Options{ConfigOptions: []config.Option{env}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &event.Event{Sender: tt.sender, RoomID: room, ID: "$cmd"}
			reply, p := b.configReply(t.Context(), worldOf(tt.cfg), ev, hooks.Envelope{Body: tt.body})
			if !strings.Contains(reply, tt.want) || strings.Contains(reply, "swordfish") {
				t.Errorf("reply %q lacks %q", reply, tt.want)
			}
			if (p != nil) != tt.proposal {
				t.Errorf("proposal %+v, want one: %v", p, tt.proposal)
			}
			if p != nil && (p.by != admin || p.owner != b || !strings.Contains(reply, "React with ✅")) {
				t.Errorf("proposal %+v, reply %q", p, reply)
			}
		})
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != text {
		t.Errorf("config.yaml changed: %v\n%s", err, got)
	}
}
