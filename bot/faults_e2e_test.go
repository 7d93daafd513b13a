package bot

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/agents/llmtest"
)

// Process plugins that crash on every call, hang, print garbage, flood
// stderr or answer late cost a turn at most their hook deadline (3 s, so
// that the well-behaved calls make it on a loaded machine): every
// turn is answered, the server stays up, and the log names the plugin.
func TestFaultyProcessPluginsDoNotStopTurns(t *testing.T) {
	faults := []string{"crash", "hang", "garbage", "flood", "late"}
	e := &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	var plugins strings.Builder
	plugins.WriteString("plugins:\n")
	for _, f := range faults {
		dir := filepath.Join(e.dir, "plugins", f)
		copyDir(t, "testdata/plugins/faulty", dir)
		copyDir(t, "../plugins/sdk/python", dir)
		// Each copy gets its own plugin name through its manifest.
		writeFile(t, filepath.Join(dir, "hookroom-plugin.json"), fmt.Sprintf(
			`{"name": "faulty-%s", "version": "1.0.0", "api_version": 1, "command": ["python3", "plugin.py"], "env": []}`, f))
		fmt.Fprintf(&plugins, "  - path: ./plugins/%s\n    settings:\n      fault: %s\n", f, f)
	}
	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID("helper"))
	e.cfg = e.body(plugins.String(), "")
	e.bot = e.run(e.config(e.cfg), Options{ConfigOptions: e.configOptions()}, e.testLog(zerolog.InfoLevel))
	e.waitLog("account caught up", 2)

	for turn := 1; turn <= 3; turn++ {
		start := time.Now()
		prompt := e.askAndWait(fmt.Sprintf("question %d", turn))
		// All enrich hooks run concurrently: the turn waits for the
		// slowest deadline (3 s + grace), not for the faults (the hang
		// lasts 30 s).
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("turn %d reached the model after %v", turn, took)
		}
		// Garbage on stdout and a stderr flood do not fail the hook;
		// crashing, hanging and late hooks contribute nothing.
		for _, f := range faults {
			want := f == "garbage" || f == "flood"
			if got := strings.Contains(prompt, `key="faulty_`+f+`"`); got != want {
				t.Errorf("turn %d: item of the %s plugin present=%v, want %v:\n%s", turn, f, got, want, prompt)
			}
		}
	}
	logs := e.logs.String()
	for _, f := range faults {
		if !strings.Contains(logs, "faulty-"+f) {
			t.Errorf("the log never names plugin faulty-%s", f)
		}
	}
	if strings.Count(logs, "flooding stderr line") > 1000 {
		t.Errorf("the stderr flood reached the log unthrottled (%d lines)", strings.Count(logs, "flooding stderr line"))
	}
}
