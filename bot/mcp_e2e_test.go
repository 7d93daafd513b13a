package bot

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/mcp/mcptest"
)

// filesServerYAML configures the reference filesystem server from npm as
// MCP server name, serving dir, confined to its packages and dir. Before
// starting node, the server's command exits at once when its home
// directory holds a file called "broken" (for crash-loop tests).
func filesServerYAML(t *testing.T, name, dir, extra string) string {
	fs := mcptest.FilesystemServer(t, dir)
	script := `[ -e "$HOME/broken" ] && exit 7; exec "$0" "$@"`
	args, _ := json.Marshal(append([]string{"-c", script, fs.Node}, fs.Args...))
	ro, _ := json.Marshal([]string{fs.Packages, dir})
	return "  " + name + ":\n    command: /bin/sh\n    args: " + string(args) + "\n    sandbox: {read_only: " + string(ro) + "}\n" + extra
}

// An agent calls read_file of the reference filesystem server (a real
// third-party MCP server from npm) and answers with the file's content;
// the call passes the tool hooks. The server is then killed
// mid-conversation; once the supervisor restarted it, the next call works.
func TestMCPToolEndToEnd(t *testing.T) {
	shared := t.TempDir()
	note := filepath.Join(shared, "note.txt")
	if err := os.WriteFile(note, []byte("the secret word is marmalade\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	e := newTurnEnvOn(t, "mcp_servers:\n"+filesServerYAML(t, "files", shared, ""), []string{"helper"},
		"    tools: [\"mcp:files/read_file\", current_time]\n",
		hooks.Handle(hooks.ToolBeforeCall, "see", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, "before:"+c.Tool)
			return nil
		}),
		hooks.Handle(hooks.ToolAfterCall, "saw", func(_ context.Context, c *hooks.ToolAfterCallContext) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, "after:"+c.Tool+":"+strings.TrimSpace(c.Result)+c.Error)
			return nil
		}),
	)
	if got := e.bot.bot.toolsFor(e.bot.bot.w(), "helper").Names(); !slices.Equal(got, []string{"read_file", "current_time"}) {
		t.Fatalf("helper's tools = %v", got)
	}
	args := `{"path":"` + note + `"}`
	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("c1", "read_file", args)),
		llmtest.Text("The note says marmalade."),
	)
	q := e.say("what does the note say?", "")
	if got := e.waitTerminal(1); got[0] != "after:The note says marmalade." {
		t.Fatalf("terminal %v", got)
	}
	if got := toolMessages(e, 1); len(got) != 1 || !strings.Contains(got[0], "the secret word is marmalade") {
		t.Fatalf("the model got %q, want the file's content", got)
	}
	mu.Lock()
	if want := []string{"before:read_file", "after:read_file:the secret word is marmalade"}; !slices.Equal(seen, want) {
		t.Errorf("tool hooks saw %q, want %q", seen, want)
	}
	mu.Unlock()

	// Kill the server mid-conversation; the supervisor restarts it.
	srv := e.bot.bot.w().mcp.Server("files")
	pid := srv.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the supervisor to restart the MCP server", func() bool { return srv.PID() != 0 && srv.PID() != pid })
	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("c2", "read_file", args)),
		llmtest.Text("Still marmalade."),
	)
	e.say("and now?", q)
	if got := e.waitTerminal(2); got[1] != "after:Still marmalade." {
		t.Fatalf("terminal %v", got)
	}
	if got := toolMessages(e, 3); len(got) < 2 || !strings.Contains(got[len(got)-1], "marmalade") {
		t.Fatalf("after the restart the model got %q, want the file's content", got)
	}
}

