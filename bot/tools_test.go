package bot

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
)

// toolBox is a built-in plugin for tests offering fixed tools; each call
// is recorded in toolBoxCalls.
type toolBox struct{ tools []plugins.Tool }

func (toolBox) Hooks() []hooks.Hook     { return nil }
func (t toolBox) Tools() []plugins.Tool { return t.tools }

var toolBoxCalls struct {
	sync.Mutex
	calls []plugins.ToolCall
}

// registerToolBox registers the built-in plugin name offering tools.
func registerToolBox(name string, tools ...string) {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name:        name,
		Description: "offers " + strings.Join(tools, ", ") + " (tests)",
		New: func(context.Context, plugins.Env) (plugins.Instance, error) {
			var tb toolBox
			for _, tool := range tools {
				tb.tools = append(tb.tools, plugins.Tool{
					Name: tool, Description: "the " + tool + " tool",
					Func: func(_ context.Context, call plugins.ToolCall) (string, error) {
						toolBoxCalls.Lock()
						defer toolBoxCalls.Unlock()
						toolBoxCalls.calls = append(toolBoxCalls.calls, call)
						return name + ":" + tool, nil
					},
				})
			}
			return tb, nil
		},
	})
}

func init() {
	registerToolBox("box", "search", "fetch")
	registerToolBox("clash", "current_time")
}

// toolConfig parses a configuration with the plugins "box" (search, fetch)
// and, when withClash, "clash" (current_time), and one agent whose tools
// section is tools (list items from line 14 on).
func toolConfig(t *testing.T, withClash bool, tools string) (*config.Config, *plugins.Set) {
	t.Helper()
	src := "data_dir: " + t.TempDir() + "\nmatrix:\n  homeserver: http://localhost:8008\n  server_name: localhost\n" +
		"models:\n  m: {provider: echo}\nplugins:\n  - builtin: box\n"
	if withClash {
		src += "  - builtin: clash\n    enabled: true\n"
	} else {
		src += "  - builtin: clash\n    enabled: false\n"
	}
	src += "agents:\n  a:\n    tools:\n" + tools
	cfg, err := config.Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	set, err := (&plugins.Loader{}).Load(context.Background(), cfg, nil)
	if err != nil {
		t.Fatalf("load plugins: %v", err)
	}
	t.Cleanup(func() { _ = set.Close() })
	return cfg, set
}

func TestResolveTools(t *testing.T) {
	tests := []struct {
		name      string
		clash     bool
		tools     string // YAML list items, starting at line 14
		want      []string
		wantErrs  []string
		wantWarns []string
	}{{
		name:  "built-in and plugin tools by name",
		tools: "      - room_info\n      - search\n      - current_time\n",
		want:  []string{"builtin/room_info", "box/search", "builtin/current_time"},
	}, {
		name:  "globs over names and qualified names; overlaps are taken once",
		tools: "      - \"box/*\"\n      - \"*_time\"\n      - fetch\n      - \"builtin/r*\"\n",
		want:  []string{"box/search", "box/fetch", "builtin/current_time", "builtin/room_info"},
	}, {
		name:  "a glob over every source",
		tools: "      - \"*/*\"\n",
		want:  []string{"builtin/current_time", "builtin/room_info", "builtin/schedule", "box/search", "box/fetch"},
	}, {
		name:  "unknown names, unknown sources and empty globs, each at its line",
		tools: "      - current_time\n      - teleport\n      - \"web_*\"\n      - \"nobody/*\"\n      - \"mcp:github/*\"\n      - \"box/teleport\"\n",
		wantErrs: []string{
			`config.yaml:15: agents.a.tools[1]: unknown tool "teleport": built-in tools are current_time, room_info, schedule; plugin tools are box/search, box/fetch`,
			`config.yaml:16: agents.a.tools[2]: "web_*" matches no tool: built-in tools are current_time, room_info, schedule; plugin tools are box/search, box/fetch`,
			`config.yaml:17: agents.a.tools[3]: "nobody/*": no tool source matches "nobody"; tool sources are builtin, box (builtin and the enabled plugins)`,
			`config.yaml:18: agents.a.tools[4]: "mcp:github/*": no MCP server matches "mcp:github" (mcp_servers lists them; a disabled one offers no tools); tool sources: builtin, box`,
			`config.yaml:19: agents.a.tools[5]: unknown tool "box/teleport": built-in tools are current_time, room_info, schedule; plugin tools are box/search, box/fetch`,
		},
	}, {
		name:      "a glob over an existing source that matches nothing is a warning",
		tools:     "      - search\n      - \"box/x*\"\n",
		want:      []string{"box/search"},
		wantWarns: []string{`config.yaml:15: agents.a.tools[1]: "box/x*" selects no tool right now (its source offers none that match); built-in tools are current_time, room_info, schedule; plugin tools are box/search, box/fetch`},
	}, {
		name:  "the same name from two sources is an error",
		clash: true,
		tools: "      - current_time\n",
		wantErrs: []string{
			`config.yaml:14: agents.a.tools[0]: tool "current_time" is offered by both builtin and clash (selected by entries 0 and 0); the model can tell them apart only by name: select one by SOURCE/NAME`,
		},
	}, {
		name:  "a qualified name picks one of two tools with the same name",
		clash: true,
		tools: "      - clash/current_time\n",
		want:  []string{"clash/current_time"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, set := toolConfig(t, tt.clash, tt.tools)
			got, warns, err := resolveTools(cfg, set, nil)
			if tt.wantErrs != nil {
				var list config.ErrorList
				if !errors.As(err, &list) {
					t.Fatalf("err = %v, want a config.ErrorList", err)
				}
				var msgs []string
				for _, e := range list {
					msgs = append(msgs, e.Error())
				}
				if !reflect.DeepEqual(msgs, tt.wantErrs) {
					t.Errorf("errors:\n got %q\nwant %q", msgs, tt.wantErrs)
				}
				return
			}
			if err != nil {
				t.Fatalf("resolveTools: %v", err)
			}
			var names []string
			for _, info := range got["a"] {
				names = append(names, info.Qualified())
				if info.Description == "" {
					t.Errorf("%s has no description", info.Qualified())
				}
			}
			if !reflect.DeepEqual(names, tt.want) {
				t.Errorf("tools %q, want %q", names, tt.want)
			}
			if !reflect.DeepEqual(warns, tt.wantWarns) {
				t.Errorf("warnings:\n got %q\nwant %q", warns, tt.wantWarns)
			}
		})
	}
}

