package bot

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/mcp"
	"github.com/hookroom/hookroom/mcp/mcptest"
)

// mcpWorld builds a world with the MCP server web (an in-process HTTP
// server) and agent a selecting tools.
func mcpWorld(t *testing.T, web *mcptest.HTTPServer, tools string) *world {
	t.Helper()
	src := "data_dir: " + t.TempDir() + "\nmatrix:\n  homeserver: http://localhost:8008\n  server_name: localhost\n" +
		"models:\n  m: {provider: echo}\nmcp_servers:\n  web: {url: " + web.URL + "}\n  other: {url: " + web.URL + "}\n" +
		"agents:\n  a:\n    tools:\n" + tools
	cfg, err := config.Parse([]byte(src), "config.yaml")
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	set, err := mcp.Load(context.Background(), cfg, nil, mcp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Close() })
	return &world{cfg: cfg, mcp: set}
}

func qualified(list []ToolInfo) []string {
	var out []string
	for _, ti := range list {
		out = append(out, ti.Qualified())
	}
	return out
}

func TestResolveMCPTools(t *testing.T) {
	web := mcptest.NewHTTPServer(t)
	tests := []struct {
		name     string
		tools    string // YAML list items, starting at line 13
		want     []string
		wantErr  string
		wantWarn string
	}{
		{name: "exact", tools: "      - mcp:web/echo\n", want: []string{"mcp:web/echo"}},
		{name: "glob over servers picks one", tools: "      - \"mcp:w*/*\"\n", want: []string{"mcp:web/echo"}},
		{name: "same name from two servers", tools: "      - \"mcp:*/echo\"\n",
			wantErr: `config.yaml:13: agents.a.tools[0]: tool "echo" is offered by both mcp:other and mcp:web`},
		{name: "unknown server", tools: "      - mcp:nope/echo\n",
			wantErr: `config.yaml:13: agents.a.tools[0]: "mcp:nope/echo": no MCP server matches "mcp:nope" (mcp_servers lists them; a disabled one offers no tools); tool sources: builtin, mcp:other, mcp:web`},
		{name: "a tool the server does not offer (now) is a warning", tools: "      - mcp:web/later\n",
			wantWarn: `config.yaml:13: agents.a.tools[0]: "mcp:web/later" selects no tool right now (the MCP server offers none that match, or has not listed its tools yet); built-in tools are current_time, room_info, schedule; no enabled plugin offers tools; MCP tools are mcp:other/echo, mcp:web/echo`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mcpWorld(t, web, tt.tools)
			got, warns, err := resolveTools(w.cfg, nil, w.mcp)
			var list config.ErrorList
			switch {
			case tt.wantErr != "":
				if !errors.As(err, &list) || !strings.HasPrefix(list[0].Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if q := qualified(got["a"]); !slices.Equal(q, tt.want) {
				t.Errorf("tools %v, want %v", q, tt.want)
			}
			if tt.wantWarn != "" && (len(warns) != 1 || warns[0] != tt.wantWarn) {
				t.Errorf("warnings %q, want %q", warns, tt.wantWarn)
			}
		})
	}
}

// When a server announces a new tool list, the agents' tools follow
// without a reload, and the tool works.
func TestMCPToolListChangedReachesAgents(t *testing.T) {
	web := mcptest.NewHTTPServer(t)
	w := mcpWorld(t, web, "      - \"mcp:web/*\"\n")
	if err := applyTools(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	b := &Bot{log: zerolog.Nop()}
	b.state.Store(w)
	if got := b.toolsFor(b.w(), "a").Names(); !slices.Equal(got, []string{"echo"}) {
		t.Fatalf("tools %v", got)
	}
	sdk.AddTool(web.MCP, &sdk.Tool{Name: "shout", Description: "Shouts."},
		func(_ context.Context, _ *sdk.CallToolRequest, a mcptest.EchoArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.ToUpper(a.Text)}}}, nil, nil
		})
	testkit.Eventually(t, 30*time.Second, "the agent's tools are echo and shout after tools/list_changed", func() bool {
		return slices.Equal(b.toolsFor(b.w(), "a").Names(), []string{"echo", "shout"})
	})
	tool, _ := b.toolsFor(b.w(), "a").Get("shout")
	if got, err := tool.Call(context.Background(), json.RawMessage(`{"text":"hi"}`)); err != nil || got != "HI" {
		t.Errorf("shout = %q, %v", got, err)
	}
	if got := qualified(b.Tools()[0].Tools); !reflect.DeepEqual(got, []string{"mcp:web/echo", "mcp:web/shout"}) {
		t.Errorf("Tools() = %v", got)
	}
}

func TestReloadSummaryNamesMCPServers(t *testing.T) {
	rep := ReloadReport{MCP: []string{"started files", "stopped web"}}
	rep.Config.MCPServersAdded = []string{"files"}
	if got := rep.Summary(); got != "mcp_servers: started files, stopped web" {
		t.Errorf("Summary = %q", got)
	}
	rep.MCP = nil
	if got := rep.Summary(); got != "mcp_servers +files" {
		t.Errorf("Summary without a set = %q", got)
	}
}