// Editing mcp_servers and reloading starts added servers, restarts changed
// ones, stops removed ones and keeps the others running; the agents' tools
// follow.
func TestReloadMCPServers(t *testing.T) {
	shared := t.TempDir()
	web := mcptest.NewHTTPServer(t)
	web2 := mcptest.NewHTTPServer(t)
	files := filesServerYAML(t, "files", shared, "")
	keep := filesServerYAML(t, "keep", shared, "")
	e := newTurnEnvOn(t, "mcp_servers:\n"+files+keep+"  web:\n    url: "+web.URL+"\n", []string{"helper"},
		"    tools: [\"mcp:*/echo\", \"mcp:files/list_directory\"]\n")
	b := e.bot.bot
	toolSources := func() []string {
		var out []string
		for _, ti := range b.Tools()[0].Tools {
			out = append(out, ti.Qualified())
		}
		return out
	}
	if got := toolSources(); !slices.Equal(got, []string{"mcp:web/echo", "mcp:files/list_directory"}) {
		t.Fatalf("tools before the reload = %v", got)
	}
	filesPID, keepPID := b.w().mcp.Server("files").PID(), b.w().mcp.Server("keep").PID()

	changed := strings.Replace(e.cfg, files, filesServerYAML(t, "files", shared, "    call_timeout: 20s\n"), 1)
	changed = strings.Replace(changed, "  web:\n    url: "+web.URL+"\n", "  web2:\n    url: "+web2.URL+"\n", 1)
	e.config(changed)
	rep, err := b.Reload(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"restarted files", "started web2", "stopped web"}; !slices.Equal(rep.MCP, want) {
		t.Errorf("reload report %q, want %q", rep.MCP, want)
	}
	if !strings.Contains(rep.Summary(), "mcp_servers: restarted files, started web2, stopped web") {
		t.Errorf("summary %q", rep.Summary())
	}
	if got := b.w().mcp.Server("keep").PID(); got != keepPID {
		t.Errorf("unchanged server restarted: pid %d → %d", keepPID, got)
	}
	if got := b.w().mcp.Server("files").PID(); got == filesPID || got == 0 {
		t.Errorf("changed server not restarted: pid %d → %d", filesPID, got)
	}
	testkit.Eventually(t, 60*time.Second, "the old files process to exit", func() bool { return syscall.Kill(filesPID, 0) != nil })
	if got := toolSources(); !slices.Equal(got, []string{"mcp:web2/echo", "mcp:files/list_directory"}) {
		t.Errorf("tools after the reload = %v", got)
	}

	// A turn uses the added server.
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "echo", `{"text":"hello"}`)), llmtest.Text("done"))
	e.say("echo hello", "")
	if got := e.waitTerminal(1); got[0] != "after:done" {
		t.Fatalf("terminal %v", got)
	}
	if got := toolMessages(e, 1); len(got) != 1 || got[0] != "echo: hello" {
		t.Errorf("the model got %q, want web2's echo", got)
	}

	// Reloading an unchanged configuration touches no server.
	rep, err = b.Reload(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.MCP) != 0 || b.w().mcp.Server("keep").PID() != keepPID {
		t.Errorf("unchanged reload: report %q, keep pid %d → %d", rep.MCP, keepPID, b.w().mcp.Server("keep").PID())
	}
}

// A stdio MCP server that keeps crashing is disabled after crash_limit
// crashes; its tool calls then fail with a message the model sees, and the
// rest of the turn goes on.
func TestStdioCrashLoopDisables(t *testing.T) {
	shared := t.TempDir()
	e := newTurnEnvOn(t, "mcp_servers:\n"+filesServerYAML(t, "files", shared, "    crash_limit: 3\n"), []string{"helper"},
		"    tools: [\"mcp:files/read_file\"]\n")
	srv := e.bot.bot.w().mcp.Server("files")
	// From now on the server's command exits at once.
	home := e.bot.bot.w().cfg.MCPStateDir("files")
	if err := os.WriteFile(filepath.Join(home, "broken"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(srv.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the crash loop to disable the server", srv.Disabled)
	if n := srv.Starts(); n != 3 {
		t.Errorf("the server was started %d times, want 3 (the first start and 2 restarts; the 3rd crash disables it)", n)
	}
	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("c1", "read_file", `{"path":"`+filepath.Join(shared, "x")+`"}`)),
		llmtest.Text("The file server is down."),
	)
	e.say("read x", "")
	if got := e.waitTerminal(1); got[0] != "after:The file server is down." {
		t.Fatalf("terminal %v", got)
	}
	if got := toolMessages(e, 1); len(got) != 1 || !strings.Contains(got[0], "disabled after crashing repeatedly") {
		t.Errorf("the model got %q, want the disabled server named", got)
	}
}
