package plugins_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
)

// callLog records which hooks ran, in order.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func (l *callLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.calls
	l.calls = nil
	return out
}

// testCalls records the hooks of the test built-in and the fake processes.
var testCalls = &callLog{}

// hookSpec declares one hook: "event name [priority]".
func parseHookSpecs(plugin string, lines []string) ([]hooks.Hook, []plugins.Tool, error) {
	var hs []hooks.Hook
	var tools []plugins.Tool
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "tool" {
			name := f[1]
			tools = append(tools, plugins.Tool{
				Name: name, Description: "echoes and emits test:echoed",
				Func: func(ctx context.Context, call plugins.ToolCall) (string, error) {
					if err := call.EmitEvent(ctx, "test:echoed", map[string]string{"args": string(call.Arguments)}); err != nil {
						return "", err
					}
					return plugin + ":" + string(call.Arguments), nil
				},
			})
			continue
		}
		if len(f) < 2 {
			return nil, nil, fmt.Errorf("bad hook spec %q", line)
		}
		var opts []hooks.Option
		if len(f) > 2 {
			p, err := strconv.Atoi(f[2])
			if err != nil {
				return nil, nil, err
			}
			opts = append(opts, hooks.Priority(p))
		}
		tag := plugin + "/" + f[1]
		hs = append(hs, hooks.HandleAny(f[0], f[1], func(_ context.Context, c hooks.Context) error {
			testCalls.add(tag)
			return nil
		}, opts...))
	}
	return hs, tools, nil
}

type testInstance struct {
	name      string
	hooks     []hooks.Hook
	tools     []plugins.Tool
	closed    atomic.Int32
	unhealthy atomic.Bool
}

func (i *testInstance) Hooks() []hooks.Hook   { return i.hooks }
func (i *testInstance) Tools() []plugins.Tool { return i.tools }
func (i *testInstance) Healthy() bool         { return !i.unhealthy.Load() }
func (i *testInstance) Close() error          { i.closed.Add(1); return nil }
func (i *testInstance) isClosed() bool        { return i.closed.Load() > 0 }

var (
	_ plugins.Instance       = (*testInstance)(nil)
	_ plugins.ToolProvider   = (*testInstance)(nil)
	_ plugins.HealthReporter = (*testInstance)(nil)
)

// builtinInstances records every instance of the test built-in.
var builtinInstances struct {
	sync.Mutex
	list []*testInstance
}

func init() {
	// test_builtin declares the hooks listed in its "hooks" setting and
	// rejects a "bad" setting with a *SettingsError.
	plugins.RegisterBuiltin(plugins.Builtin{
		Name:        "test_builtin",
		Description: "a built-in for tests",
		New: func(_ context.Context, env plugins.Env) (plugins.Instance, error) {
			var s struct {
				Hooks []string `json:"hooks"`
				Bad   []string `json:"bad"`
			}
			if err := plugins.DecodeSettings(env.Settings, &s); err != nil {
				return nil, err
			}
			if len(s.Bad) > 0 {
				return nil, plugins.SettingsErrorf(plugins.JoinIndex("bad", len(s.Bad)-1), "is bad")
			}
			hs, tools, err := parseHookSpecs(env.Name, s.Hooks)
			if err != nil {
				return nil, err
			}
			inst := &testInstance{name: env.Name, hooks: hs, tools: tools}
			builtinInstances.Lock()
			builtinInstances.list = append(builtinInstances.list, inst)
			builtinInstances.Unlock()
			return inst, nil
		},
	})
}

// fakeProcs stands in for the process supervisor: a "process" declares the
// hooks listed in hooks.txt of its plugin directory.
type fakeProcs struct {
	mu      sync.Mutex
	specs   []plugins.ProcessSpec
	running map[string]*testInstance
	all     []*testInstance
	fail    map[string]error
}

func newFakeProcs() *fakeProcs {
	return &fakeProcs{running: map[string]*testInstance{}, fail: map[string]error{}}
}

func (f *fakeProcs) start(_ context.Context, spec plugins.ProcessSpec) (plugins.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.specs = append(f.specs, spec)
	if err := f.fail[spec.Name]; err != nil {
		return nil, err
	}
	if st, err := os.Stat(spec.StateDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("state directory %s was not created", spec.StateDir)
	}
	lines, err := readLines(filepath.Join(spec.Dir, "hooks.txt"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	hs, tools, err := parseHookSpecs(spec.Name, lines)
	if err != nil {
		return nil, err
	}
	inst := &testInstance{name: spec.Name, hooks: hs, tools: tools}
	f.running[spec.Name] = inst
	f.all = append(f.all, inst)
	return inst, nil
}

func (f *fakeProcs) starts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}

func (f *fakeProcs) lastSpec(name string) plugins.ProcessSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.specs) - 1; i >= 0; i-- {
		if f.specs[i].Name == name {
			return f.specs[i]
		}
	}
	return plugins.ProcessSpec{}
}

func (f *fakeProcs) instance(name string) *testInstance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[name]
}

func readLines(path string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out, sc.Err()
}

// env is a fake server environment.
func fakeLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// project is a temporary directory with config.yaml and plugin directories.
type project struct {
	t    *testing.T
	root string
}

func newProject(t *testing.T) *project { return &project{t: t, root: t.TempDir()} }

// procPlugin writes a process plugin directory rel with a manifest named
// name and hooks.txt lines.
func (p *project) procPlugin(rel, name string, hookLines ...string) {
	p.file(filepath.Join(rel, plugins.ManifestFile), fmt.Sprintf(`{"name":%q,"version":"1.0","api_version":1,"command":["/bin/sh","plugin.sh"]}`, name))
	p.file(filepath.Join(rel, "plugin.sh"), "#!/bin/sh\n")
	p.file(filepath.Join(rel, "hooks.txt"), strings.Join(hookLines, "\n"))
}

func (p *project) file(rel, content string) {
	writeFile(p.t, filepath.Join(p.root, rel), content)
}

// config parses src (prefixed with a minimal valid header whose lines are
// counted: the first line of src is line 3).
func (p *project) config(src string) *config.Config {
	p.t.Helper()
	c, err := config.Parse([]byte(header+src), filepath.Join(p.root, "config.yaml"), config.WithLookupEnv(fakeLookup(nil)))
	if err != nil {
		p.t.Fatalf("config.Parse: %v", err)
	}
	return c
}

const header = "matrix:\n  homeserver: http://localhost:8008\n"

// errLines returns the problems of err with the project root replaced by ROOT.
func (p *project) errLines(err error) []string {
	p.t.Helper()
	var list config.ErrorList
	if !errors.As(err, &list) {
		p.t.Fatalf("error %T is not a config.ErrorList: %v", err, err)
	}
	var out []string
	for _, e := range list {
		out = append(out, strings.ReplaceAll(e.Error(), p.root, "ROOT"))
	}
	return out
}

func (p *project) strip(lines []string) []string {
	out := slices.Clone(lines)
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], p.root, "ROOT")
	}
	return out
}

// parseWithEnv parses src (a whole config.yaml) with ${VAR} values from env.
func parseWithEnv(p *project, src string, env map[string]string) (*config.Config, error) {
	return config.Parse([]byte(src), filepath.Join(p.root, "config.yaml"), config.WithLookupEnv(fakeLookup(env)))
}

func hooksOptions() hooks.Options { return hooks.Options{} }
