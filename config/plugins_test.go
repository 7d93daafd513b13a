package config_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/hookroom/hookroom/config"
)

func TestPluginEntryForms(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		yaml string
		want []config.PluginEntry
	}{{
		name: "path string",
		yaml: "plugins:\n  - ./plugins/audit\n",
		want: []config.PluginEntry{{Path: "./plugins/audit", AbsPath: filepath.Join(dir, "plugins/audit")}},
	}, {
		name: "absolute path string",
		yaml: "plugins:\n  - /opt/hookroom/plugins/audit\n",
		want: []config.PluginEntry{{Path: "/opt/hookroom/plugins/audit", AbsPath: "/opt/hookroom/plugins/audit"}},
	}, {
		name: "path mapping with settings",
		yaml: `plugins:
  - path: plugins/weather
    enabled: false
    settings:
      units: metric
      retries: 3
      ratio: 0.5
      verbose: true
      none: null
      places: [home, {name: work, lat: 52.5}]
`,
		want: []config.PluginEntry{{
			Path:    "plugins/weather",
			AbsPath: filepath.Join(dir, "plugins/weather"),
			Enabled: ptr(false),
			Settings: map[string]any{
				"units": "metric", "retries": 3, "ratio": 0.5, "verbose": true, "none": nil,
				"places": []any{"home", map[string]any{"name": "work", "lat": 52.5}},
			},
		}},
	}, {
		name: "builtin mapping",
		yaml: "plugins:\n  - builtin: tool_guard\n    settings: {blocked: [shell]}\n",
		want: []config.PluginEntry{{
			Builtin:  "tool_guard",
			Settings: map[string]any{"blocked": []any{"shell"}},
		}},
	}, {
		name: "all three forms mixed, order kept",
		yaml: `plugins:
  - ./a
  - path: ./b
  - builtin: c
`,
		want: []config.PluginEntry{
			{Path: "./a", AbsPath: filepath.Join(dir, "a")},
			{Path: "./b", AbsPath: filepath.Join(dir, "b")},
			{Builtin: "c"},
		},
	}, {
		name: "empty settings and hooks are normalised to nil",
		yaml: "plugins:\n  - path: ./b\n    settings: {}\n    hooks: {}\n",
		want: []config.PluginEntry{{Path: "./b", AbsPath: filepath.Join(dir, "b")}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := config.Parse([]byte(minimal+tt.yaml), filepath.Join(dir, "config.yaml"), fakeEnv(nil))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Plugins, tt.want) {
				t.Errorf("plugins:\n got %#v\nwant %#v", c.Plugins, tt.want)
			}
		})
	}
}

func TestPluginEntryIdentityAndEnabled(t *testing.T) {
	c := mustParse(t, minimal+"plugins:\n  - ./a\n  - builtin: b\n    enabled: false\n  - path: ./c\n    enabled: true\n", nil)
	wantIDs := []string{filepath.Join(c.Dir, "a"), "builtin:b", filepath.Join(c.Dir, "c")}
	wantEnabled := []bool{true, false, true}
	for i, p := range c.Plugins {
		if got := p.Identity(); got != wantIDs[i] {
			t.Errorf("plugins[%d].Identity() = %q, want %q", i, got, wantIDs[i])
		}
		if got := p.IsEnabled(); got != wantEnabled[i] {
			t.Errorf("plugins[%d].IsEnabled() = %v, want %v", i, got, wantEnabled[i])
		}
	}
}

func TestHookOverrides(t *testing.T) {
	closed := config.FailClosed
	open := config.FailOpen
	tests := []struct {
		name string
		yaml string
		want config.HookOverride
	}{
		{"nothing overridden", "{}", config.HookOverride{}},
		{"null means nothing overridden", "null", config.HookOverride{}},
		{"enabled false", "{enabled: false}", config.HookOverride{Enabled: ptr(false)}},
		{"priority", "{priority: 10}", config.HookOverride{Priority: ptr(10)}},
		{"priority zero is an override", "{priority: 0}", config.HookOverride{Priority: ptr(0)}},
		{"negative priority is allowed", "{priority: -20}", config.HookOverride{Priority: ptr(-20)}},
		{"timeout", "{timeout_ms: 250}", config.HookOverride{TimeoutMS: ptr(250)}},
		{"failure policy closed", "{failure_policy: closed}", config.HookOverride{FailurePolicy: &closed}},
		{"failure policy open", "{failure_policy: open}", config.HookOverride{FailurePolicy: &open}},
		{"all fields", "{enabled: true, priority: 5, timeout_ms: 1000, failure_policy: closed}",
			config.HookOverride{Enabled: ptr(true), Priority: ptr(5), TimeoutMS: ptr(1000), FailurePolicy: &closed}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := minimal + "plugins:\n  - path: ./p\n    hooks:\n      my_hook: " + tt.yaml + "\n"
			c := mustParse(t, src, nil)
			got, ok := c.Plugins[0].Hooks["my_hook"]
			if !ok {
				t.Fatalf("hook override missing: %#v", c.Plugins[0].Hooks)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("override = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHookOverrideTimeout(t *testing.T) {
	if _, ok := (config.HookOverride{}).Timeout(); ok {
		t.Error("Timeout() reported an override on an empty HookOverride")
	}
	if d, ok := (config.HookOverride{TimeoutMS: ptr(1500)}).Timeout(); !ok || d != 1500*time.Millisecond {
		t.Errorf("Timeout() = %v, %v; want 1.5s, true", d, ok)
	}
}

// PluginEntry also decodes both forms when used with yaml.v3 directly.
func TestPluginEntryWithYAMLv3(t *testing.T) {
	var entries []config.PluginEntry
	src := "- ./a\n- builtin: b\n  hooks: {h: {priority: 1}}\n"
	if err := yaml.Unmarshal([]byte(src), &entries); err != nil {
		t.Fatal(err)
	}
	want := []config.PluginEntry{{Path: "./a"}, {Builtin: "b", Hooks: map[string]config.HookOverride{"h": {Priority: ptr(1)}}}}
	if !reflect.DeepEqual(entries, want) {
		t.Errorf("got %#v, want %#v", entries, want)
	}

	err := yaml.Unmarshal([]byte("- builtin: b\n  setings: {}\n"), &entries)
	if err == nil || err.Error() != `line 2: setings: unknown key (did you mean "settings"?)` {
		t.Errorf("unknown key error = %v", err)
	}

	// And marshals back to the short form when only the path is set.
	out, err := yaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if got, wantOut := string(out), "- ./a\n- builtin: b\n  hooks:\n    h:\n        priority: 1\n"; got != wantOut {
		t.Errorf("marshal:\n%s\nwant:\n%s", got, wantOut)
	}
}
