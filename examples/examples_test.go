// Package examples_test loads every example plugin the way hookroom does
// (manifest, resolved command, the environment the loader gives, the state
// directory as working directory) and checks what it does to real hook
// emissions.
package examples_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/examples/go-redact/redact"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/process"
)

type logBuffer = testkit.Buffer

// start loads the plugin directory dir as the loader does and starts it.
func start(t *testing.T, dir string, settings map[string]any) (*process.Plugin, context.Context, *logBuffer) {
	t.Helper()
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := plugins.ReadManifest(dir)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	cmd, err := plugins.ResolveCommand(dir, m.Command)
	if err != nil {
		t.Fatalf("command: %v", err)
	}
	s, err := hooks.NewSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	ctx := zerolog.New(logs).WithContext(context.Background())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	state := t.TempDir()
	p, err := process.Start(ctx, process.Spec{
		Name: m.Name, Dir: dir, Command: cmd, StateDir: state, Settings: s,
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + state, "LANG=C.UTF-8"},
	})
	if err != nil {
		t.Fatalf("start %s: %v", m.Name, err)
	}
	t.Cleanup(func() { p.Close() })
	if p.Version() != m.Version {
		t.Errorf("the plugin declares version %q, its manifest %q", p.Version(), m.Version)
	}
	return p, ctx, logs
}

func emit[T any, P hooks.ContextOf[T]](t *testing.T, ctx context.Context, reg *hooks.Registry, ev hooks.Event[T], c P) {
	t.Helper()
	if err := hooks.Emit(ctx, reg, ev, c); err != nil {
		t.Fatal(err)
	}
}

func noFailures(t *testing.T, reg *hooks.Registry) {
	t.Helper()
	for _, s := range reg.Stats() {
		if s.Errors+s.Timeouts+s.Panics > 0 {
			t.Errorf("hook %s/%s: %+v", s.Plugin, s.Hook, s)
		}
	}
}

func TestLocationContext(t *testing.T) {
	p, ctx, _ := start(t, "location-context", map[string]any{"source": "locations.json", "max_age_minutes": 1})
	reg := hooktest.Registry(t, []hooks.Plugin{p.RegistryPlugin("example")})

	c := hooktest.MessageEnrich("where am I?") // from @alice:localhost
	emit(t, ctx, reg, hooks.MessageEnrich, c)
	if len(c.Items) != 1 || c.Items[0].Key != "location" || c.Items[0].CachePolicy != hooks.Stable ||
		!strings.HasPrefix(c.Items[0].Text, "User is at Home (San Francisco) (timezone America/Los_Angeles); last known location, 2026-03-23 09:55 UTC") {
		t.Errorf("items = %+v", c.Items)
	}

	c = hooktest.MessageEnrich("hi")
	c.Envelope.RequesterID = "@stranger:localhost"
	emit(t, ctx, reg, hooks.MessageEnrich, c)
	if len(c.Items) != 0 {
		t.Errorf("a person without a location got items %+v", c.Items)
	}
	noFailures(t, reg)

	// A missing source is logged, and the turn goes on without a location.
	p2, ctx2, logs2 := start(t, "location-context", map[string]any{"source": "/nonexistent/locations.json"})
	reg2 := hooktest.Registry(t, []hooks.Plugin{p2.RegistryPlugin("example")})
	c = hooktest.MessageEnrich("hi")
	emit(t, ctx2, reg2, hooks.MessageEnrich, c)
	if len(c.Items) != 0 {
		t.Errorf("items = %+v", c.Items)
	}
	logs2.WaitFor(t, "location source not found", 2*time.Second)
}

func TestToolGuard(t *testing.T) {
	settings := map[string]any{"deny": []any{
		map[string]any{"tool": "read_file", "argument": "path", "pattern": `secret|\.env$`, "reason": "Secrets stay unread."},
		map[string]any{"tool": "shell", "reason": "No shell for agents."},
	}}
	p, ctx, logs := start(t, "tool-guard", settings)
	var mu sync.Mutex
	var declined []map[string]string
	audit := hooks.Handle(hooks.MustCustomEvent("tool-guard:declined"), "audit", func(_ context.Context, c *hooks.CustomEventContext) error {
		var v map[string]string
		if err := c.DecodePayload(&v); err != nil {
			return err
		}
		mu.Lock()
		declined = append(declined, v)
		mu.Unlock()
		return nil
	})
	reg := hooktest.Registry(t, []hooks.Plugin{p.RegistryPlugin("example"), hooktest.Plugin("audit", audit)})
	tests := []struct {
		tool, args string
		reason     string
	}{
		{"read_file", `{"path":"/srv/app/.env"}`, "Secrets stay unread."},
		{"read_file", `{"path":"notes/secret-plans.md"}`, "Secrets stay unread."},
		{"read_file", `{"path":"notes/todo.md"}`, ""},
		{"shell", `{"cmd":"ls"}`, "No shell for agents."},
		{"web_search", `{"q":"secret"}`, ""},
	}
	for _, tc := range tests {
		c := hooktest.ToolBeforeCall(tc.tool, tc.args)
		emit(t, ctx, reg, hooks.ToolBeforeCall, c)
		if c.Declined != (tc.reason != "") || c.DeclineReason != tc.reason {
			t.Errorf("%s %s: declined=%v reason=%q, want %q", tc.tool, tc.args, c.Declined, c.DeclineReason, tc.reason)
		}
	}
	noFailures(t, reg)
	mu.Lock()
	defer mu.Unlock()
	if len(declined) != 3 || declined[0]["tool"] != "read_file" || declined[0]["agent"] != "assistant" || declined[2]["reason"] != "No shell for agents." {
		t.Errorf("tool-guard:declined events = %+v", declined)
	}
	logs.WaitFor(t, "declined a tool call", 2*time.Second)
}