// Every built-in tool is documented under agents.<name>.tools in
// config.example.yaml, with a description.
func TestExampleConfigDocumentsBuiltinTools(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range agents.BuiltinTools() {
		if !regexp.MustCompile(`(?m)^\s+#\s+` + spec.Name + `\s+\S`).Match(data) {
			t.Errorf("config.example.yaml does not describe the built-in tool %s", spec.Name)
		}
	}
}

// A plugin tool called by the tool loop of a turn gets the turn's agent,
// room, thread, requester, session and correlation id.
func TestPluginToolGetsTheTurnsContext(t *testing.T) {
	cfg, set := toolConfig(t, false, "      - \"box/*\"\n")
	resolved, _, err := resolveTools(cfg, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &Bot{}
	b.state.Store(&world{cfg: cfg, plugins: set, tools: resolved})
	ts := b.toolsFor(b.w(), "a")
	if got := ts.Names(); !reflect.DeepEqual(got, []string{"search", "fetch"}) {
		t.Fatalf("tools %q", got)
	}
	srv := llmtest.NewServer(t,
		llmtest.Calls(llmtest.ToolCall("c1", "search", `{"q":"x"}`)),
		llmtest.Text("done"),
	)
	model, err := agents.NewModel(agents.ModelSpec{Provider: agents.ProviderOpenAI, BaseURL: srv.URL, Model: "test", RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	toolBoxCalls.Lock()
	toolBoxCalls.calls = nil
	toolBoxCalls.Unlock()
	ctx := hooks.WithWhere(hooks.WithCorrelationID(t.Context(), "corr-7"), hooks.Where{
		Agent: "a", RoomID: "!room:localhost", ThreadID: "$thread:localhost",
		RequesterID: "@alice:localhost", SessionID: "session-7",
	})
	res, err := agents.Run(ctx, agents.RunRequest{
		Model:    model,
		Messages: []agents.Message{{Role: agents.RoleUser, Content: "search"}},
		Tools:    ts,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolTrace) != 1 || res.ToolTrace[0].Result != "box:search" {
		t.Fatalf("tool trace %+v", res.ToolTrace)
	}
	toolBoxCalls.Lock()
	defer toolBoxCalls.Unlock()
	if len(toolBoxCalls.calls) != 1 {
		t.Fatalf("%d calls", len(toolBoxCalls.calls))
	}
	got := toolBoxCalls.calls[0]
	got.Emit = nil
	want := plugins.ToolCall{ToolCall: hooks.ToolCall{
		Tool: "search", Arguments: json.RawMessage(`{"q":"x"}`), Agent: "a", RoomID: "!room:localhost", ThreadID: "$thread:localhost",
		RequesterID: "@alice:localhost", SessionID: "session-7",
	}, CorrelationID: "corr-7"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tool call\n got %+v\nwant %+v", got, want)
	}
}
