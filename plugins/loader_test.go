package plugins_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/sandbox"
)

// load loads cfg with l (no previous set), failing t on error; the set is
// closed when t ends.
func load(t *testing.T, l *plugins.Loader, cfg *config.Config) *plugins.Set {
	t.Helper()
	set, err := l.Load(hooktest.Context(t), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

// loadRegistry loads cfg with l (see load) and builds the set's registry
// with the default options, failing t on error.
func loadRegistry(t *testing.T, l *plugins.Loader, cfg *config.Config) (*plugins.Set, *hooks.Registry) {
	t.Helper()
	set := load(t, l, cfg)
	reg, err := set.Registry(hooks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return set, reg
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup func(p *project)
		src   string // after the two header lines: its first line is line 3
		want  []string
	}{
		{
			name: "missing directory",
			src:  "plugins:\n  - ./plugins/nope\n",
			want: []string{"ROOT/config.yaml:4: plugins[0]: plugin directory ROOT/plugins/nope does not exist"},
		},
		{
			name:  "path is a file",
			setup: func(p *project) { p.file("plugins/file", "x") },
			src:   "plugins:\n  - path: ./plugins/file\n",
			want:  []string{"ROOT/config.yaml:4: plugins[0]: ROOT/plugins/file is not a directory (a plugin is a directory with hookroom-plugin.json)"},
		},
		{
			name:  "missing manifest",
			setup: func(p *project) { p.file("plugins/empty/README", "x") },
			src:   "plugins:\n  - builtin: test_builtin\n  - ./plugins/empty\n",
			want:  []string{"ROOT/config.yaml:5: plugins[1]: ROOT/plugins/empty/hookroom-plugin.json: no hookroom-plugin.json in the plugin directory"},
		},
		{
			name: "unknown built-in",
			src:  "plugins:\n  - builtin: nope\n",
			want: []string{`ROOT/config.yaml:4: plugins[0].builtin: unknown built-in plugin "nope" (known: test_builtin)`},
		},
		{
			name: "manifest names an unknown built-in",
			setup: func(p *project) {
				p.file("plugins/b/hookroom-plugin.json", `{"name":"b","version":"1","api_version":1,"builtin":"nope"}`)
			},
			src:  "plugins:\n  - ./plugins/b\n",
			want: []string{`ROOT/config.yaml:4: plugins[0]: ROOT/plugins/b/hookroom-plugin.json: unknown built-in plugin "nope" (known: test_builtin)`},
		},
		{
			name: "api_version mismatch and bad name",
			setup: func(p *project) {
				p.file("plugins/v2/hookroom-plugin.json", "{\"name\":\"V2\",\"version\":\"1\",\n\"api_version\":2,\"command\":[\"x\"]}")
			},
			src: "plugins:\n  - ./plugins/v2\n",
			want: []string{
				`ROOT/config.yaml:4: plugins[0]: ROOT/plugins/v2/hookroom-plugin.json:1: name: "V2" must match ^[a-z0-9_-]+$`,
				"ROOT/config.yaml:4: plugins[0]: ROOT/plugins/v2/hookroom-plugin.json:2: api_version: 2 is not supported (this hookroom speaks 1)",
			},
		},
		{
			name: "duplicate plugin names",
			setup: func(p *project) {
				p.procPlugin("plugins/a", "same")
				p.procPlugin("plugins/b", "same")
			},
			src:  "plugins:\n  - ./plugins/a\n  - path: ./plugins/b\n",
			want: []string{`ROOT/config.yaml:5: plugins[1]: plugin name "same" is also used by plugins[0]`},
		},
		{
			name: "built-in entry and directory with the same name",
			setup: func(p *project) {
				p.procPlugin("plugins/a", "test_builtin")
			},
			src:  "plugins:\n  - builtin: test_builtin\n  - ./plugins/a\n",
			want: []string{`ROOT/config.yaml:5: plugins[1]: plugin name "test_builtin" is also used by plugins[0]`},
		},
		{
			name: "settings error points at the setting",
			src:  "plugins:\n  - builtin: test_builtin\n    settings:\n      bad:\n        - x\n        - y\n",
			want: []string{"ROOT/config.yaml:8: plugins[0].settings.bad[1]: is bad"},
		},
		{
			name: "unknown setting of a built-in",
			src:  "plugins:\n  - builtin: test_builtin\n    settings:\n      hooks: []\n      colour: red\n",
			want: []string{"ROOT/config.yaml:7: plugins[0].settings.colour: unknown setting"},
		},
		{
			name: "wrong setting type",
			src:  "plugins:\n  - builtin: test_builtin\n    settings:\n      hooks: 3\n",
			want: []string{"ROOT/config.yaml:6: plugins[0].settings.hooks: must be a list, not number"},
		},
		{
			name: "failure policy closed on a non-gate hook",
			setup: func(p *project) {
				p.procPlugin("plugins/a", "a", "message:received log")
			},
			src:  "plugins:\n  - path: ./plugins/a\n    hooks:\n      log:\n        failure_policy: closed\n",
			want: []string{`ROOT/config.yaml:6: plugins[0].hooks.log: plugin "a": hook "log": failure policy closed only applies to gate events, not message:received (observer)`},
		},
		{
			name: "invalid event name from a plugin",
			setup: func(p *project) {
				p.procPlugin("plugins/a", "a", "message:nope x")
			},
			src:  "plugins:\n  - ./plugins/a\n",
			want: []string{`ROOT/config.yaml:4: plugins[0]: plugin "a": hook "x": invalid event name "message:nope": namespace "message" is reserved for built-in events`},
		},
		{
			name: "duplicate tool names",
			setup: func(p *project) {
				p.procPlugin("plugins/a", "a", "tool lookup")
				p.procPlugin("plugins/b", "b", "tool lookup")
			},
			src:  "plugins:\n  - ./plugins/a\n  - ./plugins/b\n",
			want: []string{`ROOT/config.yaml:5: plugins[1]: tool "lookup" of plugin "b" is also provided by plugin "a" (plugins[0])`},
		},
		{
			name: "process fails to start",
			setup: func(p *project) {
				p.procPlugin("plugins/crash", "crash")
			},
			src:  "plugins:\n  - ./plugins/crash\n",
			want: []string{`ROOT/config.yaml:4: plugins[0]: plugin "crash" failed to start: exited with status 1 during the handshake`},
		},
		{
			name: "missing program",
			setup: func(p *project) {
				p.file("plugins/a/hookroom-plugin.json", `{"name":"a","version":"1","api_version":1,"command":["./run"]}`)
				p.file("plugins/b/hookroom-plugin.json", `{"name":"b","version":"1","api_version":1,"command":["no-such-program-anywhere"]}`)
			},
			src: "plugins:\n  - ./plugins/a\n  - ./plugins/b\n",
			want: []string{
				`ROOT/config.yaml:4: plugins[0]: ROOT/plugins/a/hookroom-plugin.json: command: program "./run" does not exist in the plugin directory`,
				`ROOT/config.yaml:5: plugins[1]: ROOT/plugins/b/hookroom-plugin.json: command: exec: "no-such-program-anywhere": executable file not found in $PATH`,
			},
		},
		{
			name: "every problem at once, disabled entries ignored",
			setup: func(p *project) {
				p.procPlugin("plugins/ok", "ok")
			},
			src: "plugins:\n  - ./plugins/missing1\n  - ./plugins/ok\n  - path: ./plugins/missing2\n    enabled: false\n  - builtin: nope\n",
			want: []string{
				"ROOT/config.yaml:4: plugins[0]: plugin directory ROOT/plugins/missing1 does not exist",
				`ROOT/config.yaml:8: plugins[3].builtin: unknown built-in plugin "nope" (known: test_builtin)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProject(t)
			if tt.setup != nil {
				tt.setup(p)
			}
			cfg := p.config(tt.src)
			procs := newFakeProcs()
			procs.fail["crash"] = errors.New("exited with status 1 during the handshake")
			l := plugins.Loader{StartProcess: procs.start}
			set, err := l.Load(hooktest.Context(t), cfg, nil)
			if err == nil {
				set.Close()
				t.Fatalf("Load succeeded, want errors:\n%s", strings.Join(tt.want, "\n"))
			}
			if got := p.errLines(err); !slices.Equal(got, tt.want) {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			// Whatever did start was closed again.
			for _, inst := range procs.all {
				if !inst.isClosed() {
					t.Errorf("instance %s still running after a failed load", inst.name)
				}
			}
		})
	}
}

func TestRegistryOrderAndOverrides(t *testing.T) {
	p := newProject(t)
	p.procPlugin("plugins/first", "first", "tool:before_call gate", "message:received log", "message:enrich enrich 50")
	p.procPlugin("plugins/second", "second", "tool:before_call gate", "message:received log", "message:enrich enrich 50")
	cfg := p.config(`plugins:
  - ./plugins/first
  - path: ./plugins/second
    hooks:
      gate:
        priority: 10
        timeout_ms: 750
        failure_policy: closed
      log:
        enabled: false
      nosuch:
        priority: 1
  - builtin: test_builtin
    settings:
      hooks:
        - message:received log 100
        - tool:before_call gate 100
agents:
  code:
    plugins: [first, test_builtin, ghost]
  free: {}
models:
  default: {provider: echo}
`)
	procs := newFakeProcs()
	set, reg := loadRegistry(t, &plugins.Loader{StartProcess: procs.start}, cfg)
	if w := reg.Warnings(); len(w) != 0 {
		t.Errorf("registry warnings %q: the set should have taken them", w)
	}
	wantWarnings := []string{
		`ROOT/config.yaml:13: plugins[1].hooks.nosuch: plugin "second" declares no hook "nosuch"; the override is ignored (its hooks: gate, log, enrich)`,
		`ROOT/config.yaml:22: agents.code.plugins[2]: agent "code" allows plugin "ghost", which is not loaded`,
	}
	if got := p.strip(set.Warnings()); !slices.Equal(got, wantWarnings) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantWarnings, "\n"))
	}

	type row struct {
		Event, Plugin, Hook, Policy string
		Priority                    int
		Timeout                     time.Duration
	}
	var got []row
	for _, h := range reg.Hooks() {
		got = append(got, row{h.Event, h.Plugin, h.Hook, h.FailurePolicy, h.Priority, h.Timeout})
	}
	want := []row{
		{"message:received", "first", "log", "open", 100, 15 * time.Second},
		{"message:received", "test_builtin", "log", "open", 100, 15 * time.Second},
		{"message:enrich", "first", "enrich", "open", 50, 2 * time.Second},
		{"message:enrich", "second", "enrich", "open", 50, 2 * time.Second},
		{"tool:before_call", "second", "gate", "closed", 10, 750 * time.Millisecond},
		{"tool:before_call", "first", "gate", "open", 100, 200 * time.Millisecond},
		{"tool:before_call", "test_builtin", "gate", "open", 100, 200 * time.Millisecond},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("hooks:\n%+v\nwant:\n%+v", got, want)
	}
	sources := map[string]string{}
	for _, h := range reg.Hooks() {
		sources[h.Plugin] = h.Source
	}
	if want := map[string]string{"first": "./plugins/first", "second": "./plugins/second", "test_builtin": "builtin:test_builtin"}; !reflect.DeepEqual(sources, want) {
		t.Errorf("sources %v, want %v", sources, want)
	}

	// The allowlist: "code" runs only first and test_builtin; "free" and
	// agents without an entry run everything.
	tests := []struct {
		agent hooks.AgentName
		want  []string
	}{
		{"code", []string{"first/gate", "test_builtin/gate"}},
		{"free", []string{"second/gate", "first/gate", "test_builtin/gate"}},
		{"other", []string{"second/gate", "first/gate", "test_builtin/gate"}},
	}
	for _, tt := range tests {
		c := hooktest.ToolBeforeCall("shell", `{}`)
		c.Agent = tt.agent
		testCalls.take()
		hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
		if got := testCalls.take(); !slices.Equal(got, tt.want) {
			t.Errorf("agent %s ran %q, want %q", tt.agent, got, tt.want)
		}
	}

	// Options from the caller win over config.yaml.
	reg2, err := set.Registry(hooks.Options{Allowlist: map[hooks.AgentName][]string{"code": {"second"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := hooktest.ToolBeforeCall("shell", `{}`)
	c.Agent = "code"
	testCalls.take()
	hooktest.Emit(t, reg2, hooks.ToolBeforeCall, c)
	if got := testCalls.take(); !slices.Equal(got, []string{"second/gate"}) {
		t.Errorf("with the caller's allowlist, code ran %q", got)
	}

	infos := set.Plugins()
	if len(infos) != 3 || infos[0].Name != "first" || infos[1].Kind != plugins.KindProcess || infos[2].Kind != plugins.KindBuiltin ||
		infos[2].Description != "a built-in for tests" || infos[0].Version != "1.0" || !slices.Equal(infos[1].Hooks, []string{"gate", "log", "enrich"}) {
		t.Errorf("Plugins() = %+v", infos)
	}
}

func TestEmptyAllowlistRunsNothing(t *testing.T) {
	p := newProject(t)
	cfg := p.config(`plugins:
  - builtin: test_builtin
    settings:
      hooks: [tool:before_call gate]
agents:
  none:
    plugins: []
models:
  default: {provider: echo}
`)
	_, reg := loadRegistry(t, &plugins.Loader{}, cfg)
	c := hooktest.ToolBeforeCall("shell", `{}`)
	c.Agent = "none"
	testCalls.take()
	hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
	if got := testCalls.take(); len(got) != 0 {
		t.Errorf("agent with an empty allowlist ran %q", got)
	}
}

func TestProcessEnvironment(t *testing.T) {
	p := newProject(t)
	p.file("plugins/geo/hookroom-plugin.json", `{"name":"geo","version":"1","api_version":1,"command":["/bin/sh","run.sh","--verbose"],"env":["GEO_KEY","GEO_URL","UNSET_VAR"]}`)
	p.file("plugins/geo/run.sh", "#!/bin/sh\n")
	p.file("plugins/leak/hookroom-plugin.json", `{"name":"leak","version":"1","api_version":1,"command":["/bin/sh"],"env":["REG_TOKEN"]}`)
	serverEnv := map[string]string{
		"PATH": "/opt/bin:/usr/bin", "LANG": "de_DE.UTF-8", "HOME": "/root",
		"GEO_KEY": "k-123", "GEO_URL": "http://geo", "REG_TOKEN": "s3cret-token-value", "OTHER": "x",
		"GEO_ENDPOINT": "http://geo.internal/abc",
	}
	src := `matrix:
  homeserver: http://localhost:8008
  registration:
    token: ${REG_TOKEN}
data_dir: ./state
plugins:
  - path: ./plugins/geo
    settings:
      api_key: literal-key-123
      city: Paris
      endpoint: ${GEO_ENDPOINT}
`
	cfg, err := parseWithEnv(p, src, serverEnv)
	if err != nil {
		t.Fatal(err)
	}
	procs := newFakeProcs()
	allow := map[string][]string{"geo": {"GEO_KEY", "UNSET_VAR", "NOT_ASKED"}, "leak": {"REG_TOKEN"}}
	l := plugins.Loader{
		StartProcess: procs.start,
		LookupEnv:    fakeLookup(serverEnv),
		AllowEnv:     func(e config.PluginEntry) []string { return allow[strings.TrimPrefix(e.Path, "./plugins/")] },
	}
	set := load(t, &l, cfg)
	spec := procs.lastSpec("geo")
	state := p.root + "/state/plugins/geo"
	want := plugins.ProcessSpec{
		Name: "geo", Dir: p.root + "/plugins/geo",
		Command:  []string{"/bin/sh", p.root + "/plugins/geo/run.sh", "--verbose"},
		Env:      []string{"PATH=/opt/bin:/usr/bin", "HOME=" + state, "LANG=de_DE.UTF-8", "GEO_KEY=k-123"},
		StateDir: state,
		// Masked in what it logs: the server's secrets, its variables'
		// values, its secret settings (by key, or from ${VAR}).
		Secrets: []string{"http://geo.internal/abc", "k-123", "literal-key-123", "s3cret-token-value"},
	}
	slices.Sort(spec.Secrets)
	// Confined by default: its directory, its program's, its state.
	policy := sandbox.ForProgram("/bin/sh", p.root+"/plugins/geo", state, nil, nil)
	want.Sandbox = &policy
	spec.Overrides, spec.Settings = nil, hooks.Settings{}
	if !reflect.DeepEqual(spec, want) {
		t.Errorf("spec:\n%+v\nwant:\n%+v", spec, want)
	}
	wantWarnings := []string{
		`ROOT/config.yaml:7: plugins[0]: plugin "geo" asks for environment variable GEO_URL, which config.yaml does not allow it; the plugin does not get it`,
		`ROOT/config.yaml:7: plugins[0]: environment variable UNSET_VAR (allowed for plugin "geo") is not set`,
		`ROOT/config.yaml:7: plugins[0]: environment variable NOT_ASKED is allowed for plugin "geo", but its manifest does not ask for it`,
	}
	if got := p.strip(set.Warnings()); !slices.Equal(got, wantWarnings) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantWarnings, "\n"))
	}

	// A variable holding one of the server's own secrets is never passed,
	// even when allowed.
	cfg2, err := parseWithEnv(p, src+"  - ./plugins/leak\n", serverEnv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Load(hooktest.Context(t), cfg2, nil)
	wantErr := []string{"ROOT/config.yaml:12: plugins[1]: environment variable REG_TOKEN holds one of hookroom's own secrets and is never passed to plugins"}
	if err == nil {
		t.Fatal("Load passed a server secret to a plugin")
	}
	if got := p.errLines(err); !slices.Equal(got, wantErr) {
		t.Errorf("errors %q, want %q", got, wantErr)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error message leaks the secret: %v", err)
	}
}

func TestToolsAndCustomEvents(t *testing.T) {
	p := newProject(t)
	p.procPlugin("plugins/a", "a", "tool lookup")
	cfg := p.config(`plugins:
  - ./plugins/a
  - builtin: test_builtin
    settings:
      hooks: ["tool echo", "test:echoed on_echo"]
`)
	procs := newFakeProcs()
	set, reg := loadRegistry(t, &plugins.Loader{StartProcess: procs.start}, cfg)
	var names []string
	for _, tool := range set.Tools() {
		names = append(names, tool.Plugin+"/"+tool.Name+" "+string(tool.Parameters))
	}
	if want := []string{`a/lookup {"type":"object","properties":{}}`, `test_builtin/echo {"type":"object","properties":{}}`}; !slices.Equal(names, want) {
		t.Errorf("tools %q, want %q", names, want)
	}
	testCalls.take()
	out, err := set.CallTool(hooktest.Context(t), reg, "echo", plugins.ToolCall{ToolCall: hooks.ToolCall{Arguments: []byte(`{"q":1}`), Agent: "code"}})
	if err != nil || out != `test_builtin:{"q":1}` {
		t.Fatalf("CallTool = %q, %v", out, err)
	}
	if got := testCalls.take(); !slices.Equal(got, []string{"test_builtin/on_echo"}) {
		t.Errorf("custom event hooks ran %q", got)
	}
	if _, err := set.CallTool(hooktest.Context(t), reg, "nope", plugins.ToolCall{}); !errors.Is(err, plugins.ErrUnknownTool) {
		t.Errorf("unknown tool: %v", err)
	}
	// Without a registry the tool cannot emit and says why.
	if _, err := set.CallTool(hooktest.Context(t), nil, "lookup", plugins.ToolCall{}); !errors.Is(err, hooks.ErrNoService) {
		t.Errorf("tool without emitter: %v", err)
	}
}

func TestToolPanicIsAnError(t *testing.T) {
	tool := plugins.Tool{Name: "boom", Func: func(context.Context, plugins.ToolCall) (string, error) { panic("kaboom") }}
	_, err := tool.Call(context.Background(), plugins.ToolCall{})
	var pe *hooks.PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" {
		t.Fatalf("Call = %v, want a *hooks.PanicError", err)
	}
}

// The sandbox entry of a process plugin: off, or with the operator's
// additions resolved against the config directory.
func TestProcessSandboxConfig(t *testing.T) {
	p := newProject(t)
	p.file("plugins/geo/hookroom-plugin.json", `{"name":"geo","version":"1","api_version":1,"command":["/bin/sh"]}`)
	p.file("plugins/free/hookroom-plugin.json", `{"name":"free","version":"1","api_version":1,"command":["/bin/sh"]}`)
	src := `matrix:
  homeserver: http://localhost:8008
data_dir: ./state
plugins:
  - path: ./plugins/geo
    sandbox:
      read_only: [./models, /proc]
      read_write: [/srv/cache]
  - path: ./plugins/free
    sandbox: {enabled: false}
`
	cfg, err := parseWithEnv(p, src, map[string]string{"PATH": "/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	procs := newFakeProcs()
	l := plugins.Loader{StartProcess: procs.start, LookupEnv: fakeLookup(map[string]string{"PATH": "/usr/bin"})}
	load(t, &l, cfg)
	geo := procs.lastSpec("geo").Sandbox
	if geo == nil {
		t.Fatal("geo is not confined")
	}
	if !slices.Contains(geo.ReadOnly, p.root+"/models") || !slices.Contains(geo.ReadOnly, "/proc") ||
		!slices.Contains(geo.ReadWrite, "/srv/cache") || !slices.Contains(geo.ReadWrite, p.root+"/state/plugins/geo") {
		t.Errorf("geo's sandbox = %+v", geo)
	}
	if free := procs.lastSpec("free").Sandbox; free != nil {
		t.Errorf("free has sandbox %+v despite enabled: false", free)
	}
}
