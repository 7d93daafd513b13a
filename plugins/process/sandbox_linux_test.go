package process_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process"
	"github.com/hookroom/hookroom/sandbox"
)

// A sandboxed plugin reaches its directory (read) and its state directory
// (read/write) and nothing of the server's: not the database next to its
// state directory, not the server's environment in /proc.
func TestSandboxConfinesThePlugin(t *testing.T) {
	if sandbox.Available() == 0 {
		t.Fatal("this kernel has no Landlock; the sandbox test needs it")
	}
	ctx, _ := testContext(t)
	data := t.TempDir() // as <data_dir>: the database and the plugins' state
	db := filepath.Join(data, "hookroom.db")
	if err := os.WriteFile(db, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := fakeSpec(t, "ok")
	spec.StateDir = filepath.Join(data, "plugins", "fake")
	if err := os.WriteFile(filepath.Join(spec.Dir, "plugin.yaml"), []byte("name: fake\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := sandbox.ForProgram(spec.Command[0], spec.Dir, spec.StateDir, nil, nil)
	spec.Sandbox = &policy
	p, err := process.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { closeAndCheck(t, p) })

	call := func(tool, path string) string {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"path": path})
		out, err := p.CallTool(ctx, tool, process.ToolCall{ToolCall: hooks.ToolCall{Arguments: args}})
		if err != nil {
			t.Fatalf("%s %s: %v", tool, path, err)
		}
		return out
	}
	for _, tc := range []struct {
		tool, path string
		ok         bool
	}{
		{"read", filepath.Join(spec.Dir, "plugin.yaml"), true},
		{"write", filepath.Join(spec.Dir, "plugin.yaml"), false},
		{"write", filepath.Join(spec.StateDir, "cache.json"), true},
		{"read", filepath.Join(spec.StateDir, "cache.json"), true},
		{"read", db, false},
		{"write", filepath.Join(data, "other"), false},
		{"read", fmt.Sprintf("/proc/%d/environ", os.Getpid()), false},
	} {
		got := call(tc.tool, tc.path)
		if tc.ok != (got == "ok") || (!tc.ok && !strings.Contains(got, "permission denied")) {
			t.Errorf("%s %s = %q, want allowed=%v", tc.tool, tc.path, got, tc.ok)
		}
	}
	// Its temporary directory is inside the state directory.
	var env struct{ Env []string }
	raw, err := p.CallTool(ctx, "env", process.ToolCall{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(raw), &env); err != nil {
		t.Fatal(err)
	}
	want := "TMPDIR=" + filepath.Join(spec.StateDir, "tmp")
	found := false
	for _, kv := range env.Env {
		found = found || kv == want
	}
	if !found {
		t.Errorf("environment %v lacks %s", env.Env, want)
	}
}
