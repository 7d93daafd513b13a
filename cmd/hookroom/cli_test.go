package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/bot"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/buildinfo"
)

// exampleConfig copies config.example.yaml into a temporary directory (so
// its data directory lands there) and sets the variables it needs.
func exampleConfig(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MATRIX_REGISTRATION_SHARED_SECRET", "not-a-real-secret")
	return path
}

func TestCheckExampleConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--config", exampleConfig(t)}, &out, &errOut); code != 0 {
		t.Fatalf("check exited %d:\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "is valid") {
		t.Errorf("check printed %q", out.String())
	}
	if strings.Contains(errOut.String(), "not-a-real-secret") {
		t.Error("check printed the shared secret")
	}
}

func TestHooksCommandListsBuiltins(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"hooks", "--config", exampleConfig(t), "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("hooks exited %d:\n%s", code, errOut.String())
	}
	var infos []hooks.HookInfo
	if err := json.Unmarshal(out.Bytes(), &infos); err != nil {
		t.Fatalf("hooks --json printed no JSON: %v\n%s", err, out.String())
	}
	plugins := map[string]bool{}
	for _, h := range infos {
		plugins[h.Plugin] = true
	}
	for _, p := range []string{"audit_log", "context_info", "tool_guard"} {
		if !plugins[p] {
			t.Errorf("hooks lists no hook of %s: %+v", p, infos)
		}
	}
}

func TestBrokenConfigNamesFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("matrix:\n  homeserver: http://localhost:8008\n  server_name: localhost\n  colour: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--config", path}, &out, &errOut); code == 0 {
		t.Fatal("check accepted an unknown key")
	}
	if !strings.Contains(errOut.String(), "config.yaml:4: matrix.colour") {
		t.Errorf("error does not name file:line and key: %s", errOut.String())
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestSeveralConfigErrorsAreSeveralLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	body := "matrix:\n  homeserver: http://localhost:8008\n  server_name: localhost\n  colour: blue\nlog:\n  shade: dark\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--config", path}, &out, &errOut); code == 0 {
		t.Fatal("check accepted unknown keys")
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	for _, want := range []string{"config.yaml:4: matrix.colour", "config.yaml:6: log.shade"} {
		found := false
		for _, l := range lines {
			if strings.Contains(l, want) {
				found = true
				if !strings.HasPrefix(l, "hookroom: ") || strings.Count(l, "config.yaml:") != 1 {
					t.Errorf("line %q is not one problem behind hookroom:", l)
				}
			}
		}
		if !found {
			t.Errorf("no line names %s:\n%s", want, errOut.String())
		}
	}
}

// hookroom version names the build: the version, the Go toolchain and the
// platform; a release's version comes from the -X flag on
// internal/buildinfo.Version.
func TestVersion(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("version exited %d: %s", code, errOut.String())
	}
	line := strings.TrimSpace(out.String())
	if line != buildinfo.Read().String() || !strings.HasPrefix(line, "hookroom ") || !strings.Contains(line, " "+runtime.Version()) {
		t.Errorf("version printed %q, want hookroom, the version and %s (%q)", line, runtime.Version(), buildinfo.Read().String())
	}
	old := buildinfo.Version
	t.Cleanup(func() { buildinfo.Version = old })
	buildinfo.Version = "v1.2.3"
	out.Reset()
	run([]string{"version"}, &out, &errOut)
	if !strings.HasPrefix(out.String(), "hookroom 1.2.3 ") {
		t.Errorf("with buildinfo.Version set, version printed %q", out.String())
	}
}

func TestToolsCommandListsEffectiveTools(t *testing.T) {
	path := exampleConfig(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"tools", "--config", path, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("tools exited %d:\n%s", code, errOut.String())
	}
	var list []bot.AgentTools
	if err := json.Unmarshal(out.Bytes(), &list); err != nil {
		t.Fatalf("tools --json printed no JSON: %v\n%s", err, out.String())
	}
	got := map[hooks.AgentName][]string{}
	for _, a := range list {
		got[a.Agent] = []string{}
		for _, tool := range a.Tools {
			if tool.Description == "" {
				t.Errorf("%s/%s has no description", tool.Source, tool.Name)
			}
			got[a.Agent] = append(got[a.Agent], tool.Source+"/"+tool.Name)
		}
	}
	want := map[hooks.AgentName][]string{"assistant": {"builtin/current_time", "builtin/room_info"}, "coder": {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tools %v, want %v", got, want)
	}

	out.Reset()
	if code := run([]string{"tools", "--config", path}, &out, &errOut); code != 0 {
		t.Fatalf("tools exited %d:\n%s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "assistant  current_time  builtin  Get the current date and time.") {
		t.Errorf("tools table:\n%s", out.String())
	}
}

func TestCheckRejectsUnknownToolWithFileLine(t *testing.T) {
	data, err := os.ReadFile(exampleConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(data), "tools: [current_time, room_info]", "tools: [current_time, teleport]", 1)
	line := 1 + strings.Count(body[:strings.Index(body, "teleport")], "\n")
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--config", path}, &out, &errOut); code == 0 {
		t.Fatal("check accepted an unknown tool")
	}
	want := fmt.Sprintf(`config.yaml:%d: agents.assistant.tools[1]: unknown tool "teleport"`, line)
	if !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
	}
}

func TestCheckReadsAvatarFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	body := "data_dir: ./data\nmatrix:\n  homeserver: http://localhost:8008\n  server_name: localhost\n  router:\n    avatar: router.png\n" +
		"models:\n  default: {provider: echo}\nagents:\n  helper:\n    avatar: notes.txt\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("just text"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"check", "--config", path}, &out, &errOut); code == 0 {
		t.Fatal("check accepted a missing avatar and a text file as avatar")
	}
	for _, want := range []string{"config.yaml:6: matrix.router.avatar: failed to read the avatar", "config.yaml:11: agents.helper.avatar: notes.txt is not an image"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
}

// printTools prints one row per tool, and JSON that round-trips.
func TestPrintTools(t *testing.T) {
	list := []bot.AgentTools{
		{Agent: "a", Tools: []bot.ToolInfo{{Name: "current_time", Source: "builtin", Description: "Get the time."}, {Name: "search", Source: "box", Description: "Search."}}},
		{Agent: "b"},
	}
	var out strings.Builder
	printTools(&out, list, false)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "AGENT") ||
		!strings.Contains(lines[2], "search") || !strings.Contains(lines[2], "box") || !strings.Contains(lines[3], "(none)") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	printTools(&out, list, true)
	var back []bot.AgentTools
	if err := json.Unmarshal([]byte(out.String()), &back); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if fmt.Sprint(back[0].Tools) != fmt.Sprint(list[0].Tools) {
		t.Errorf("JSON round trip: %+v", back)
	}
}
