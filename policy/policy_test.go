package policy

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// The world of the decision table: who the room rules admit where, who is
// joined to which room, who is paired with which agent.
const (
	general id.RoomID = "!general:example.org"
	lab     id.RoomID = "!lab:example.org"
	devs    id.RoomID = "!devs:example.org"
	dm      id.RoomID = "!dm:example.org"
)

var (
	roomRules = map[id.RoomID][]id.UserID{
		general: {"@alice:example.org", "@bob:example.org", "@carol:example.org", "@dave:example.org"},
		lab:     {"@carol:example.org"},
		dm:      {"@frank:example.org"}, // the DM's inviter
	}
	members = map[id.RoomID][]id.UserID{
		devs: {"@dave:example.org", "@tg_9:bridge.example.org"},
	}
	paired = map[hooks.AgentName][]id.UserID{
		"coder":  {"@erin:example.org"},
		"pairer": {"@erin:example.org", "@gina:example.org"},
	}
)

type facts struct{}

func (facts) IsMember(room id.RoomID, user id.UserID) bool {
	for _, u := range members[room] {
		if u == user {
			return true
		}
	}
	return false
}

func (facts) IsPaired(agent hooks.AgentName, person id.UserID) bool {
	for _, u := range paired[agent] {
		if u == person {
			return true
		}
	}
	return false
}

func rulesOf(room id.RoomID) func(id.UserID) bool {
	return func(person id.UserID) bool {
		for _, u := range roomRules[room] {
			if u == person {
				return true
			}
		}
		return false
	}
}

func testOptions() Options {
	return Options{
		GlobalUsers: []string{"@admin:example.org", "@*:staff.example.org"},
		Aliases: map[string]id.UserID{
			"@telegram_123:example.org":     "@alice:example.org",
			"@tg_*:bridge.example.org":      "@bob:example.org",
			"@tg_admin*:bridge.example.org": "@admin:example.org", // more specific than @tg_*
		},
		Agents: map[hooks.AgentName]AgentOptions{
			"coder":  {ReplyTo: []string{"@alice:example.org", "members:#devs:example.org", "room:lab"}, DM: DMPairing},
			"open":   {DM: DMOpen},
			"helper": {ReplyTo: []string{"*"}},
			"strict": {ReplyTo: []string{"members:#ghost:example.org", "@carol:example.org"}, DM: DMAllowlist},
			"pairer": {DM: DMPairing},
		},
	}
}

func testResolver(ref RoomRef) id.RoomID {
	switch ref {
	case "#devs:example.org":
		return devs
	case "lab":
		return lab
	}
	return ""
}

