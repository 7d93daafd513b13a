package config_test

import (
	"errors"
	"reflect"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
)

func TestValidation(t *testing.T) {
	const models = "models:\n  m: {provider: echo}\n"
	tests := []struct {
		name string
		yaml string // appended to minimal
		want []string
	}{{
		name: "valid: negative priority is allowed",
		yaml: "plugins:\n  - path: ./p\n    hooks:\n      h: {priority: -100}\n",
	}, {
		name: "valid: agent allowlist may be empty",
		yaml: models + "agents:\n  a: {plugins: []}\n",
	}, {
		name: "bad agent name",
		yaml: models + "agents:\n  Code: {}\n",
		want: []string{`config.yaml:6: agents.Code: agent name "Code" must match ^[a-z0-9_-]+$`},
	}, {
		name: "router is reserved",
		yaml: models + "agents:\n  router: {}\n",
		want: []string{`config.yaml:6: agents.router: agent name "router" is reserved for the router`},
	}, {
		name: "agent username taken by the router",
		yaml: models + "agents:\n  a:\n    username: router\n",
		want: []string{`config.yaml:7: agents.a.username: username "router" is also used by matrix.router.username`},
	}, {
		name: "unknown model reference",
		yaml: models + "agents:\n  a:\n    model: gpt\n",
		want: []string{`config.yaml:7: agents.a.model: unknown model "gpt" (configured: m)`},
	}, {
		name: "unknown router model",
		yaml: "router:\n  model: gpt\n",
		want: []string{`config.yaml:4: router.model: unknown model "gpt" (no models are configured)`},
	}, {
		name: "agent without any model",
		yaml: "agents:\n  a: {}\n",
		want: []string{`config.yaml:4: agents.a: has no model: configure one under models`},
	}, {
		name: "agent with several models and no default",
		yaml: "models:\n  x: {provider: echo}\n  y: {provider: echo}\nagents:\n  a: {}\n",
		want: []string{`config.yaml:7: agents.a: has no model: set model or define a model named "default"`},
	}, {
		name: "both path and builtin",
		yaml: "plugins:\n  - path: ./p\n    builtin: p\n",
		want: []string{`config.yaml:4: plugins[0]: set either path or builtin, not both`},
	}, {
		name: "neither path nor builtin",
		yaml: "plugins:\n  - settings: {a: 1}\n",
		want: []string{`config.yaml:4: plugins[0]: set path (a plugin directory) or builtin (a compiled-in plugin)`},
	}, {
		name: "bad failure policy",
		yaml: "plugins:\n  - builtin: p\n    hooks:\n      h: {failure_policy: fail}\n",
		want: []string{`config.yaml:6: plugins[0].hooks.h.failure_policy: must be "open" or "closed", not "fail"`},
	}, {
		name: "sandbox on a built-in",
		yaml: "plugins:\n  - builtin: p\n    sandbox: {enabled: false}\n",
		want: []string{`config.yaml:5: plugins[0].sandbox: built-in plugins run inside hookroom and have no sandbox; sandbox applies to process plugins`},
	}, {
		name: "empty sandbox path",
		yaml: "plugins:\n  - path: ./p\n    sandbox:\n      read_write: [/srv, \"\"]\n",
		want: []string{`config.yaml:6: plugins[0].sandbox.read_write[1]: must not be empty`},
	}, {
		name: "zero timeout",
		yaml: "plugins:\n  - builtin: p\n    hooks:\n      h:\n        timeout_ms: 0\n",
		want: []string{`config.yaml:7: plugins[0].hooks.h.timeout_ms: must be positive, not 0`},
	}, {
		name: "negative timeout",
		yaml: "plugins:\n  - builtin: p\n    hooks:\n      h:\n        timeout_ms: -1\n",
		want: []string{`config.yaml:7: plugins[0].hooks.h.timeout_ms: must be positive, not -1`},
	}, {
		name: "duplicate builtin",
		yaml: "plugins:\n  - builtin: p\n  - builtin: p\n",
		want: []string{`config.yaml:5: plugins[1]: the same plugin is listed twice (also plugins[0])`},
	}, {
		name: "same directory written two ways",
		yaml: "plugins:\n  - ./p\n  - p/\n",
		want: []string{`config.yaml:5: plugins[1]: the same plugin is listed twice (also plugins[0])`},
	}, {
		name: "registration shared secret and token",
		yaml: "  registration:\n    shared_secret: a\n    token: b\n",
		want: []string{`config.yaml:3: matrix.registration: set at most one of shared_secret, token and appservice`},
	}, {
		name: "registration shared secret and appservice",
		yaml: "  registration:\n    shared_secret: a\n    appservice: {as_token: b}\n",
		want: []string{`config.yaml:3: matrix.registration: set at most one of shared_secret, token and appservice`},
	}, {
		name: "valid: appservice",
		yaml: "  registration:\n    appservice: {as_token: a, hs_token: b, id: hookroom-prod}\n",
	}, {
		name: "appservice without as_token",
		yaml: "  registration:\n    appservice:\n      hs_token: b\n",
		want: []string{`config.yaml:4: matrix.registration.appservice.as_token: is required (the registration file's as_token: hookroom appservice registration generates one)`},
	}, {
		name: "appservice tokens",
		yaml: "  registration:\n    appservice:\n      as_token: \"a b\"\n      hs_token: \"a b\"\n      id: \"my service\"\n",
		want: []string{
			`config.yaml:5: matrix.registration.appservice.as_token: must not contain spaces or control characters`,
			`config.yaml:6: matrix.registration.appservice.hs_token: must differ from as_token (the homeserver would authenticate to hookroom with hookroom's own token)`,
			`config.yaml:6: matrix.registration.appservice.hs_token: must not contain spaces or control characters`,
			`config.yaml:7: matrix.registration.appservice.id: "my service" must match ^[A-Za-z0-9._-]+$`,
		},
	}, {
		name: "valid: appservice user prefix covers the accounts it creates",
		yaml: "  registration:\n    appservice: {as_token: a, user_prefix: hr_}\n  router: {username: hr_router}\n" + models +
			"agents:\n  a: {username: hr_a}\n  b:\n    account: {user_id: \"@b:example.org\", password: p}\n",
	}, {
		name: "appservice user prefix",
		yaml: "  registration:\n    appservice: {as_token: a, user_prefix: hr_}\n" + models + "agents:\n  a: {}\n  b:\n    username: hr_b\n",
		want: []string{
			`config.yaml:1: matrix.router.username: "router" does not start with matrix.registration.appservice.user_prefix "hr_": the application service can only create accounts in its namespace`,
			`config.yaml:8: agents.a.username: "a" does not start with matrix.registration.appservice.user_prefix "hr_": the application service can only create accounts in its namespace`,
		},
	}, {
		name: "appservice user prefix that no localpart can start with",
		yaml: "  registration:\n    appservice: {as_token: a, user_prefix: HR}\n",
		want: []string{`config.yaml:4: matrix.registration.appservice.user_prefix: "HR" is not the start of a valid Matrix localpart (allowed: a-z 0-9 . _ = - / +)`},
	}, {
		name: "postgres needs a uri",
		yaml: "database:\n  type: postgres\n",
		want: []string{`config.yaml:3: database.uri: is required for postgres`},
	}, {
		name: "standby needs postgres",
		yaml: "database:\n  standby: true\n",
		want: []string{`config.yaml:4: database.standby: needs type: postgres (a standby takes over a database another machine can reach; SQLite is a file of one machine)`},
	}, {
		name: "standby on postgres",
		yaml: "database:\n  type: postgres\n  uri: postgres://db/h\n  standby: true\n",
	}, {
		name: "unknown room in agent",
		yaml: models + "agents:\n  a:\n    rooms: [lobby]\n",
		want: []string{`config.yaml:7: agents.a.rooms[0]: unknown room "lobby": not a key of rooms, a room id (!…) or an alias (#…:server)`},
	}, {
		name: "room ids and aliases need no rooms entry",
		yaml: models + "agents:\n  a:\n    rooms: [\"!abc\", \"#x:example.org\"]\n",
	}, {
		name: "bad user id in room permissions",
		yaml: "authorization:\n  room_permissions:\n    \"!abc:example.org\": [bob]\n",
		want: []string{`config.yaml:5: authorization.room_permissions["!abc:example.org"][0]: "bob" is not a valid Matrix user id (e.g. @alice:example.org)`},
	}, {
		name: "encryption settings",
		yaml: "  encryption:\n    share_keys_with: cross_signed\n    decrypt_grace_ms: 5000\nrooms:\n  r:\n    encryption: false\n",
	}, {
		name: "unknown device trust",
		yaml: "  encryption:\n    share_keys_with: verified\n",
		want: []string{`config.yaml:4: matrix.encryption.share_keys_with: must be one of "all", "cross_signed", not "verified"`},
	}, {
		name: "negative decrypt grace",
		yaml: "  encryption:\n    decrypt_grace_ms: -1\n",
		want: []string{`config.yaml:4: matrix.encryption.decrypt_grace_ms: must be positive, not -1`},
	}, {
		name: "key backup with a recovery key",
		yaml: "  encryption:\n    recovery_key: EsSz z9tE P7v3 2x3J pej9 kEu3 wFRg Cohn LtKd CcAP Gyjg nnbj\n    key_backup: false\n",
	}, {
		name: "malformed recovery key, never echoed",
		yaml: "  encryption:\n    recovery_key: EsSz z9tE P7v3 2x3J pej9 kEu3 wFRg Cohn LtKd CcAP Gyjg nnbk\n",
		want: []string{"config.yaml:4: matrix.encryption.recovery_key: is not a recovery key (48 base58 characters in groups of four, as `hookroom e2ee recovery-key` prints)"},
	}, {
		name: "key backup without a recovery key",
		yaml: "  encryption:\n    key_backup: true\n",
		want: []string{`config.yaml:4: matrix.encryption.key_backup: needs matrix.encryption.recovery_key (the key backup is encrypted with it)`},
	}, {
		name: "room encryption is a boolean",
		yaml: "rooms:\n  r:\n    encryption: maybe\n",
		want: []string{`config.yaml:5: rooms.r.encryption: expected true or false, got "maybe"`},
	}, {
		name: "valid: attachment sizes with units and in bytes",
		yaml: "attachments:\n  max_size: 8 MiB\n  max_text_size: 65536\n  max_per_turn: 2\n",
	}, {
		name: "attachment size that is not a size",
		yaml: "attachments:\n  max_size: lots\n",
		want: []string{`config.yaml:4: attachments.max_size: expected a size (bytes, or a number with a unit such as 256KiB or 20MiB), got "lots"`},
	}, {
		name: "negative attachment limits",
		yaml: "attachments:\n  max_size: -1\n  max_per_turn: -2\n",
		want: []string{
			`config.yaml:4: attachments.max_size: expected a size (bytes, or a number with a unit such as 256KiB or 20MiB), got "-1"`,
			`config.yaml:5: attachments.max_per_turn: must be at least 1, not -2`,
		},
	}, {
		name: "text limit above the download limit",
		yaml: "attachments:\n  max_size: 1MiB\n  max_text_size: 2MiB\n",
		want: []string{`config.yaml:5: attachments.max_text_size: must not be larger than max_size (1 MiB)`},
	}, {
		name: "valid: invite users and server patterns",
		yaml: "authorization:\n  invite_users: [\"@bob:example.org\", \"@*:example.org\", \"@*:chat.example.org:8448\"]\n",
	}, {
		name: "invalid invite users, each at its line",
		yaml: "authorization:\n  invite_users:\n    - bob\n    - \"@*\"\n    - \"@*:\"\n    - \"@*:bad server\"\n    - \"*:example.org\"\n    - \"@bob*:example.org\"\n    - \"@ok:example.org\"\n",
		want: []string{
			`config.yaml:5: authorization.invite_users[0]: "bob" is neither a Matrix user id (@alice:example.org) nor a server pattern (@*:example.org)`,
			`config.yaml:6: authorization.invite_users[1]: "@*" is neither a Matrix user id (@alice:example.org) nor a server pattern (@*:example.org)`,
			`config.yaml:7: authorization.invite_users[2]: "@*:" is neither a Matrix user id (@alice:example.org) nor a server pattern (@*:example.org)`,
			`config.yaml:8: authorization.invite_users[3]: "@*:bad server" is neither a Matrix user id (@alice:example.org) nor a server pattern (@*:example.org)`,
			`config.yaml:9: authorization.invite_users[4]: "*:example.org" is neither a Matrix user id (@alice:example.org) nor a server pattern (@*:example.org)`,
			`config.yaml:10: authorization.invite_users[5]: "@bob*:example.org" is neither a Matrix user id (@alice:example.org) nor a server pattern (@*:example.org)`,
		},
	}, {
		name: "valid: tool names and patterns (existence is checked where plugins are known)",
		yaml: models + "agents:\n  a:\n    tools: [current_time, some_plugin_tool, \"web_*\", \"my_plugin/*\", \"mcp:github/*\", \"builtin/room_info\", \"*/search\"]\n",
	}, {
		name: "tool entries: bad names and patterns, each at its line",
		yaml: models + "agents:\n  a:\n    tools:\n      - \"two words\"\n      - \"web_[\"\n      - \"/x\"\n      - \"p/\"\n      - \"a/b/c\"\n      - \"p/\\\\*\"\n      - ok\n",
		want: []string{
			`config.yaml:8: agents.a.tools[0]: "two words" is not a tool name (1 to 64 characters of a-z A-Z 0-9 _ -) nor a pattern such as plugin_name/* or mcp:server/*`,
			`config.yaml:9: agents.a.tools[1]: "web_[" is not a valid glob pattern (path.Match syntax: * ? [a-z])`,
			`config.yaml:10: agents.a.tools[2]: "/x": a qualified pattern is SOURCE/TOOL (builtin/current_time, my_plugin/*, mcp:github/*)`,
			`config.yaml:11: agents.a.tools[3]: "p/": a qualified pattern is SOURCE/TOOL (builtin/current_time, my_plugin/*, mcp:github/*)`,
			`config.yaml:12: agents.a.tools[4]: "a/b/c": a qualified pattern is SOURCE/TOOL (builtin/current_time, my_plugin/*, mcp:github/*)`,
			`config.yaml:13: agents.a.tools[5]: "p/\\*": backslash escapes are not allowed in tool patterns`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := minimal + tt.yaml
			if tt.want == nil {
				mustParse(t, src, nil)
				return
			}
			if got := parseErrors(t, src, nil); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// All problems are reported at once, sorted by line, and each is a *config.Error.
func TestErrorsSortedAndTyped(t *testing.T) {
	src := `hooks:
  max_depth: -1
matrix:
  homeserver: http://localhost:8008
  bogus: 1
plugins:
  - builtin: x
    hooks:
      h: {timeout_ms: 0}
agents:
  Bad: {}
`
	_, err := config.Parse([]byte(src), "config.yaml", fakeEnv(nil))
	var list config.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("errors.As(ErrorList) failed: %v", err)
	}
	want := []config.Error{
		{File: "config.yaml", Line: 2, Path: "hooks.max_depth", Msg: "must be at least 1, not -1"},
		{File: "config.yaml", Line: 5, Path: "matrix.bogus", Msg: "unknown key (known keys: bot_accounts, encryption, homeserver, registration, router, server_name, space, sync_timeline_limit)"},
		{File: "config.yaml", Line: 9, Path: "plugins[0].hooks.h.timeout_ms", Msg: "must be positive, not 0"},
		{File: "config.yaml", Line: 11, Path: "agents.Bad", Msg: `agent name "Bad" must match ^[a-z0-9_-]+$`},
		{File: "config.yaml", Line: 11, Path: "agents.Bad", Msg: "has no model: configure one under models"},
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(list), len(want), err)
	}
	for i := range want {
		if *list[i] != want[i] {
			t.Errorf("error %d = %+v, want %+v", i, *list[i], want[i])
		}
	}
	var one *config.Error
	if !errors.As(err, &one) || one != list[0] {
		t.Errorf("errors.As(*Error) = %v, want the first error", one)
	}
}

// Validate works on a Config built in code: no file, no lines.
func TestValidateInCode(t *testing.T) {
	c := &config.Config{Agents: map[string]config.Agent{"a": {Model: "nope"}}}
	c.ApplyDefaults()
	err := c.Validate()
	// Without lines, errors are sorted by key path.
	want := `agents.a.model: unknown model "nope" (no models are configured)` + "\n" +
		"matrix.homeserver: is required (the homeserver's client API URL, e.g. https://matrix.example.org)"
	if err == nil || err.Error() != want {
		t.Errorf("Validate() = %v\nwant %s", err, want)
	}

	c.Matrix.Homeserver = "https://matrix.example.org"
	c.Models = map[string]config.Model{"nope": {Provider: config.ProviderEcho}}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v, want nil", err)
	}
}

func TestMayInvite(t *testing.T) {
	auth := config.Authorization{
		GlobalUsers: []id.UserID{"@admin:example.org"},
		InviteUsers: []config.UserPattern{"@bob:other.org", "@*:example.org"},
	}
	tests := []struct {
		user id.UserID
		want bool
	}{
		{"@admin:example.org", true},      // a global user
		{"@bob:other.org", true},          // listed by id
		{"@carol:example.org", true},      // by the server pattern
		{"@carol:other.org", false},       // same server as bob, not listed
		{"@carol:sub.example.org", false}, // a pattern names one server, not its subdomains
		{"@carol:example.org.evil", false},
		{"@:example.org", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := auth.MayInvite(tt.user); got != tt.want {
			t.Errorf("MayInvite(%q) = %v, want %v", tt.user, got, tt.want)
		}
	}
	if (config.Authorization{}).MayInvite("@admin:example.org") {
		t.Error("the zero value accepts an invite")
	}
}

func TestHTTPValidation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		addr string
		want []string
	}{
		{name: "off", yaml: "http: {}\n"},
		{name: "port alone is loopback", yaml: "http: {listen: \"9090\"}\n", addr: "127.0.0.1:9090"},
		{name: "colon port is loopback", yaml: "http: {listen: \":9090\"}\n", addr: "127.0.0.1:9090"},
		{name: "every interface", yaml: "http: {listen: \"0.0.0.0:9090\", admin_token: 0123456789abcdef}\n", addr: "0.0.0.0:9090"},
		{name: "ipv6", yaml: "http: {listen: \"[::1]:9090\"}\n", addr: "[::1]:9090"},
		{name: "bad port", yaml: "http: {listen: \"127.0.0.1:99999\"}\n",
			want: []string{`config.yaml:3: http.listen: "127.0.0.1:99999" has no valid port (0-65535)`}},
		{name: "host name", yaml: "http: {listen: \"example.org:80\"}\n",
			want: []string{`config.yaml:3: http.listen: "example.org:80": the host must be an IP address or localhost`}},
		{name: "short token", yaml: "http: {listen: \":1\", admin_token: short-secret}\n",
			want: []string{`config.yaml:3: http.admin_token: is too short: use at least 16 characters (e.g. from openssl rand -hex 32)`}},
		{name: "token without listener", yaml: "http: {admin_token: 0123456789abcdef}\n",
			want: []string{`config.yaml:3: http.admin_token: has no effect without http.listen`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(minimal+tt.yaml), "config.yaml", fakeEnv(nil))
			var got []string
			var list config.ErrorList
			if errors.As(err, &list) {
				for _, e := range list {
					got = append(got, e.Error())
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("errors:\n got %q\nwant %q", got, tt.want)
			}
			if err == nil && c.HTTP.Address() != tt.addr {
				t.Errorf("Address() = %q, want %q", c.HTTP.Address(), tt.addr)
			}
		})
	}
}
