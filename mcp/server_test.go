package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/internal/restart"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/mcp"
	"github.com/hookroom/hookroom/mcp/mcptest"
)

// stdioServer is the test server built from testdata/stdioserver.
var stdioServer string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcp-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	stdioServer = filepath.Join(dir, "stdioserver")
	cmd := exec.Command("go", "build", "-o", stdioServer, "./testdata/stdioserver")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "failed to build the test server:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type logBuffer = testkit.Buffer

func testContext(t testing.TB) (context.Context, *logBuffer) {
	logs := &logBuffer{}
	log := zerolog.New(logs)
	ctx, cancel := context.WithTimeout(log.WithContext(context.Background()), time.Minute)
	t.Cleanup(cancel)
	return ctx, logs
}

func stdioSpec(t *testing.T, args ...string) mcp.Spec {
	return mcp.Spec{
		Name: "test", Command: append([]string{stdioServer}, args...), Dir: t.TempDir(),
		Env:          []string{"PATH=/usr/bin:/bin", "ALLOWED=yes"},
		StartTimeout: 20 * time.Second, CallTimeout: 10 * time.Second,
		Restart: restart.Policy{Delay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond, Limit: 3, Window: time.Minute},
	}
}

func startServer(t *testing.T, ctx context.Context, spec mcp.Spec) *mcp.Server {
	t.Helper()
	s := mcp.New(ctx, spec)
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func toolNames(tools []mcp.Tool) []string {
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	return names
}

func TestStdioListAndCall(t *testing.T) {
	ctx, logs := testContext(t)
	s := startServer(t, ctx, stdioSpec(t))
	names := toolNames(s.Tools())
	for _, want := range []string{"echo", "fail", "sleep", "crash", "add_tool", "env"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	if slices.Contains(names, "bad.name") {
		t.Errorf("tools %v include bad.name, which models cannot call", names)
	}
	if !strings.Contains(logs.String(), "bad.name") {
		t.Errorf("no warning about bad.name in the log:\n%s", logs)
	}
	echo := s.Tools()[slices.Index(names, "echo")]
	if echo.Server != "test" || echo.Source() != "mcp:test" || !json.Valid(echo.Parameters) || !strings.Contains(string(echo.Parameters), `"text"`) {
		t.Errorf("echo = %+v, want server test and a schema with text", echo)
	}

	tests := []struct {
		tool, args string
		want       string
		wantErr    string
	}{
		{"echo", `{"text":"hi"}`, "echo: hi", ""},
		{"echo", ``, "echo: ", ""},
		{"fail", `{"text":"boom"}`, "", "failed: boom"},
		{"nope", `{}`, "", `unknown tool "nope"`},
		{"echo", `{"text":5}`, "", "text"}, // the SDK validates the input schema
	}
	for _, tt := range tests {
		got, err := s.CallTool(ctx, tt.tool, json.RawMessage(tt.args))
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s(%s) = %q, %v; want an error with %q", tt.tool, tt.args, got, err, tt.wantErr)
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("%s(%s) = %q, %v; want %q", tt.tool, tt.args, got, err, tt.want)
		}
	}

	env, err := s.CallTool(ctx, "env", nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(env, "\n")
	slices.Sort(lines)
	if want := []string{"ALLOWED=yes", "PATH=/usr/bin:/bin"}; !slices.Equal(lines, want) {
		t.Errorf("environment = %v, want only %v", lines, want)
	}
}

func TestCallTimeout(t *testing.T) {
	ctx, _ := testContext(t)
	spec := stdioSpec(t)
	spec.CallTimeout = 200 * time.Millisecond
	s := startServer(t, ctx, spec)
	start := time.Now()
	_, err := s.CallTool(ctx, "sleep", json.RawMessage(`{"ms":10000}`))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer tool sleep in time") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the call took %v, want about the 200ms timeout", took)
	}
	// The server still answers.
	if got, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"still"}`)); err != nil || got != "echo: still" {
		t.Errorf("echo after a timeout = %q, %v", got, err)
	}
}

func TestRestartAfterCrash(t *testing.T) {
	ctx, logs := testContext(t)
	s := startServer(t, ctx, stdioSpec(t))
	pid := s.PID()
	_, err := s.CallTool(ctx, "crash", nil)
	if !errors.Is(err, mcp.ErrExited) || !strings.Contains(err.Error(), "crashing on request") {
		t.Fatalf("crash call: %v, want ErrExited with the stderr tail", err)
	}
	testkit.Eventually(t, 20*time.Second, "the restart", func() bool { return s.PID() != 0 && s.PID() != pid })
	if got, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"back"}`)); err != nil || got != "echo: back" {
		t.Errorf("echo after the restart = %q, %v", got, err)
	}
	if !s.Healthy() || s.Starts() != 2 {
		t.Errorf("Healthy = %v, Starts = %d; want true, 2", s.Healthy(), s.Starts())
	}
	if !strings.Contains(logs.String(), `MCP server \"test\" crashed; restarting it`) {
		t.Errorf("no crash warning in the log:\n%s", logs)
	}
}

