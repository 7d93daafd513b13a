package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/bot"
	"github.com/hookroom/hookroom/mcp/mcptest"
)

// hookroom check and tools start the MCP servers once to list their
// tools; one that does not start is a warning naming it, not a failure.
func TestMCPServersInCheckAndTools(t *testing.T) {
	web := mcptest.NewHTTPServer(t)
	data, err := os.ReadFile(exampleConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(data), "tools: [current_time, room_info]", `tools: [current_time, room_info, "mcp:web/*", "mcp:broken/*"]`, 1)
	body += "\nmcp_servers:\n  web:\n    url: " + web.URL + "\n  broken:\n    command: /bin/false\n"
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--config", path}, &out, &errOut); code != 0 {
		t.Fatalf("check exited %d:\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), `mcp_servers.broken: MCP server "broken" did not start`) {
		t.Errorf("check does not warn about the broken server:\n%s", errOut.String())
	}

	out.Reset()
	errOut.Reset()
	if code := run([]string{"tools", "--config", path, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("tools exited %d:\n%s", code, errOut.String())
	}
	var list []bot.AgentTools
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		t.Fatalf("tools --json printed no JSON: %v\n%s", err, out.String())
	}
	var got []string
	for _, a := range list {
		if a.Agent == "assistant" {
			for _, tool := range a.Tools {
				got = append(got, tool.Qualified())
			}
		}
	}
	if want := []string{"builtin/current_time", "builtin/room_info", "mcp:web/echo"}; !slices.Equal(got, want) {
		t.Errorf("assistant's tools %v, want %v", got, want)
	}
}
