package approval

import (
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

func TestMatch(t *testing.T) {
	rules := []Rule{
		{Tools: []string{"room_info"}, Agents: []hooks.AgentName{"trusted"}, Require: false},
		{Tools: []string{"my_plugin/delete_*"}, Require: true},
		{Tools: []string{"shell*"}, Rooms: []id.RoomID{"!ops:x"}, Require: true},
		{Tools: []string{"room_info", "builtin/current_*"}, Require: true},
	}
	cases := []struct {
		name  string
		rules []Rule
		tool  Tool
		agent hooks.AgentName
		room  id.RoomID
		want  bool
	}{
		{"no rules: auto", nil, Tool{Name: "shell"}, "a", "!r:x", false},
		{"no rule matches: auto", rules, Tool{Name: "weather", Source: "w"}, "a", "!r:x", false},
		{"qualified glob", rules, Tool{Name: "delete_file", Source: "my_plugin"}, "a", "!r:x", true},
		{"qualified glob, other source", rules, Tool{Name: "delete_file", Source: "other"}, "a", "!r:x", false},
		{"bare glob in its room", rules, Tool{Name: "shell_exec", Source: "p"}, "a", "!ops:x", true},
		{"bare glob in another room", rules, Tool{Name: "shell_exec", Source: "p"}, "a", "!r:x", false},
		{"first match wins (auto for trusted)", rules, Tool{Name: "room_info", Source: "builtin"}, "trusted", "!r:x", false},
		{"later rule for others", rules, Tool{Name: "room_info", Source: "builtin"}, "a", "!r:x", true},
		{"builtin qualified", rules, Tool{Name: "current_time", Source: "builtin"}, "a", "!r:x", true},
		{"catch-all", []Rule{{Require: true}}, Tool{Name: "anything"}, "a", "!r:x", true},
		{"agent filter only", []Rule{{Agents: []hooks.AgentName{"b"}, Require: true}}, Tool{Name: "x"}, "a", "!r:x", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Match(c.rules, c.tool, c.agent, c.room); got != c.want {
				t.Errorf("Match(%+v, %s, %s) = %v, want %v", c.tool, c.agent, c.room, got, c.want)
			}
		})
	}
}

func TestParseReaction(t *testing.T) {
	cases := map[string]Decision{
		"✅": Approve, "👍": Approve, "👍🏽": Approve, "✔️": Approve, "✔": Approve,
		"❌": Deny, "👎": Deny, "👎🏻": Deny, "✖️": Deny, "✖": Deny,
		"🛑": NoDecision, "😀": NoDecision, "": NoDecision, "approve": NoDecision,
	}
	for key, want := range cases {
		if got := ParseReaction(key); got != want {
			t.Errorf("ParseReaction(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestParseReply(t *testing.T) {
	cases := []struct {
		body   string
		want   Decision
		reason string
	}{
		{"approve", Approve, ""},
		{"Yes", Approve, ""},
		{"yes!", Approve, ""},
		{"OK, go ahead", Approve, "go ahead"},
		{"✅", Approve, ""},
		{"deny", Deny, ""},
		{"No, not on production", Deny, "not on production"},
		{"deny: too risky", Deny, "too risky"},
		{"> <@router:x> Approval needed\n\nno - wrong file", Deny, "wrong file"},
		{"👎", Deny, ""},
		{"nope", NoDecision, ""},
		{"what does this tool do?", NoDecision, ""},
		{"yesterday was fine", NoDecision, ""},
		{"", NoDecision, ""},
	}
	for _, c := range cases {
		got, reason := ParseReply(c.body)
		if got != c.want || reason != c.reason {
			t.Errorf("ParseReply(%q) = %v, %q; want %v, %q", c.body, got, reason, c.want, c.reason)
		}
	}
}