func TestStdioCrashLoopDisables(t *testing.T) {
	ctx, logs := testContext(t)
	s := mcp.New(ctx, stdioSpec(t, "-exit-at-start"))
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Start(ctx); err == nil || !strings.Contains(err.Error(), "told to exit at start") {
		t.Fatalf("Start = %v, want the failure with the server's stderr", err)
	}
	testkit.Eventually(t, 20*time.Second, "the crash loop to disable the server", s.Disabled)
	if n := s.Starts(); n != 3 {
		t.Errorf("started %d times, want 3 (crash_limit)", n)
	}
	_, err := s.CallTool(ctx, "echo", nil)
	if !errors.Is(err, mcp.ErrDisabled) {
		t.Errorf("call on a disabled server: %v, want ErrDisabled", err)
	}
	if !strings.Contains(logs.String(), `MCP server \"test\" disabled: it crashed 3 times within 1m0s; its tools fail until the next reload`) {
		t.Errorf("no clear log line about the disabled server:\n%s", logs)
	}
}

func TestToolsListChanged(t *testing.T) {
	ctx, _ := testContext(t)
	s := startServer(t, ctx, stdioSpec(t))
	v := s.Version()
	if _, err := s.CallTool(ctx, "add_tool", json.RawMessage(`{"text":"late_tool"}`)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "late_tool to be listed", func() bool { return slices.Contains(toolNames(s.Tools()), "late_tool") })
	if s.Version() == v {
		t.Error("Version did not change with the tool list")
	}
	if got, err := s.CallTool(ctx, "late_tool", nil); err != nil || got != "added tool ran" {
		t.Errorf("late_tool = %q, %v", got, err)
	}
}

func TestHTTPServer(t *testing.T) {
	ctx, _ := testContext(t)
	hs := mcptest.NewHTTPServer(t)
	s := startServer(t, ctx, mcp.Spec{Name: "web", URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer tok"}})
	if got, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"over http"}`)); err != nil || got != "echo: over http" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	for _, h := range hs.Headers() {
		if h.Get("Authorization") != "Bearer tok" {
			t.Fatalf("a request without the configured header: %v", h)
		}
	}
	// The server forgets the session (a restart) and drops the
	// connections: a call whose request never reached it is made again
	// on a new session; one cut off in flight fails, and the next call
	// connects again.
	for i := range 3 {
		hs.ForgetSessions()
		if _, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"lost"}`)); err != nil {
			t.Logf("call %d right after the server forgot the session: %v", i, err)
		}
		if got, err := s.CallTool(ctx, "echo", json.RawMessage(`{"text":"again"}`)); err != nil || got != "echo: again" {
			t.Fatalf("echo after reconnecting = %q, %v", got, err)
		}
	}
}

func TestClosedServer(t *testing.T) {
	ctx, _ := testContext(t)
	s := startServer(t, ctx, stdioSpec(t))
	pid := s.PID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallTool(ctx, "echo", nil); !errors.Is(err, mcp.ErrClosed) {
		t.Errorf("call after Close: %v, want ErrClosed", err)
	}
	if err := exec.Command("kill", "-0", fmt.Sprint(pid)).Run(); err == nil {
		t.Errorf("process %d still runs after Close", pid)
	}
}
