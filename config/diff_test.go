package config_test

import (
	"reflect"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
)

const diffBase = minimal + `models:
  default: {provider: echo}
  gpt: {model: gpt-4o}
rooms:
  lobby: {name: Lobby}
  dev: {name: Dev}
agents:
  a: {rooms: [lobby]}
  b: {rooms: [dev]}
authorization:
  global_users: ["@admin:example.org"]
plugins:
  - ./one
  - builtin: two
    settings: {x: 1}
  - path: ./three
`

func TestDiff(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *config.Config)
		want   config.Changes
		str    string
	}{{
		name:   "identical",
		change: func(c *config.Config) {},
		str:    "no changes",
	}, {
		name: "agent added, removed and changed",
		change: func(c *config.Config) {
			delete(c.Agents, "a")
			c.Agents["c"] = config.Agent{Username: "c", DisplayName: "c", Model: "default"}
			b := c.Agents["b"]
			b.Instructions = "be nice"
			c.Agents["b"] = b
		},
		want: config.Changes{AgentsAdded: []string{"c"}, AgentsRemoved: []string{"a"}, AgentsChanged: []string{"b"}},
		str:  "agents +c -a ~b",
	}, {
		name: "agent allowlist from all to none",
		change: func(c *config.Config) {
			a := c.Agents["a"]
			a.Plugins = []string{}
			c.Agents["a"] = a
		},
		want: config.Changes{AgentsChanged: []string{"a"}},
	}, {
		name: "rooms",
		change: func(c *config.Config) {
			r := c.Rooms["dev"]
			r.Topic = "new topic"
			c.Rooms["dev"] = r
			c.Rooms["ops"] = config.Room{Alias: "ops"}
			delete(c.Rooms, "lobby")
		},
		want: config.Changes{RoomsAdded: []string{"ops"}, RoomsRemoved: []string{"lobby"}, RoomsChanged: []string{"dev"}},
		str:  "rooms +ops -lobby ~dev",
	}, {
		name:   "plugin settings changed",
		change: func(c *config.Config) { c.Plugins[1].Settings["x"] = 2 },
		want:   config.Changes{PluginsChanged: []string{"builtin:two"}},
		str:    "plugins ~builtin:two",
	}, {
		name: "plugin hook override changed",
		change: func(c *config.Config) {
			c.Plugins[2].Hooks = map[string]config.HookOverride{"h": {Priority: ptr(1)}}
		},
		want: config.Changes{PluginsChanged: []string{"/cfg/three"}},
	}, {
		name:   "plugin disabled",
		change: func(c *config.Config) { c.Plugins[0].Enabled = ptr(false) },
		want:   config.Changes{PluginsChanged: []string{"/cfg/one"}},
	}, {
		name: "plugin added and removed",
		change: func(c *config.Config) {
			c.Plugins = append(c.Plugins[1:], config.PluginEntry{Builtin: "four"})
		},
		want: config.Changes{PluginsAdded: []string{"builtin:four"}, PluginsRemoved: []string{"/cfg/one"}},
		str:  "plugins +builtin:four -/cfg/one",
	}, {
		name: "plugins reordered",
		change: func(c *config.Config) {
			c.Plugins[0], c.Plugins[2] = c.Plugins[2], c.Plugins[0]
		},
		want: config.Changes{PluginOrder: true},
		str:  "plugin order",
	}, {
		name: "sections",
		change: func(c *config.Config) {
			c.Matrix.SyncTimelineLimit = 10
			m := c.Models["gpt"]
			m.APIKey = "new"
			c.Models["gpt"] = m
			c.Authorization.GlobalUsers = append(c.Authorization.GlobalUsers, id.UserID("@b:example.org"))
			c.Router.Model = "gpt"
			c.Defaults.Streaming = ptr(false)
			c.Hooks.MaxDepth = 5
			c.DataDir = "/elsewhere"
			c.Log.Level = "debug"
			c.Attachments.MaxPerTurn = 9
			c.Usage.DailyTokensPerUser = 1000
			c.ToolApproval.Rules = []config.ApprovalRule{{Tools: []string{"shell"}, Action: config.ApprovalRequired}}
		},
		want: config.Changes{Matrix: true, Models: true, Authorization: true, Router: true, Defaults: true, Hooks: true, Storage: true, Log: true, Attachments: true, Usage: true, ToolApproval: true},
		str:  "matrix; models; authorization; router; defaults; hooks; storage; log; attachments; usage; tool_approval",
	}, {
		name: "approval timeout",
		change: func(c *config.Config) {
			c.ToolApproval.Timeout = config.Duration(time.Minute)
		},
		want: config.Changes{ToolApproval: true},
	}, {
		name: "model gains vision",
		change: func(c *config.Config) {
			m := c.Models["gpt"]
			m.Vision = true
			c.Models["gpt"] = m
		},
		want: config.Changes{Models: true},
	}, {
		name: "http listen needs a restart, the admin token reloads",
		change: func(c *config.Config) {
			c.HTTP.Listen = "9090"
			c.HTTP.AdminToken = "0123456789abcdef"
		},
		want: config.Changes{HTTPListen: true, AdminToken: true},
		str:  "http.listen; http.admin_token",
	}, {
		name: "model removed",
		change: func(c *config.Config) {
			delete(c.Models, "gpt")
		},
		want: config.Changes{Models: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := mustParseAt(t, diffBase)
			new := old.Clone()
			tt.change(new)
			got := config.Diff(old, new)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff =\n %+v\nwant\n %+v", got, tt.want)
			}
			if got.IsEmpty() != reflect.DeepEqual(tt.want, config.Changes{}) {
				t.Errorf("IsEmpty() = %v", got.IsEmpty())
			}
			if tt.str != "" && got.String() != tt.str {
				t.Errorf("String() = %q, want %q", got.String(), tt.str)
			}
			// The clone is independent: the old config is untouched.
			if again := config.Diff(old, mustParseAt(t, diffBase)); !again.IsEmpty() {
				t.Errorf("change leaked into the old config: %v", again)
			}
		})
	}
}

func TestDiffReparsed(t *testing.T) {
	old := mustParseAt(t, diffBase)
	// Same meaning, different spelling: no changes.
	same := mustParseAt(t, diffBase+"hooks: {max_depth: 3}\ndefaults: {streaming: true}\n")
	if ch := config.Diff(old, same); !ch.IsEmpty() {
		t.Errorf("Diff(equivalent) = %v", ch)
	}
	edited := mustParseAt(t, diffBase+"  - builtin: five\n")
	if ch := config.Diff(old, edited); !reflect.DeepEqual(ch, config.Changes{PluginsAdded: []string{"builtin:five"}}) {
		t.Errorf("Diff(plugin appended) = %+v", ch)
	}
}

func TestDiffNil(t *testing.T) {
	c := mustParseAt(t, diffBase)
	got := config.Diff(nil, c)
	if !reflect.DeepEqual(got.AgentsAdded, []string{"a", "b"}) || !reflect.DeepEqual(got.RoomsAdded, []string{"dev", "lobby"}) ||
		len(got.PluginsAdded) != 3 || !got.Matrix || !got.Models {
		t.Errorf("Diff(nil, c) = %+v", got)
	}
	if got := config.Diff(c, nil); !reflect.DeepEqual(got.AgentsRemoved, []string{"a", "b"}) {
		t.Errorf("Diff(c, nil) = %+v", got)
	}
}

// mustParseAt parses src as /cfg/config.yaml so plugin identities are stable.
func mustParseAt(t *testing.T, src string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(src), "/cfg/config.yaml", fakeEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