func testPolicy(t testing.TB) *Policy {
	t.Helper()
	p, err := New(testOptions(), testResolver)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecide(t *testing.T) {
	p := testPolicy(t)
	tests := []struct {
		name   string
		agent  hooks.AgentName
		sender id.UserID
		room   id.RoomID
		dm     bool
		edit   func(*Request)
		allow  bool
		reason Reason
		rule   string    // the decision's Rule, exactly
		person id.UserID // "" means the sender
	}{
		// 1. Global users, everywhere, before every other rule.
		{name: "global user exact, not in the room rules", agent: "coder", sender: "@admin:example.org", room: general,
			allow: true, reason: ReasonGlobalUser, rule: `global_users[0] "@admin:example.org"`},
		{name: "global user by server pattern, DM of a strict agent", agent: "strict", sender: "@x:staff.example.org", room: dm, dm: true,
			allow: true, reason: ReasonGlobalUser, rule: `global_users[1] "@*:staff.example.org"`},
		{name: "global server pattern ignores case", agent: "plain", sender: "@x:STAFF.Example.org", room: lab,
			allow: true, reason: ReasonGlobalUser, rule: `global_users[1] "@*:staff.example.org"`},
		{name: "no accidental subdomain: evil-staff is nobody", agent: "plain", sender: "@x:evil-staff.example.org", room: general,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "global user's puppet by the most specific alias", agent: "pairer", sender: "@tg_admin1:bridge.example.org", room: dm, dm: true,
			allow: true, reason: ReasonGlobalUser, rule: `global_users[0] "@admin:example.org"`, person: "@admin:example.org"},

		// 3. Rooms: the room rules, then reply_to.
		{name: "no agent rules: the room rules admit", agent: "plain", sender: "@alice:example.org", room: general,
			allow: true, reason: ReasonRoomRules, rule: ruleRoomRules},
		{name: "no agent rules: the room rules refuse", agent: "plain", sender: "@zed:example.org", room: general,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "reply_to pattern", agent: "coder", sender: "@alice:example.org", room: general,
			allow: true, reason: ReasonReplyTo, rule: `agents.coder.reply_to[0] "@alice:example.org"`},
		{name: "admitted by the room, not by reply_to", agent: "coder", sender: "@carol:example.org", room: general,
			allow: false, reason: ReasonNotInReplyTo, rule: "no entry of agents.coder.reply_to admits them"},
		{name: "reply_to members: grant", agent: "coder", sender: "@dave:example.org", room: general,
			allow: true, reason: ReasonReplyTo, rule: `agents.coder.reply_to[1] "members:#devs:example.org"`},
		{name: "reply_to room: grant", agent: "coder", sender: "@carol:example.org", room: lab,
			allow: true, reason: ReasonReplyTo, rule: `agents.coder.reply_to[2] "room:lab"`},
		{name: "room rules come before a room: grant", agent: "coder", sender: "@zed:example.org", room: lab,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "room rules come before a reply_to pattern", agent: "coder", sender: "@alice:example.org", room: lab,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "exact alias: the puppet counts as its person", agent: "coder", sender: "@telegram_123:example.org", room: general,
			allow: true, reason: ReasonReplyTo, rule: `agents.coder.reply_to[0] "@alice:example.org"`, person: "@alice:example.org"},
		{name: "wildcard alias; the puppet's membership counts", agent: "coder", sender: "@tg_9:bridge.example.org", room: general,
			allow: true, reason: ReasonReplyTo, rule: `agents.coder.reply_to[1] "members:#devs:example.org"`, person: "@bob:example.org"},
		{name: "alias: the person's own reply_to entries, not the puppet's", agent: "strict", sender: "@tg_7:bridge.example.org", room: general,
			allow: false, reason: ReasonNotInReplyTo, rule: "no entry of agents.strict.reply_to admits them", person: "@bob:example.org"},
		{name: "reply_to *", agent: "helper", sender: "@carol:example.org", room: general,
			allow: true, reason: ReasonReplyTo, rule: `agents.helper.reply_to[0] "*"`},
		{name: "reply_to * still needs the room rules", agent: "helper", sender: "@zed:example.org", room: general,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "strict admits its one person", agent: "strict", sender: "@carol:example.org", room: general,
			allow: true, reason: ReasonReplyTo, rule: `agents.strict.reply_to[1] "@carol:example.org"`},
		{name: "strict refuses others", agent: "strict", sender: "@alice:example.org", room: general,
			allow: false, reason: ReasonNotInReplyTo, rule: "no entry of agents.strict.reply_to admits them"},
		{name: "an unresolved members: entry admits nobody", agent: "strict", sender: "@dave:example.org", room: general,
			allow: false, reason: ReasonNotInReplyTo, rule: "no entry of agents.strict.reply_to admits them"},
		{name: "dm open does not open rooms", agent: "open", sender: "@zed:example.org", room: general,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "pairing does not open rooms", agent: "pairer", sender: "@erin:example.org", room: general,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},

		// 2. DMs: the DM policy.
		{name: "dm allowlist without reply_to: the inviter", agent: "plain", sender: "@frank:example.org", room: dm, dm: true,
			allow: true, reason: ReasonRoomRules, rule: ruleRoomRules},
		{name: "dm allowlist without reply_to: others", agent: "plain", sender: "@zed:example.org", room: dm, dm: true,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "dm open", agent: "open", sender: "@zed:example.org", room: dm, dm: true,
			allow: true, reason: ReasonDMOpen, rule: "agents.open.dm: open"},
		{name: "dm allowlist: reply_to admits without the room rules", agent: "strict", sender: "@carol:example.org", room: dm, dm: true,
			allow: true, reason: ReasonReplyTo, rule: `agents.strict.reply_to[1] "@carol:example.org"`},
		{name: "dm allowlist: reply_to replaces the room rules", agent: "strict", sender: "@frank:example.org", room: dm, dm: true,
			allow: false, reason: ReasonNotInReplyTo, rule: "no entry of agents.strict.reply_to admits them"},
		{name: "dm allowlist: reply_to * admits everyone", agent: "helper", sender: "@zed:example.org", room: dm, dm: true,
			allow: true, reason: ReasonReplyTo, rule: `agents.helper.reply_to[0] "*"`},
		{name: "dm pairing: listed", agent: "coder", sender: "@alice:example.org", room: dm, dm: true,
			allow: true, reason: ReasonReplyTo, rule: `agents.coder.reply_to[0] "@alice:example.org"`},
		{name: "dm pairing: member grant", agent: "coder", sender: "@dave:example.org", room: dm, dm: true,
			allow: true, reason: ReasonReplyTo, rule: `agents.coder.reply_to[1] "members:#devs:example.org"`},
		{name: "dm pairing: paired", agent: "coder", sender: "@erin:example.org", room: dm, dm: true,
			allow: true, reason: ReasonPaired, rule: "agents.coder.dm: pairing (paired)"},
		{name: "dm pairing: unknown gets a code", agent: "coder", sender: "@zed:example.org", room: dm, dm: true,
			allow: false, reason: ReasonPairingRequired, rule: "agents.coder.dm: pairing (not paired)"},
		{name: "dm pairing: paired with another agent only", agent: "coder", sender: "@gina:example.org", room: dm, dm: true,
			allow: false, reason: ReasonPairingRequired, rule: "agents.coder.dm: pairing (not paired)"},
		{name: "dm pairing: the inviter is not listed in reply_to", agent: "coder", sender: "@frank:example.org", room: dm, dm: true,
			allow: false, reason: ReasonPairingRequired, rule: "agents.coder.dm: pairing (not paired)"},
		{name: "dm pairing without reply_to: the room rules", agent: "pairer", sender: "@frank:example.org", room: dm, dm: true,
			allow: true, reason: ReasonRoomRules, rule: ruleRoomRules},
		{name: "dm pairing without reply_to: paired", agent: "pairer", sender: "@gina:example.org", room: dm, dm: true,
			allow: true, reason: ReasonPaired, rule: "agents.pairer.dm: pairing (paired)"},
		{name: "dm pairing without reply_to: unknown", agent: "pairer", sender: "@zed:example.org", room: dm, dm: true,
			allow: false, reason: ReasonPairingRequired, rule: "agents.pairer.dm: pairing (not paired)"},
		{name: "dm pairing: a puppet's pairing is its person's", agent: "coder", sender: "@tg_1:bridge.example.org", room: dm, dm: true,
			allow: false, reason: ReasonPairingRequired, rule: "agents.coder.dm: pairing (not paired)", person: "@bob:example.org"},

		// Missing facts and odd requests.
		{name: "no pairings known", agent: "pairer", sender: "@erin:example.org", room: dm, dm: true,
			edit:  func(r *Request) { r.Pairings = nil },
			allow: false, reason: ReasonPairingRequired, rule: "agents.pairer.dm: pairing (not paired)"},
		{name: "no membership known", agent: "coder", sender: "@dave:example.org", room: general,
			edit:  func(r *Request) { r.Members = nil },
			allow: false, reason: ReasonNotInReplyTo, rule: "no entry of agents.coder.reply_to admits them"},
		{name: "no room rules given admit nobody", agent: "plain", sender: "@alice:example.org", room: general,
			edit:  func(r *Request) { r.RoomRules = nil },
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "no room rules given: a global user still passes", agent: "plain", sender: "@admin:example.org", room: general,
			edit:  func(r *Request) { r.RoomRules = nil },
			allow: true, reason: ReasonGlobalUser, rule: `global_users[0] "@admin:example.org"`},
		{name: "before routing: room rules", agent: "", sender: "@alice:example.org", room: general,
			allow: true, reason: ReasonRoomRules, rule: ruleRoomRules},
		{name: "before routing: default DM policy", agent: "", sender: "@zed:example.org", room: dm, dm: true,
			allow: false, reason: ReasonRoomRulesDenied, rule: ruleRoomRulesDenied},
		{name: "empty sender", agent: "plain", sender: "", room: general,
			allow: false, reason: ReasonInvalidSender, rule: "the sender is not a valid user id"},
		{name: "malformed sender", agent: "helper", sender: "alice", room: dm, dm: true,
			allow: false, reason: ReasonInvalidSender, rule: "the sender is not a valid user id"},
	}
	seen := map[Reason]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Request{Sender: tt.sender, Agent: tt.agent, Room: tt.room, DM: tt.dm,
				RoomRules: rulesOf(tt.room), Members: facts{}, Pairings: facts{}}
			if tt.edit != nil {
				tt.edit(&r)
			}
			d := p.Decide(r)
			if d.Allow != tt.allow || d.Reason != tt.reason || d.Rule != tt.rule {
				t.Errorf("Decide = %v, %s, %q; want %v, %s, %q", d.Allow, d.Reason, d.Rule, tt.allow, tt.reason, tt.rule)
			}
			person := tt.person
			if person == "" {
				person = tt.sender
			}
			if d.Sender != tt.sender || d.Person != person || (d.Alias != "") != (person != tt.sender) ||
				d.Agent != tt.agent || d.Room != tt.room || d.DM != tt.dm {
				t.Errorf("Decide reports %+v; want sender %s, person %s", d, tt.sender, person)
			}
			seen[d.Reason] = true
		})
	}
	for _, r := range []Reason{ReasonGlobalUser, ReasonReplyTo, ReasonRoomRules, ReasonDMOpen, ReasonPaired,
		ReasonRoomRulesDenied, ReasonNotInReplyTo, ReasonPairingRequired, ReasonInvalidSender} {
		if !seen[r] {
			t.Errorf("no case of the table decides with reason %s", r)
		}
	}
	if got := p.Unresolved(); len(got) != 1 || got[0] != `agents.strict.reply_to[0] members:#ghost:example.org` {
		t.Errorf("Unresolved = %q", got)
	}
}

