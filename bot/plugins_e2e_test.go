package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/admin"
	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/metrics/metricstest"
)

// copyDir copies the files of src (not recursive) into dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A Python process plugin and a Go process plugin, loaded from config.yaml,
// each enrich, transform, gate and observe a real turn.
func TestProcessPluginsOnRealTurns(t *testing.T) {
	e := &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	pluginDir := filepath.Join(e.dir, "plugins")
	copyDir(t, "testdata/plugins/pyall", filepath.Join(pluginDir, "pyall"))
	copyDir(t, "../plugins/sdk/python", filepath.Join(pluginDir, "pyall"))
	copyDir(t, "testdata/plugins/goall", filepath.Join(pluginDir, "goall"))
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "goall", "goall"), "./testdata/plugins/goall")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the Go plugin: %v\n%s", err, out)
	}

	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID("helper"))
	e.cfg = e.body("plugins:\n  - ./plugins/pyall\n  - ./plugins/goall\n", "    tools: [room_info, current_time]\n") + httpYAML
	cfg := e.config(e.cfg)
	e.bot = e.run(cfg, Options{ConfigOptions: e.configOptions()}, e.testLog(zerolog.DebugLevel))
	e.waitLog("account caught up", 2) // router and helper: their first sync is done

	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("c1", "room_info", `{}`)),
		llmtest.Calls(llmtest.ToolCall("c2", "current_time", `{}`)),
		llmtest.Text("done"),
	)
	e.say("what room is this, and what time?", "")

	want := "done [py] [go]"
	seen := func(plugin string) string {
		data, _ := os.ReadFile(filepath.Join(cfg.DataDir, "plugins", plugin, "seen.txt"))
		return string(data)
	}
	testkit.Until(t, 60*time.Second, func() (bool, string) {
		py, gosee := seen("pyall"), seen("goall")
		return strings.Contains(py, want) && strings.Contains(gosee, want),
			fmt.Sprintf("waiting until the plugins observe the reply %q: python %q, go %q", want, py, gosee)
	})
	reqs := e.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls, want 3", len(reqs))
	}
	first := reqs[0].Body.Messages
	prompt := string(first[len(first)-1].Content)
	if !strings.Contains(prompt, `key="py_item"`) || !strings.Contains(prompt, `key="go_item"`) {
		t.Errorf("the user turn lacks the plugins' items:\n%s", prompt)
	}
	toolResult := func(r llmtest.Request) string {
		for _, m := range r.Body.Messages {
			if m.Role == "tool" {
				return string(m.Content)
			}
		}
		return ""
	}
	if got, want := toolResult(reqs[1]), agents.DeclinedResult("room_info", "python says no"); got != want {
		t.Errorf("after the first call the model saw %q, want %q", got, want)
	}
	lastTool := lastToolMessage(e.turnEnv, 2)
	if want := agents.DeclinedResult("current_time", "go says no"); lastTool != want {
		t.Errorf("after the second call the model saw %q, want %q", lastTool, want)
	}

	// The admin API and the metrics see both processes running.
	base := "http://" + e.bot.bot.HTTPAddr()
	code, body, _ := call(t, "GET", base+"/api/v1/plugins", testAdminToken)
	var listed []admin.Plugin
	if err := json.Unmarshal(body, &listed); code != 200 || err != nil {
		t.Fatalf("/api/v1/plugins = %d %s (%v)", code, body, err)
	}
	_, body, _ = call(t, "GET", base+"/metrics", "")
	fams, err := metricstest.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pyall", "goall"} {
		i := slices.IndexFunc(listed, func(p admin.Plugin) bool { return p.Name == name })
		if i < 0 || listed[i].Kind != "process" || listed[i].State != "running" || listed[i].PID == 0 || listed[i].Restarts != 0 || len(listed[i].Hooks) == 0 {
			t.Errorf("plugin %s listed as %+v, want a running process", name, listed)
		}
		if v, ok, _ := fams.Value("hookroom_plugin_process_state", metricstest.Labels{"plugin": name, "state": "running"}); !ok || v != 1 {
			t.Errorf("hookroom_plugin_process_state{plugin=%s,state=running} = %v, %v", name, v, ok)
		}
		if v, ok, _ := fams.Value("hookroom_plugin_process_restarts_total", metricstest.Labels{"plugin": name}); !ok || v != 0 {
			t.Errorf("hookroom_plugin_process_restarts_total{plugin=%s} = %v, %v", name, v, ok)
		}
		// Observers (message:after_response) may still be running when the
		// turn's end is seen: their runs are counted when they return.
		testkit.Until(t, 10*time.Second, func() (bool, string) {
			_, body, _ := call(t, "GET", base+"/metrics", "")
			fams, err := metricstest.Parse(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			got := fams.Sum("hookroom_hook_runs_total", metricstest.Labels{"plugin": name})
			return got >= 4, fmt.Sprintf("plugin %s: %v hook runs counted, want its hooks' runs of the turn", name, got)
		})
	}
}
