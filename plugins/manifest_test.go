package plugins_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/plugins"
)

func TestParseManifest(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want *plugins.Manifest
		errs []string // each must appear in the error, in order
		not  string   // must not appear in the error
	}{
		{
			name: "process plugin",
			src: `{
  "name": "geo",
  "version": "1.2.0",
  "api_version": 1,
  "description": "where people are",
  "command": ["python3", "plugin.py"],
  "env": ["DAWARICH_API_KEY"]
}`,
			want: &plugins.Manifest{Name: "geo", Version: "1.2.0", APIVersion: 1, Description: "where people are",
				Command: []string{"python3", "plugin.py"}, Env: []string{"DAWARICH_API_KEY"}},
		},
		{
			name: "built-in plugin",
			src:  `{"name":"my-audit","version":"0.1","api_version":1,"builtin":"audit_log"}`,
			want: &plugins.Manifest{Name: "my-audit", Version: "0.1", APIVersion: 1, Builtin: "audit_log"},
		},
		{
			name: "unknown key",
			src:  "{\n\"name\":\"x\",\"version\":\"1\",\"api_version\":1,\"command\":[\"x\"],\n\"hooks_module\": \"hooks.py\"\n}",
			errs: []string{"line 3: hooks_module: unknown key (known: name, version, api_version, hookroom, command, builtin, env, description)"},
		},
		{
			name: "hookroom range",
			src:  `{"name":"x","version":"1","api_version":1,"hookroom":">=0.5, <2","command":["x"]}`,
			want: &plugins.Manifest{Name: "x", Version: "1", APIVersion: 1, Hookroom: ">=0.5, <2", Command: []string{"x"}},
		},
		{
			name: "bad hookroom range",
			src:  "{\"name\":\"x\",\"version\":\"1\",\"api_version\":1,\"command\":[\"x\"],\n\"hookroom\": \">=0.5, <two\"}",
			errs: []string{`line 2: hookroom: invalid version range ">=0.5, <two": invalid version "two"`},
		},
		{
			name: "hookroom range of the wrong type",
			src:  `{"name":"x","version":"1","api_version":1,"command":["x"],"hookroom":2}`,
			errs: []string{`hookroom: must be a string (a version range such as ">=0.5, <2")`},
			not:  "invalid version range",
		},
		{
			name: "repeated key",
			src:  "{\"name\":\"x\",\n\"name\":\"y\",\"version\":\"1\",\"api_version\":1,\"command\":[\"x\"]}",
			errs: []string{"line 2: name: repeated key (first on line 1)"},
		},
		{
			name: "api_version as a string",
			src:  "{\"name\":\"x\",\"version\":\"1\",\n\"api_version\":\"1\",\"command\":[\"x\"]}",
			errs: []string{"line 2: api_version: must be an integer"},
			not:  "not supported",
		},
		{
			name: "unsupported api_version",
			src:  "{\"name\":\"x\",\"version\":\"1\",\n\n\"api_version\":2,\"command\":[\"x\"]}",
			errs: []string{"line 3: api_version: 2 is not supported (this hookroom speaks 1)"},
		},
		{
			name: "missing fields",
			src:  `{"command":["x"]}`,
			errs: []string{"line 1: name: is required", "line 1: version: is required", "line 1: api_version: is required"},
		},
		{
			name: "bad name",
			src:  `{"name":"My Plugin","version":"1","api_version":1,"command":["x"]}`,
			errs: []string{`name: "My Plugin" must match ^[a-z0-9_-]+$`},
		},
		{
			name: "both command and builtin",
			src:  `{"name":"x","version":"1","api_version":1,"command":["x"],"builtin":"audit_log"}`,
			errs: []string{"builtin: set either command or builtin, not both"},
		},
		{
			name: "neither command nor builtin",
			src:  `{"name":"x","version":"1","api_version":1}`,
			errs: []string{"line 1: set command (a process to run) or builtin (a compiled-in plugin)"},
		},
		{
			name: "empty command",
			src:  `{"name":"x","version":"1","api_version":1,"command":[]}`,
			errs: []string{"command: must name the program to run"},
		},
		{
			name: "bad env names",
			src:  `{"name":"x","version":"1","api_version":1,"command":["x"],"env":["OK","NOT-OK","PATH","OK"]}`,
			errs: []string{`env: "NOT-OK" is not a valid environment variable name`, "env: PATH is always set by the host", "env: OK is listed twice"},
		},
		{
			name: "env on a built-in",
			src:  `{"name":"x","version":"1","api_version":1,"builtin":"audit_log","env":["A"]}`,
			errs: []string{"env: applies to process plugins only"},
		},
		{
			name: "null value",
			src:  `{"name":null,"version":"1","api_version":1,"command":["x"]}`,
			errs: []string{"name: must be a string, not null"},
		},
		{
			name: "trailing data",
			src:  "{\"name\":\"x\",\"version\":\"1\",\"api_version\":1,\"command\":[\"x\"]}\n{}",
			errs: []string{"line 2: unexpected data after the manifest object"},
		},
		{
			name: "not an object",
			src:  `["name"]`,
			errs: []string{"line 1: a manifest is a JSON object, not a list"},
		},
		{
			name: "syntax error",
			src:  "{\"name\":\"x\",\n\"version\" \"1\"}",
			errs: []string{"line 2: invalid JSON"},
		},
		{
			name: "truncated",
			src:  `{"name":"x",`,
			errs: []string{"unexpected end of JSON"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := plugins.ParseManifest([]byte(tt.src))
			if tt.errs == nil {
				if err != nil {
					t.Fatalf("ParseManifest: %v", err)
				}
				if !reflect.DeepEqual(m, tt.want) {
					t.Fatalf("got %+v, want %+v", m, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseManifest succeeded with %+v, want errors %q", m, tt.errs)
			}
			msg := err.Error()
			rest := msg
			for _, want := range tt.errs {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("error %q does not contain %q (in order)", msg, want)
				}
				rest = rest[i+len(want):]
			}
			if tt.not != "" && strings.Contains(msg, tt.not) {
				t.Fatalf("error %q contains %q", msg, tt.not)
			}
			var me *plugins.ManifestError
			if !errors.As(err, &me) {
				t.Fatalf("error %T is not a *ManifestError", err)
			}
		})
	}
}

