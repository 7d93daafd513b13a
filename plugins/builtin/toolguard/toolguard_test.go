package toolguard_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/builtin/toolguard"
)

func settings(t *testing.T, js string) hooks.Settings {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	s, err := hooks.NewSettings(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func guard(t *testing.T, js string) *hooks.Registry {
	t.Helper()
	inst, err := toolguard.New(context.Background(), plugins.Env{Name: toolguard.Name, Settings: settings(t, js)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return hooktest.Registry(t, []hooks.Plugin{{Name: toolguard.Name, Hooks: inst.Hooks()}})
}

const rules = `{
  "blocked_tools": ["shell", "rm_*"],
  "rules": [
    {"tool": "read_file", "arguments": {"path": {"contains": "secret"}}, "reason": "Secret files stay unread."},
    {"tool": "http_*", "arguments": {"url": {"regex": "^https?://(10|192\\.168)\\."}}, "reason": "No internal requests."},
    {"tool": "deploy", "agents": ["research"], "reason": "Research does not deploy."},
    {"tool": "deploy", "rooms": ["!prod:localhost"], "requesters": ["@intern:localhost"], "reason": "Interns do not deploy to prod."},
    {"tool": "write_file", "arguments": {"options.mode": "overwrite", "path": {"glob": "/etc/*", "ignore_case": true}}},
    {"arguments": {"*": {"contains": "/etc/shadow"}}, "reason": "Never touch /etc/shadow."},
    {"tool": "notify", "arguments": {"channel": {"exists": false}}, "reason": "Say where to notify."},
    {"tool": "tag", "arguments": {"tags": {"equals": "urgent"}}, "reason": "No urgent tags."}
  ]
}`

func TestGuard(t *testing.T) {
	reg := guard(t, rules)
	if hs := reg.Hooks(); len(hs) != 1 || !hs[0].Inline {
		t.Errorf("hooks = %+v, want one Inline gate (it never blocks)", hs)
	}
	tests := []struct {
		name      string
		tool      string
		args      string
		agent     hooks.AgentName
		room      id.RoomID
		requester id.UserID
		want      string // "" = allowed
	}{
		{name: "blocked tool", tool: "shell", args: `{"cmd":"ls"}`, want: `The tool "shell" is blocked by this server's tool guard.`},
		{name: "blocked glob", tool: "rm_rf", want: `The tool "rm_rf" is blocked by this server's tool guard.`},
		{name: "glob does not over-match", tool: "rmdir", args: `{}`},
		{name: "argument contains", tool: "read_file", args: `{"path":"/home/a/secret.txt"}`, want: "Secret files stay unread."},
		{name: "argument does not contain", tool: "read_file", args: `{"path":"/home/a/notes.txt"}`},
		{name: "regex", tool: "http_get", args: `{"url":"http://192.168.1.1/admin"}`, want: "No internal requests."},
		{name: "regex no match", tool: "http_get", args: `{"url":"https://example.org"}`},
		{name: "agent condition", tool: "deploy", agent: "research", want: "Research does not deploy."},
		{name: "other agent", tool: "deploy", agent: "ops"},
		{name: "room and requester", tool: "deploy", agent: "ops", room: "!prod:localhost", requester: "@intern:localhost", want: "Interns do not deploy to prod."},
		{name: "room without requester", tool: "deploy", agent: "ops", room: "!prod:localhost", requester: "@lead:localhost"},
		{name: "nested argument and case-insensitive glob", tool: "write_file", args: `{"path":"/ETC/passwd","options":{"mode":"overwrite"}}`,
			want: `This call of the tool "write_file" is blocked by this server's tool guard (rule 4).`},
		{name: "nested argument differs", tool: "write_file", args: `{"path":"/etc/passwd","options":{"mode":"append"}}`},
		{name: "glob does not cross /", tool: "write_file", args: `{"path":"/etc/ssh/key","options":{"mode":"overwrite"}}`},
		{name: "any argument anywhere", tool: "anything", args: `{"a":{"b":["x","cat /etc/shadow"]}}`, want: "Never touch /etc/shadow."},
		{name: "absent argument", tool: "notify", args: `{"text":"hi"}`, want: "Say where to notify."},
		{name: "present argument", tool: "notify", args: `{"text":"hi","channel":"ops"}`},
		{name: "list element equals", tool: "tag", args: `{"tags":["x","urgent"]}`, want: "No urgent tags."},
		{name: "list without the element", tool: "tag", args: `{"tags":["x"]}`},
		{name: "arguments not an object", tool: "read_file", args: `"secret"`},
		{name: "invalid JSON arguments", tool: "read_file", args: `{nope`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hooktest.ToolBeforeCall(tt.tool, tt.args)
			if tt.agent != "" {
				c.Agent = tt.agent
			}
			if tt.room != "" {
				c.RoomID = tt.room
			}
			if tt.requester != "" {
				c.RequesterID = tt.requester
			}
			hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
			if c.Declined != (tt.want != "") || c.DeclineReason != tt.want {
				t.Fatalf("declined=%v reason=%q, want reason %q", c.Declined, c.DeclineReason, tt.want)
			}
		})
	}
}

func TestDefaultReasonAndFailClosed(t *testing.T) {
	reg := guard(t, `{"blocked_tools":["shell"],"reason":"Ask an operator.","fail_closed":true}`)
	c := hooktest.ToolBeforeCall("shell", "{}")
	hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
	if c.DeclineReason != "Ask an operator." {
		t.Errorf("reason %q", c.DeclineReason)
	}
	h := reg.Hooks()
	if len(h) != 1 || h[0].Hook != toolguard.HookName || h[0].FailurePolicy != "closed" || h[0].Priority != toolguard.Priority {
		t.Errorf("hooks %+v", h)
	}
	if h := guard(t, `{"blocked_tools":["shell"]}`).Hooks(); h[0].FailurePolicy != "open" {
		t.Errorf("default failure policy %s, want open", h[0].FailurePolicy)
	}
}

// A guard whose hook runs past its deadline declines only when fail-closed.
func TestFailClosedOnTimeout(t *testing.T) {
	for _, closed := range []bool{false, true} {
		inst, err := toolguard.New(context.Background(), plugins.Env{Settings: settings(t, `{"blocked_tools":["nothing_real"]}`)})
		if err != nil {
			t.Fatal(err)
		}
		// A slow gate in the same plugin stands in for a guard that hangs.
		slow := hooks.Handle(hooks.ToolBeforeCall, "slow", func(ctx context.Context, _ *hooks.ToolBeforeCallContext) error {
			<-ctx.Done()
			return ctx.Err()
		}, hooks.Timeout(20*time.Millisecond))
		ov := map[string]hooks.Override{}
		if closed {
			p := hooks.FailClosed
			ov["slow"] = hooks.Override{FailurePolicy: &p}
		}
		reg := hooktest.Registry(t, []hooks.Plugin{{Name: toolguard.Name, Hooks: append(inst.Hooks(), slow), Overrides: ov}})
		c := hooktest.ToolBeforeCall("shell", "{}")
		hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
		if c.Declined != closed {
			t.Errorf("fail-closed=%v: declined=%v (%q)", closed, c.Declined, c.DeclineReason)
		}
	}
}

func TestInvalidSettings(t *testing.T) {
	tests := []struct {
		name, settings, want string
	}{
		{"unknown key", `{"rulez":[]}`, "settings.rulez: unknown setting"},
		{"unknown rule key", `{"rules":[{"tool":"x","reason":"r"},{"tool":"y","agent":["a"]}]}`, "settings.rules[1].agent: unknown setting"},
		{"bad glob", `{"rules":[{"tool":"x["}]}`, `settings.rules[0].tool: invalid glob "x[": syntax error in pattern`},
		{"bad blocked glob", `{"blocked_tools":["ok","[z"]}`, `settings.blocked_tools[1]: invalid glob "[z": syntax error in pattern`},
		{"bad regex", `{"rules":[{"tool":"x"},{"tool":"y"},{"tool":"z","arguments":{"url":{"regex":"(("}}}]}`, "settings.rules[2].arguments.url.regex: invalid regular expression: error parsing regexp: missing closing ): `((`"},
		{"alias instead of room id", `{"rules":[{"tool":"x","rooms":["#lobby:localhost"]}]}`, `settings.rules[0].rooms[0]: "#lobby:localhost" is not a room id (want !id:server; aliases are not resolved)`},
		{"bad requester", `{"rules":[{"tool":"x","requesters":["bob"]}]}`, `settings.rules[0].requesters[0]: "bob" is not a user id (want @name:server)`},
		{"rule matching everything", `{"rules":[{"reason":"no"}]}`, "settings.rules[0]: rule matches every tool call: set tool, agents, rooms, requesters or arguments"},
		{"condition without test", `{"rules":[{"tool":"x","arguments":{"path":{"ignore_case":true}}}]}`, "settings.rules[0].arguments.path: condition has no test: use equals, contains, prefix, suffix, glob, regex or exists"},
		{"unknown test", `{"rules":[{"tool":"x","arguments":{"path":{"startswith":"a"}}}]}`, "settings.rules[0].arguments.path.startswith: unknown setting"},
		{"wrong type", `{"rules":[{"tool":"x","arguments":{"path":{"contains":3}}}]}`, "settings.rules[0].arguments.path.contains: must be a string, not number"},
		{"rule not a mapping", `{"rules":["shell"]}`, "settings.rules[0]: a rule is a mapping (tool, agents, rooms, requesters, arguments, reason)"},
		{"dotted key is quoted", `{"rules":[{"tool":"x","arguments":{"a..b":{"contains":"x"}}}]}`, `settings.rules[0].arguments["a..b"]: invalid argument path "a..b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := toolguard.New(context.Background(), plugins.Env{Settings: settings(t, tt.settings)})
			var se *plugins.SettingsError
			if !errors.As(err, &se) {
				t.Fatalf("New = %v, want a *plugins.SettingsError", err)
			}
			if err.Error() != tt.want {
				t.Fatalf("error %q\nwant  %q", err, tt.want)
			}
		})
	}
}

// Through the loader, an invalid rule is reported at its line in config.yaml.
func TestInvalidRuleNamesConfigLine(t *testing.T) {
	dir := t.TempDir()
	src := `matrix:
  homeserver: http://localhost:8008
plugins:
  - builtin: tool_guard
    settings:
      rules:
        - tool: shell
          reason: no shells
        - tool: read_file
          arguments:
            path: {regex: "(("}
`
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(context.Background(), file)
	if err != nil {
		t.Fatal(err)
	}
	_, err = plugins.Load(hooktest.Context(t), cfg, nil)
	want := file + ":11: plugins[0].settings.rules[1].arguments.path.regex: invalid regular expression: error parsing regexp: missing closing ): `((`"
	if err == nil || err.Error() != want {
		t.Fatalf("Load = %v\nwant %s", err, want)
	}
	// The example in config.example.yaml loads.
	cfg2, err := config.Parse([]byte(`matrix: {homeserver: "http://localhost:8008"}
plugins:
  - builtin: tool_guard
    settings:
      blocked_tools: [shell]
    hooks:
      block_tools:
        priority: -10
        failure_policy: closed
`), file)
	if err != nil {
		t.Fatal(err)
	}
	set, err := plugins.Load(hooktest.Context(t), cfg2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if w := set.Warnings(); len(w) > 0 {
		t.Errorf("warnings: %s", strings.Join(w, "\n"))
	}
	reg, err := set.Registry(hooks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h := reg.Hooks(); len(h) != 1 || h[0].Priority != -10 || h[0].FailurePolicy != "closed" {
		t.Errorf("hooks %+v", h)
	}
}
