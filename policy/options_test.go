package policy

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// The settings decode strictly from the YAML config.yaml will hold.
func TestOptionsDecodeStrictly(t *testing.T) {
	const doc = `
authorization:
  global_users: ["@admin:example.org", "@*:staff.example.org"]
  aliases:
    "@telegram_123:example.org": "@alice:example.org"
  dm: allowlist
  agents:
    coder:
      reply_to: ["@*:example.org", "members:#devs:example.org", "room:lab", "*"]
      dm: pairing
  pairing:
    code_ttl: 30m
    max_pending_codes: 10
rate_limits:
  per_person: {per_minute: 5, burst: 5}
  per_room: {per_minute: 30}
  max_buckets: 500
  agents:
    coder:
      per_person: {per_minute: 0.5, burst: 2}
`
	var cfg struct {
		Authorization Options    `yaml:"authorization"`
		RateLimits    RateLimits `yaml:"rate_limits"`
	}
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	a, r := cfg.Authorization, cfg.RateLimits
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if a.Agents["coder"].DM != DMPairing || len(a.Agents["coder"].ReplyTo) != 4 || a.Pairing.CodeTTL != 30*time.Minute ||
		a.Aliases["@telegram_123:example.org"] != "@alice:example.org" || a.Pairing.MaxPendingCodes != 10 {
		t.Errorf("authorization decoded as %+v", a)
	}
	if r.PerPerson != (Rate{5, 5}) || r.PerRoom.burst() != 30 || r.Agents["coder"].PerPerson != (Rate{0.5, 2}) || r.MaxBuckets != 500 {
		t.Errorf("rate_limits decoded as %+v", r)
	}
	bad := yaml.NewDecoder(bytes.NewReader([]byte("agents: {coder: {reply: ['*']}}")))
	bad.KnownFields(true)
	var o Options
	if err := bad.Decode(&o); err == nil {
		t.Error("an unknown key decoded")
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want []string // every FieldError, "PATH: fragment of the message"
	}{
		{"zero", Options{}, nil},
		{"global user patterns", Options{GlobalUsers: []string{"@ok:example.org", "bob", "@**:x.org", "@*:*.example.org"}}, []string{
			`global_users[1]: "bob": a user pattern starts with "@"`,
			`global_users[2]: "@**:x.org": "**"`,
		}},
		{"aliases", Options{Aliases: map[string]id.UserID{
			"@tg_*:bridge.org": "@alice:example.org",
			"@tg:":             "@bob:example.org",
			"@x:bridge.org":    "@*:example.org",
			"@y:bridge.org":    "alice",
			"@z:Bridge.org":    "@carol:example.org",
			"@z:bridge.org":    "@dave:example.org",
			"@w:Bridge.org":    "@carol:example.org",
			"@w:bridge.org":    "@carol:example.org", // the same user: harmless
		}}, []string{
			`aliases["@tg:"]: "@tg:": empty server name`,
			`aliases["@x:bridge.org"]: "@*:example.org" is not a user id`,
			`aliases["@y:bridge.org"]: "alice" is not a user id`,
			`aliases["@z:bridge.org"]: names the same account as "@z:Bridge.org"`,
		}},
		{"dm policies", Options{DM: "closed", Agents: map[hooks.AgentName]AgentOptions{"a": {DM: "Open"}, "b": {DM: DMOpen}}}, []string{
			`dm: must be "allowlist", "open" or "pairing", not "closed"`,
			`agents.a.dm: must be "allowlist", "open" or "pairing", not "Open"`,
		}},
		{"reply_to entries", Options{Agents: map[hooks.AgentName]AgentOptions{"coder": {ReplyTo: []string{
			"@*:example.org", "*", "room:!abc:example.org", "members:#devs:example.org", "room:lobby", "members:!v12roomid",
			"everyone", "room:", "members:#devs", "room:my room", "members:lobby.x", "@bob*", "**", "user:@a:b.org",
		}}}}, []string{
			`agents.coder.reply_to[6]: "everyone" is neither a user pattern`,
			`agents.coder.reply_to[7]: "room:": no room after the colon`,
			`agents.coder.reply_to[8]: "members:#devs": "#devs" is not a room alias`,
			`agents.coder.reply_to[9]: "room:my room": a room reference holds no spaces`,
			`agents.coder.reply_to[10]: "members:lobby.x": "lobby.x" is not a room id`,
			`agents.coder.reply_to[11]: "@bob*": no server part`,
			`agents.coder.reply_to[12]: "**" is neither`,
			`agents.coder.reply_to[13]: "user:@a:b.org" is neither`,
		}},
		{"odd agent names are quoted", Options{Agents: map[hooks.AgentName]AgentOptions{"": {}, "my agent": {DM: "x"}}}, []string{
			`agents[""]: an agent name may not be empty`,
			`agents["my agent"].dm: must be`,
		}},
		{"pairing", Options{Pairing: PairingOptions{CodeTTL: time.Second, MaxPendingCodes: -1}}, []string{
			"pairing.code_ttl: must be at least 1m",
			"pairing.max_pending_codes: must not be negative",
		}},
		{"negative ttl", Options{Pairing: PairingOptions{CodeTTL: -time.Hour}}, []string{"pairing.code_ttl: must not be negative"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkErrors(t, tt.o.Validate(), tt.want) })
	}
}

func TestRateLimitsValidate(t *testing.T) {
	tests := []struct {
		name string
		r    RateLimits
		want []string
	}{
		{"zero", RateLimits{}, nil},
		{"fine", RateLimits{PerPerson: Rate{5, 0}, PerRoom: Rate{0.5, 3}, Agents: map[hooks.AgentName]AgentRateLimits{"a": {PerRoom: Rate{1, 1}}}}, nil},
		{"bad", RateLimits{
			PerPerson:  Rate{-1, 0},
			PerRoom:    Rate{0, 5},
			MaxBuckets: -1,
			Agents: map[hooks.AgentName]AgentRateLimits{
				"a": {PerPerson: Rate{math.NaN(), 0}, PerRoom: Rate{1e6, -2}},
				"b": {PerRoom: Rate{1, 1_000_000}},
			},
		}, []string{
			"per_person.per_minute: must be a positive number",
			"per_room.burst: needs per_minute",
			"agents.a.per_person.per_minute: must be a positive number",
			"agents.a.per_room.per_minute: 1e+06 a minute is more than 1000 a second",
			"agents.a.per_room.burst: must not be negative",
			"agents.b.per_room.burst: 1000000 is too large",
			"max_buckets: must not be negative",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkErrors(t, tt.r.Validate(), tt.want) })
	}
	if _, err := NewLimits(RateLimits{PerRoom: Rate{-1, 0}}); err == nil {
		t.Error("NewLimits accepted a negative rate")
	}
}

// checkErrors asserts that err is Errors holding exactly the problems of
// want, in order, each starting with the given text.
func checkErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Errorf("Validate = %v, want nil", err)
		}
		return
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Validate = %v, want Errors", err)
	}
	if len(errs) != len(want) {
		t.Errorf("Validate found %d problems, want %d:\n%v", len(errs), len(want), err)
	}
	for i := range min(len(errs), len(want)) {
		if !strings.HasPrefix(errs[i].Error(), want[i]) {
			t.Errorf("problem %d = %q, want it to start with %q", i, errs[i], want[i])
		}
	}
	if !strings.Contains(err.Error(), errs[0].Error()) {
		t.Errorf("Errors.Error() = %q lacks %q", err, errs[0])
	}
}