func TestReadManifest(t *testing.T) {
	dir := t.TempDir()
	_, err := plugins.ReadManifest(dir)
	if !errors.Is(err, plugins.ErrNoManifest) {
		t.Fatalf("ReadManifest of an empty directory: %v, want ErrNoManifest", err)
	}
	file := filepath.Join(dir, plugins.ManifestFile)
	if !strings.Contains(err.Error(), file) {
		t.Fatalf("error %q does not name %s", err, file)
	}
	writeFile(t, file, "{\"name\":\"x\",\"version\":\"1\",\n\"api_version\":3,\"command\":[\"x\"]}")
	_, err = plugins.ReadManifest(dir)
	if want := file + ":2: api_version: 3 is not supported (this hookroom speaks 1)"; err == nil || err.Error() != want {
		t.Fatalf("ReadManifest: %v, want %s", err, want)
	}
}

func TestResolveCommand(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "plugin.py"), "print()")
	writeFile(t, filepath.Join(dir, "bin", "run"), "#!/bin/sh")
	writeFile(t, filepath.Join(dir, "run.sh"), "#!/bin/sh")
	tests := []struct {
		name    string
		command []string
		want    []string
		err     string
	}{
		{"program from PATH, script in dir", []string{"python3", "plugin.py", "-v"}, []string{"python3", filepath.Join(dir, "plugin.py"), "-v"}, ""},
		{"relative program", []string{"./bin/run", "--flag", "missing.txt"}, []string{filepath.Join(dir, "bin/run"), "--flag", "missing.txt"}, ""},
		{"bare program in dir", []string{"run.sh"}, []string{filepath.Join(dir, "run.sh")}, ""},
		{"absolute program", []string{"/bin/sh", "-c", "true"}, []string{"/bin/sh", "-c", "true"}, ""},
		{"argument outside dir stays", []string{"sh", "../plugin.py"}, []string{"sh", "../plugin.py"}, ""},
		{"missing relative program", []string{"./nope"}, nil, `program "./nope" does not exist in the plugin directory`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := plugins.ResolveCommand(dir, tt.command)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err = %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