// Without authorization settings (the zero Options, or a nil *Policy),
// Decide says exactly what the room rules say: today's behaviour.
func TestDecideZeroIsRoomRules(t *testing.T) {
	zero, err := New(Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Policy{zero, nil} {
		for _, admitted := range []bool{true, false} {
			for _, isDM := range []bool{true, false} {
				for _, agent := range []hooks.AgentName{"", "assistant"} {
					d := p.Decide(Request{Sender: "@a:example.org", Agent: agent, Room: general, DM: isDM,
						RoomRules: func(id.UserID) bool { return admitted }})
					if d.Allow != admitted {
						t.Errorf("zero policy (nil %v), room rules %v, DM %v, agent %q: %v", p == nil, admitted, isDM, agent, d)
					}
				}
			}
		}
	}
	if nilPolicy := (*Policy)(nil); nilPolicy.IsGlobal("@a:b.org") || nilPolicy.DM("x") != DMAllowlist || nilPolicy.Unresolved() != nil ||
		nilPolicy.Pairing().CodeTTL != DefaultCodeTTL {
		t.Error("a nil *Policy is not the zero policy")
	}
}

func TestDefaultDMPolicy(t *testing.T) {
	p, err := New(Options{DM: DMPairing, Agents: map[hooks.AgentName]AgentOptions{"open": {DM: DMOpen}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := p.Decide(Request{Sender: "@zed:example.org", Agent: "plain", Room: dm, DM: true})
	if d.Allow || d.Reason != ReasonPairingRequired || d.Rule != "dm: pairing (not paired)" {
		t.Errorf("default dm pairing: %v", d)
	}
	if p.DM("plain") != DMPairing || p.DM("open") != DMOpen {
		t.Errorf("DM = %s, %s", p.DM("plain"), p.DM("open"))
	}
	d = p.Decide(Request{Sender: "@zed:example.org", Agent: "open", Room: dm, DM: true})
	if !d.Allow || d.Rule != "agents.open.dm: open" {
		t.Errorf("agent dm open over the default: %v", d)
	}
}

func TestAliases(t *testing.T) {
	p, err := New(Options{Aliases: map[string]id.UserID{
		"@telegram_123:example.org":  "@alice:example.org",
		"@tg_*:bridge.example.org":   "@bob:example.org",
		"@tg_*_x:bridge.example.org": "@carol:example.org", // more literal characters than @tg_*
		"@a*:b.org":                  "@ann:example.org",
		"@*a:b.org":                  "@ana:example.org", // as specific as @a*: byte order decides
		"@bob:example.org":           "@robert:example.org",
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		sender, person id.UserID
		alias          string
	}{
		{"@telegram_123:example.org", "@alice:example.org", `aliases["@telegram_123:example.org"]`},
		{"@telegram_123:EXAMPLE.org", "@alice:example.org", `aliases["@telegram_123:example.org"]`},
		{"@Telegram_123:example.org", "@Telegram_123:example.org", ""},
		{"@telegram_1234:example.org", "@telegram_1234:example.org", ""},
		{"@tg_5:bridge.example.org", "@bob:example.org", `aliases["@tg_*:bridge.example.org"]`},
		{"@tg_5_x:bridge.example.org", "@carol:example.org", `aliases["@tg_*_x:bridge.example.org"]`},
		{"@tg_5:evil-bridge.example.org", "@tg_5:evil-bridge.example.org", ""},
		{"@aa:b.org", "@ana:example.org", `aliases["@*a:b.org"]`},
		{"@ab:b.org", "@ann:example.org", `aliases["@a*:b.org"]`},
		// Not chained: @bob is an alias of @robert, but a puppet of @bob
		// counts as @bob.
		{"@tg_6:bridge.example.org", "@bob:example.org", `aliases["@tg_*:bridge.example.org"]`},
		{"@bob:example.org", "@robert:example.org", `aliases["@bob:example.org"]`},
		{"", "", ""},
	}
	for _, tt := range tests {
		person, alias := p.Canonical(tt.sender)
		if person != tt.person || alias != tt.alias {
			t.Errorf("Canonical(%q) = %q, %q; want %q, %q", tt.sender, person, alias, tt.person, tt.alias)
		}
	}
	if !testPolicy(t).IsGlobal("@tg_admin7:bridge.example.org") || testPolicy(t).IsGlobal("@tg_7:bridge.example.org") {
		t.Error("IsGlobal does not apply aliases")
	}
}

func TestDecisionRendering(t *testing.T) {
	d := testPolicy(t).Decide(Request{Sender: "@telegram_123:example.org", Agent: "coder", Room: general,
		RoomRules: rulesOf(general)})
	s := d.String()
	for _, want := range []string{"allow", "@telegram_123:example.org", "@alice:example.org", `aliases["@telegram_123:example.org"]`,
		`"coder"`, string(general), `agents.coder.reply_to[0] "@alice:example.org"`, "[reply_to]"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, want %q in it", s, want)
		}
	}
}

func TestNewRejectsInvalidOptions(t *testing.T) {
	_, err := New(Options{GlobalUsers: []string{"@**:x.org"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "global_users[0]") {
		t.Errorf("New with a bad pattern: %v", err)
	}
}

// The decision is logged at debug with the rule that decided.
func TestDecisionLogFields(t *testing.T) {
	var buf strings.Builder
	log := zerolog.New(&buf)
	d := testPolicy(t).Decide(Request{Sender: "@tg_9:bridge.example.org", Agent: "coder", Room: general,
		RoomRules: rulesOf(general), Members: facts{}})
	log.Debug().Object("authorization", d).Msg("authorization decided")
	var got struct {
		Authorization map[string]any `json:"authorization"`
	}
	if err := json.Unmarshal([]byte(buf.String()), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"allow": true, "reason": "reply_to", "rule": `agents.coder.reply_to[1] "members:#devs:example.org"`,
		"sender": "@tg_9:bridge.example.org", "person": "@bob:example.org", "alias": `aliases["@tg_*:bridge.example.org"]`,
		"agent": "coder", "room_id": string(general), "dm": false,
	}
	if !maps.Equal(got.Authorization, want) {
		t.Errorf("logged %v\nwant %v", got.Authorization, want)
	}
}
