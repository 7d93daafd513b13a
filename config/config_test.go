package config_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
)

func TestDefaults(t *testing.T) {
	dir := t.TempDir()
	src := minimal + `models:
  only: {provider: echo}
agents:
  code: {}
rooms:
  lobby: {}
  existing: {id: "!abc:example.org"}
plugins:
  - ./p
`
	c, err := config.Parse([]byte(src), filepath.Join(dir, "config.yaml"), fakeEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Path", c.Path, filepath.Join(dir, "config.yaml")},
		{"Dir", c.Dir, dir},
		{"data_dir", c.DataDir, filepath.Join(dir, "data")},
		{"database.type", c.Database.Type, config.DatabaseSQLite},
		{"database.uri", c.Database.URI.Reveal(), filepath.Join(dir, "data", "hookroom.db")},
		{"log.level", c.Log.Level, "info"},
		{"log.format", c.Log.Format, "console"},
		{"matrix.router.username", c.Matrix.Router.Username, "router"},
		{"matrix.router.display_name", c.Matrix.Router.DisplayName, "Router"},
		{"matrix.sync_timeline_limit", c.Matrix.SyncTimelineLimit, 1000},
		{"models.only.provider", c.Models["only"].Provider, config.ProviderEcho},
		{"agents.code", c.Agents["code"], config.Agent{DisplayName: "code", Username: "code", Model: "only"}},
		{"agents.code.plugins is nil (all plugins)", c.Agents["code"].Plugins == nil, true},
		{"rooms.lobby.alias", c.Rooms["lobby"].Alias, "lobby"},
		{"rooms.existing.alias", c.Rooms["existing"].Alias, ""},
		{"router.model", c.Router.Model, "only"},
		{"defaults.streaming", c.Defaults.StreamingEnabled(), true},
		{"defaults.thread_mode", c.Defaults.ThreadMode, config.ThreadModeThread},
		{"plugins[0].AbsPath", c.Plugins[0].AbsPath, filepath.Join(dir, "p")},
		{"hooks.collector_concurrency", c.Hooks.CollectorConcurrency, 64},
		{"hooks.max_depth", c.Hooks.MaxDepth, 3},
		{"attachments", c.Attachments, config.Attachments{MaxSize: 20 << 20, MaxTextSize: 256 << 10, MaxPerTurn: 4}},
		{"models.only.vision", c.Models["only"].Vision, false},
		{"PluginStateDir", c.PluginStateDir("weather"), filepath.Join(dir, "data", "plugins", "weather")},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestDefaultsDoNotOverrideValues(t *testing.T) {
	src := `data_dir: /var/lib/hookroom
database: {type: sqlite, uri: db/h.db}
log: {level: debug, format: json}
matrix:
  homeserver: http://localhost:8008
  router: {username: traffic, display_name: Traffic}
  sync_timeline_limit: 50
models:
  default: {provider: echo}
  big: {model: llama3, base_url: "http://localhost:11434/v1"}
agents:
  code: {username: coder, display_name: Coder, model: big}
  other: {}
router: {model: big}
defaults: {streaming: false, thread_mode: room}
hooks: {collector_concurrency: 8, max_depth: 5}
`
	c := mustParse(t, src, nil)
	checks := []struct {
		name      string
		got, want any
	}{
		{"data_dir", c.DataDir, "/var/lib/hookroom"},
		{"database.uri (relative to the config dir)", c.Database.URI.Reveal(), filepath.Join(c.Dir, "db/h.db")},
		{"log", c.Log, config.Log{Level: "debug", Format: "json"}},
		{"matrix.router", c.Matrix.Router, config.RouterAccount{Username: "traffic", DisplayName: "Traffic"}},
		{"matrix.sync_timeline_limit", c.Matrix.SyncTimelineLimit, 50},
		{"models.big.provider", c.Models["big"].Provider, config.ProviderOpenAI},
		{"agents.code", c.Agents["code"], config.Agent{DisplayName: "Coder", Username: "coder", Model: "big"}},
		{"agents.other.model", c.Agents["other"].Model, "default"},
		{"router.model", c.Router.Model, "big"},
		{"defaults.streaming", c.Defaults.StreamingEnabled(), false},
		{"defaults.thread_mode", c.Defaults.ThreadMode, config.ThreadModeRoom},
		{"hooks", c.Hooks, config.HookEngine{CollectorConcurrency: 8, MaxDepth: 5}},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestApplyDefaultsIsIdempotent(t *testing.T) {
	c := mustParse(t, minimal+"models:\n  m: {provider: echo}\nagents:\n  a: {}\nplugins: [./p]\n", nil)
	before := c.Clone()
	c.ApplyDefaults()
	if !reflect.DeepEqual(before, c) {
		t.Errorf("second ApplyDefaults changed the config:\n%#v\n%#v", before, c)
	}
}

func TestExampleConfig(t *testing.T) {
	env := map[string]string{"MATRIX_REGISTRATION_SHARED_SECRET": "very-secret-value"}
	c, err := config.Load(t.Context(), "../config.example.yaml", fakeEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	closed := config.FailClosed
	checks := []struct {
		name      string
		got, want any
	}{
		{"data_dir", c.DataDir, filepath.Join(root, "data")},
		{"matrix.homeserver (default of ${HOOKROOM_HOMESERVER})", c.Matrix.Homeserver, "http://localhost:8008"},
		{"matrix.registration.shared_secret", c.Matrix.Registration.SharedSecret.Reveal(), "very-secret-value"},
		{"matrix.bot_accounts", c.Matrix.BotAccounts, []id.UserID{"@rssbot:example.org"}},
		{"agents", c.AgentNames(), []string{"assistant", "coder"}},
		{"agents.assistant.model", c.Agents["assistant"].Model, "gpt"},
		{"agents.assistant.rooms", c.Agents["assistant"].Rooms, []string{"lobby", "dev"}},
		{"agents.coder.model (the default model)", c.Agents["coder"].Model, "default"},
		{"agents.coder.username", c.Agents["coder"].Username, "coder"},
		{"agents.coder.plugins", c.Agents["coder"].Plugins, []string{"context_info", "tool_guard"}},
		{"rooms", c.RoomKeys(), []string{"dev", "lobby"}},
		{"rooms.lobby full alias", c.Rooms["lobby"].FullAlias(c.Matrix.ServerName), id.RoomAlias("#lobby:example.org")},
		{"rooms.dev full alias", c.Rooms["dev"].FullAlias("other.org"), id.RoomAlias("#dev:example.org")},
		{"rooms.lobby alias without server name", c.Rooms["lobby"].FullAlias(""), id.RoomAlias("")},
		{"models.gpt.api_key (empty default)", c.Models["gpt"].APIKey, config.Secret("")},
		{"models.gpt.context_window", c.Models["gpt"].ContextWindow, 128000},
		{"models.default.provider", c.Models["default"].Provider, config.ProviderEcho},
		{"router.model", c.Router.Model, "gpt"},
		{"authorization.room_permissions.dev", c.Authorization.RoomPermissions["dev"], []id.UserID{"@alice:example.org", "@bob:example.org"}},
		{"authorization.invite_users", c.Authorization.InviteUsers, []config.UserPattern{"@carol:example.org"}},
		{"plugins", len(c.Plugins), 3},
		{"plugins[0].builtin", c.Plugins[0].Identity(), "builtin:audit_log"},
		{"plugins[0].settings.max_size_mb", c.Plugins[0].Settings["max_size_mb"], 10},
		{"plugins[0].settings.include_text", c.Plugins[0].Settings["include_text"], false},
		{"plugins[1].builtin", c.Plugins[1].Identity(), "builtin:context_info"},
		{"plugins[1].settings.timezone", c.Plugins[1].Settings["timezone"], "Europe/Berlin"},
		{"plugins[1].settings.room_info", c.Plugins[1].Settings["room_info"], true},
		{"plugins[2].builtin", c.Plugins[2].Identity(), "builtin:tool_guard"},
		{"plugins[2].hooks.block_tools", c.Plugins[2].Hooks["block_tools"], config.HookOverride{Priority: ptr(-10), FailurePolicy: &closed}},
		{"hooks", c.Hooks, config.HookEngine{CollectorConcurrency: 64, MaxDepth: 3}},
		{"models.gpt.vision", c.Models["gpt"].Vision, true},
		{"models.claude", c.Models["claude"], config.Model{Provider: config.ProviderAnthropic, Model: "claude-sonnet-4-5", MaxTokens: 8192, ContextWindow: 200000, Vision: true}},
		{"attachments", c.Attachments, config.Attachments{MaxSize: 20 * config.MiB, MaxTextSize: 256 * config.KiB, MaxPerTurn: 4}},
		{"usage", c.Usage, config.Usage{DailyTokensPerUser: 200000}},
		{"agents.coder daily tokens", c.Agents["coder"].DailyTokens(c.Usage), 0},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
	if s := c.String(); strings.Contains(s, "very-secret-value") {
		t.Errorf("String() leaks the shared secret:\n%s", s)
	}

	// Without the variable the example names it, with its line and key path.
	_, err = config.Load(t.Context(), "../config.example.yaml", fakeEnv(nil))
	var e *config.Error
	if !errors.As(err, &e) || e.Path != "matrix.registration.shared_secret" || e.Line == 0 || !errors.Is(err, config.ErrEnvNotSet) {
		t.Errorf("Load without env = %v, want a missing MATRIX_REGISTRATION_SHARED_SECRET error", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookroom.yaml")
	if err := os.WriteFile(path, []byte(minimal+"data_dir: state\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(t.Context(), path, fakeEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != path || c.Dir != dir || c.DataDir != filepath.Join(dir, "state") {
		t.Errorf("Path, Dir, DataDir = %q, %q, %q", c.Path, c.Dir, c.DataDir)
	}
	if got, want := c.ResolvePath("plugins/x"), filepath.Join(dir, "plugins/x"); got != want {
		t.Errorf("ResolvePath(relative) = %q, want %q", got, want)
	}
	if got := c.ResolvePath("/abs/x/../y"); got != "/abs/y" {
		t.Errorf("ResolvePath(absolute) = %q, want /abs/y", got)
	}

	_, err = config.Load(t.Context(), filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestLoadRespectsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := config.Load(ctx, "../config.example.yaml"); !errors.Is(err, context.Canceled) {
		t.Errorf("Load with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestLineAndErrorf(t *testing.T) {
	src := minimal + `plugins:
  - path: ./p
    settings:
      url: http://x
      list: [a, b]
`
	c := mustParse(t, src, nil)
	tests := []struct {
		path string
		want int
	}{
		{"matrix.homeserver", 2},
		{"plugins[0]", 4},
		{"plugins[0].settings.url", 6},
		{"plugins[0].settings.list[1]", 7},
		{"plugins[0].settings.missing", 5}, // nearest written ancestor
		{"plugins[0].hooks.h.priority", 4},
		{"agents.x", 0},
	}
	for _, tt := range tests {
		if got := c.Line(tt.path); got != tt.want {
			t.Errorf("Line(%q) = %d, want %d", tt.path, got, tt.want)
		}
	}
	err := c.Errorf("plugins[0].hooks.nope", "no hook named %q in plugin %s", "nope", "p")
	if want := `config.yaml:4: plugins[0].hooks.nope: no hook named "nope" in plugin p`; err.Error() != want {
		t.Errorf("Errorf() = %q, want %q", err, want)
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	src := minimal + `models:
  base: &base
    provider: openai
    base_url: http://localhost:11434/v1
    model: llama3
  big:
    <<: *base
    model: llama3:70b
  mixed:
    <<: [*base, {context_window: 8192}]
agents:
  a: {model: big, rooms: &rooms ["!r1", "!r2"]}
  b: {model: base, rooms: *rooms}
`
	c := mustParse(t, src, nil)
	want := config.Model{Provider: config.ProviderOpenAI, BaseURL: "http://localhost:11434/v1", Model: "llama3:70b"}
	if got := c.Models["big"]; got != want {
		t.Errorf("models.big = %+v, want %+v", got, want)
	}
	want.Model, want.ContextWindow = "llama3", 8192
	if got := c.Models["mixed"]; got != want {
		t.Errorf("models.mixed = %+v, want %+v", got, want)
	}
	if got := c.Agents["b"].Rooms; !reflect.DeepEqual(got, []string{"!r1", "!r2"}) {
		t.Errorf("agents.b.rooms = %q", got)
	}

	// A merged mapping is still decoded strictly.
	errs := parseErrors(t, minimal+"x: &x {provider: echo, bogus: 1}\n", nil)
	if len(errs) != 1 || !strings.Contains(errs[0], "config.yaml:3: x: unknown key") {
		t.Errorf("errors = %q", errs)
	}
	errs = parseErrors(t, minimal+"models:\n  m:\n    <<: {provider: echo, bogus: 1}\n", nil)
	if want := []string{`config.yaml:5: models.m.bogus: unknown key (known keys: api_key, base_url, context_window, max_tokens, model, provider, vision)`}; !reflect.DeepEqual(errs, want) {
		t.Errorf("errors = %q, want %q", errs, want)
	}
}

func TestAliasBombIsStopped(t *testing.T) {
	var b strings.Builder
	b.WriteString(minimal + "plugins:\n  - path: ./p\n    settings:\n")
	b.WriteString("      a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		prev := "*a" + string(rune('0'+i-1))
		b.WriteString("      a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [" + strings.Repeat(prev+", ", 9) + prev + "]\n")
	}
	errs := parseErrors(t, b.String(), nil)
	if len(errs) != 1 || !strings.Contains(errs[0], "expands too many aliases") {
		t.Errorf("errors = %q", errs)
	}
}

func TestSyntaxErrorLines(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"bad indentation", "a: 1\nb: 2\n c: 3\n", "config.yaml:3: invalid YAML: mapping values are not allowed in this context"},
		{"unclosed flow sequence", "a: 1\nb: [1, 2\nc: 3\n", "config.yaml:2: invalid YAML: did not find expected ',' or ']'"},
		{"tab indentation", "a:\n\tb: 2\n", "config.yaml:2: invalid YAML: found character that cannot start any token"},
		{"unquoted reference in flow mapping", "a: 1\nb: {c: ${X}}\n",
			`config.yaml:2: invalid YAML: did not find expected ',' or '}' (inside [ ] or { }, quote values that use ${VAR}: "${VAR}")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrors(t, tt.yaml, nil)
			if len(errs) != 1 || errs[0] != tt.want {
				t.Errorf("errors = %q, want %q", errs, tt.want)
			}
		})
	}
}

func TestRoomInvite(t *testing.T) {
	cfg, err := config.Parse([]byte(`
matrix:
  homeserver: http://localhost:8008
  server_name: localhost
rooms:
  lobby:
    invite: ["@alice:localhost"]
`), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Rooms["lobby"].Invite; len(got) != 1 || got[0] != "@alice:localhost" {
		t.Errorf("invite = %v", got)
	}
	_, err = config.Parse([]byte(`
matrix:
  homeserver: http://localhost:8008
  server_name: localhost
rooms:
  lobby:
    invite: ["alice"]
`), "config.yaml")
	if err == nil || !strings.Contains(err.Error(), "config.yaml:7: rooms.lobby.invite[0]") {
		t.Errorf("bad invite error: %v", err)
	}
}

// Rooms are created encrypted unless their encryption is false.
func TestRoomEncryptedByDefault(t *testing.T) {
	c := mustParse(t, minimal+"rooms:\n  a: {}\n  b:\n    encryption: false\n  c:\n    encryption: true\n", nil)
	for key, want := range map[string]bool{"a": true, "b": false, "c": true} {
		if got := c.Rooms[key].Encrypted(); got != want {
			t.Errorf("rooms.%s.Encrypted() = %v, want %v", key, got, want)
		}
	}
}

// An agent's daily token budget is its own daily_token_budget when set (0:
// unlimited, also against a default), else usage.daily_tokens_per_agent.
func TestAgentDailyTokens(t *testing.T) {
	cases := []struct {
		name  string
		own   *int
		deflt int
		want  int
	}{
		{"nothing set", nil, 0, 0},
		{"default", nil, 500, 500},
		{"own", ptr(100), 500, 100},
		{"own unlimited beats default", ptr(0), 500, 0},
	}
	for _, tc := range cases {
		a := config.Agent{DailyTokenBudget: tc.own}
		if got := a.DailyTokens(config.Usage{DailyTokensPerAgent: tc.deflt}); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}