func TestGoRedact(t *testing.T) {
	// The plugin directory as an operator has it: the manifest and the
	// binary built next to it.
	dir := t.TempDir()
	manifest, err := os.ReadFile(filepath.Join("go-redact", plugins.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, plugins.ManifestFile), manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "go-redact"), "./go-redact")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	settings := map[string]any{"patterns": []any{`internal-[0-9]{6}`}, "replacement": "[hidden]"}
	p, ctx, _ := start(t, dir, settings)

	s, err := hooks.NewSettings(settings)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := redact.Plugin.Builtin().New(ctx, plugins.Env{Name: "redact", Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]hooks.Plugin{
		"process":  p.RegistryPlugin("example"),
		"built in": {Name: "redact", Hooks: inst.Hooks(), Settings: s},
	}
	for name, hp := range modes {
		t.Run(name, func(t *testing.T) {
			reg := hooktest.Registry(t, []hooks.Plugin{hp})
			c := hooktest.BeforeResponse("Use sk-abcdefghijklmnopqrstuvwx and ticket internal-123456; AKIAABCDEFGHIJKLMNOP too.")
			emit(t, ctx, reg, hooks.MessageBeforeResponse, c)
			if want := "Use [hidden] and ticket [hidden]; [hidden] too."; c.Draft.Text != want {
				t.Errorf("draft = %q, want %q", c.Draft.Text, want)
			}
			f := hooktest.FinalResponse("token: Bearer abcdefghijklmnop1234")
			emit(t, ctx, reg, hooks.MessageFinalResponseTransform, f)
			if want := "token: [hidden]"; f.Draft.Text != want {
				t.Errorf("final = %q, want %q", f.Draft.Text, want)
			}
			noFailures(t, reg)
		})
	}

	// Bad settings fail the start, with the reason.
	s2, _ := hooks.NewSettings(map[string]any{"patterns": []any{"("}})
	_, err = process.Start(ctx, process.Spec{Name: "redact", Dir: dir, Command: []string{filepath.Join(dir, "go-redact")}, StateDir: t.TempDir(), Settings: s2})
	if err == nil || !strings.Contains(err.Error(), `setup failed: settings.patterns: "(": error parsing regexp`) {
		t.Errorf("err = %v", err)
	}
}

func TestManifestsMatchTheLoaderFormat(t *testing.T) {
	for _, dir := range []string{"location-context", "tool-guard", "go-redact"} {
		raw, err := os.ReadFile(filepath.Join(dir, plugins.ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"name", "version", "api_version", "command", "env", "description"} {
			if _, ok := fields[k]; !ok {
				t.Errorf("%s: manifest lacks %q", dir, k)
			}
		}
		if _, err := plugins.ParseManifest(raw); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
}

// The complete plugin in docs/plugin-protocol.md works as printed.
func TestProtocolDocPlugin(t *testing.T) {
	raw, err := os.ReadFile("../docs/plugin-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(raw), "<!-- minimal-plugin:begin -->\n```python\n")
	block, _, ok2 := strings.Cut(block, "```\n<!-- minimal-plugin:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/plugin-protocol.md lacks the marked minimal plugin")
	}
	dir := t.TempDir()
	manifest := `{"name": "sign", "version": "0.1.0", "api_version": 1, "command": ["python3", "plugin.py"], "env": []}`
	if err := os.WriteFile(filepath.Join(dir, plugins.ManifestFile), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plugin.py"), []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	p, ctx, logs := start(t, dir, map[string]any{"signature": "-- sent by hookroom"})
	reg := hooktest.Registry(t, []hooks.Plugin{p.RegistryPlugin("doc")})
	c := hooktest.BeforeResponse("Hello")
	emit(t, ctx, reg, hooks.MessageBeforeResponse, c)
	if c.Draft.Text != "Hello\n\n-- sent by hookroom" {
		t.Errorf("draft = %q", c.Draft.Text)
	}
	g := hooktest.ToolBeforeCall("shell", `{"cmd":"rm -rf /"}`)
	emit(t, ctx, reg, hooks.ToolBeforeCall, g)
	if !g.Declined || g.DeclineReason != "Agents may not run shell commands." {
		t.Errorf("declined=%v reason=%q", g.Declined, g.DeclineReason)
	}
	noFailures(t, reg)
	logs.WaitFor(t, `"hook":"no_shell"`, 2*time.Second)
	logs.WaitFor(t, "declined a shell call", 2*time.Second)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "did not exit") {
		t.Error("the doc's plugin did not exit after shutdown")
	}
}
