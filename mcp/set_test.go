package mcp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/restart"
	"github.com/hookroom/hookroom/mcp"
	"github.com/hookroom/hookroom/mcp/mcptest"
	"github.com/hookroom/hookroom/sandbox"
)

func parseConfig(t *testing.T, dir, servers string) *config.Config {
	t.Helper()
	src := "matrix: {homeserver: http://localhost:8008}\nmodels: {m: {provider: echo, api_key: model-secret}}\nmcp_servers:\n" + servers
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var fastRestart = restart.Policy{Delay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond}

func TestSetReload(t *testing.T) {
	ctx, _ := testContext(t)
	dir := t.TempDir()
	first := parseConfig(t, dir, `
  keep: {command: `+stdioServer+`}
  change: {command: `+stdioServer+`}
  drop: {command: `+stdioServer+`}
`)
	a, err := mcp.Load(ctx, first, nil, mcp.Options{Restart: fastRestart})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if got := a.Names(); !slices.Equal(got, []string{"change", "drop", "keep"}) {
		t.Fatalf("Names = %v", got)
	}
	if got := a.Changes(nil); !slices.Equal(got, []string{"started change", "started drop", "started keep"}) {
		t.Errorf("Changes(nil) = %v", got)
	}
	keepPID, changePID, dropPID := a.Server("keep").PID(), a.Server("change").PID(), a.Server("drop").PID()

	second := parseConfig(t, dir, `
  keep: {command: `+stdioServer+`}
  change: {command: `+stdioServer+`, call_timeout: 5s}
  added: {command: `+stdioServer+`}
`)
	b, err := mcp.Load(ctx, second, a, mcp.Options{Restart: fastRestart})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if got := b.Changes(a); !slices.Equal(got, []string{"started added", "restarted change", "stopped drop"}) {
		t.Errorf("Changes = %v", got)
	}
	if b.Server("keep").PID() != keepPID {
		t.Error("the unchanged server was restarted")
	}
	if b.Server("change").PID() == changePID {
		t.Error("the changed server was not restarted")
	}
	// Closing the old set stops what the new one does not use.
	_ = a.Close()
	if got, err := b.CallTool(ctx, "keep", "echo", json.RawMessage(`{"text":"kept"}`)); err != nil || got != "echo: kept" {
		t.Errorf("kept server after closing the old set: %q, %v", got, err)
	}
	if alive(dropPID) || alive(changePID) {
		t.Errorf("removed or replaced servers still run (drop %v, old change %v)", alive(dropPID), alive(changePID))
	}
	if _, err := b.CallTool(ctx, "drop", "echo", nil); err == nil {
		t.Error("call of a removed server succeeded")
	}
	// Tools of every server, by server.
	var sources []string
	for _, tool := range b.Tools() {
		if tool.Name == "echo" {
			sources = append(sources, tool.Source())
		}
	}
	if !slices.Equal(sources, []string{"mcp:added", "mcp:change", "mcp:keep"}) {
		t.Errorf("echo sources = %v", sources)
	}
}

func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(nil) == nil && !zombie(pid)
}

// zombie says whether pid is reaped-pending (exited): /proc/PID/stat's
// state Z.
func zombie(pid int) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] == 'Z'
}

func TestSetConfigProblems(t *testing.T) {
	ctx, _ := testContext(t)
	dir := t.TempDir()
	t.Setenv("MCP_TEST_LEAK", "model-secret")
	cfg := parseConfig(t, dir, `
  missing: {command: no-such-mcp-server-program}
  leak: {command: `+stdioServer+`, env: [MCP_TEST_LEAK]}
`)
	_, err := mcp.Load(ctx, cfg, nil, mcp.Options{})
	if err == nil {
		t.Fatal("Load succeeded")
	}
	msg := err.Error()
	for _, want := range []string{
		`config.yaml:5: mcp_servers.missing.command: program "no-such-mcp-server-program" not found in PATH`,
		`config.yaml:6: mcp_servers.leak.env[0]: environment variable MCP_TEST_LEAK holds one of hookroom's own secrets and is never passed to MCP servers`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "model-secret") {
		t.Errorf("error shows the secret:\n%s", msg)
	}
}

func TestSetInspectWarns(t *testing.T) {
	ctx, _ := testContext(t)
	cfg := parseConfig(t, t.TempDir(), `
  broken: {command: `+stdioServer+`, args: [-exit-at-start]}
  fine: {command: `+stdioServer+`}
`)
	set, err := mcp.Load(ctx, cfg, nil, mcp.Options{Inspect: true})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	w := set.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], `mcp_servers.broken: MCP server "broken" did not start`) || !strings.Contains(w[0], "its tools are unknown") {
		t.Errorf("warnings = %q, want one naming broken", w)
	}
	if set.Server("broken").Starts() != 1 {
		t.Errorf("inspect started broken %d times, want once", set.Server("broken").Starts())
	}
	if !slices.Contains(toolNames(set.Tools()), "echo") {
		t.Errorf("tools = %v, want fine's", toolNames(set.Tools()))
	}
}

// TestFilesystemServer runs the reference filesystem server from npm
// (third-party code), confined by the sandbox where the kernel has
// Landlock.
func TestFilesystemServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the MCP filesystem server from npm: not run with -short")
	}
	ctx, _ := testContext(t)
	shared := t.TempDir()
	if err := os.WriteFile(filepath.Join(shared, "note.txt"), []byte("the secret word is marmalade\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fs := mcptest.FilesystemServer(t, shared)
	args, _ := json.Marshal(fs.Args)
	ro, _ := json.Marshal([]string{fs.Packages, shared})
	cfg := parseConfig(t, t.TempDir(), "  files: {command: "+fs.Node+", args: "+string(args)+", sandbox: {read_only: "+string(ro)+"}}\n")
	set, err := mcp.Load(ctx, cfg, nil, mcp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if w := set.Warnings(); len(w) > 0 {
		t.Fatalf("warnings: %q", w)
	}
	if !slices.Contains(toolNames(set.Tools()), "read_text_file") && !slices.Contains(toolNames(set.Tools()), "read_file") {
		t.Fatalf("tools = %v, want read_file", toolNames(set.Tools()))
	}
	got, err := set.CallTool(ctx, "files", "read_file", json.RawMessage(`{"path":"`+filepath.Join(shared, "note.txt")+`"}`))
	if err != nil || !strings.Contains(got, "marmalade") {
		t.Fatalf("read_file = %q, %v", got, err)
	}
	// Outside its allowed directories the server itself refuses.
	if _, err := set.CallTool(ctx, "files", "read_file", json.RawMessage(`{"path":"/etc/hostname"}`)); err == nil {
		t.Error("read_file outside the allowed directory succeeded")
	}
	if sandbox.Available() > 0 {
		t.Log("ran confined by Landlock")
	}
}
