package bot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	_ "github.com/hookroom/hookroom/plugins/builtin/all"
)

type logBuffer = testkit.Buffer

// reloadEnv runs hookroom with plugins from config.yaml (no Registry
// override) and file watching on, against the scripted model.
type reloadEnv struct {
	*turnEnv
	logs   logBuffer
	secret string
}

func newReloadEnv(t *testing.T, plugins string) *reloadEnv {
	e := &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID("helper"))
	e.cfg = e.body(plugins, "")
	e.bot = e.run(e.config(e.cfg), Options{Watch: true, ConfigOptions: e.configOptions(),
		PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond}, e.testLog(zerolog.DebugLevel))
	e.waitLog("account caught up", 2) // router and helper: their first sync is done
	return e
}

// testLog is a logger at level that writes to the test's log and to e.logs.
func (e *reloadEnv) testLog(level zerolog.Level) zerolog.Logger {
	return zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(e.t), &e.logs)).Level(level)
}

// body is the config body with the given plugins section and extra agents
// (or settings of agent helper, four spaces in).
func (e *reloadEnv) body(plugins, extraAgents string) string {
	return agentSetup{LLM: e.llm.URL, Model: "agent-model", Room: e.room, Admins: []id.UserID{e.person.UserID},
		Extra: extraAgents + plugins}.body(e.testEnv)
}

// rewrite replaces config.yaml the way editors do: write a temporary file,
// rename it over the old one.
func (e *reloadEnv) rewrite(body string) {
	e.t.Helper()
	cur, err := os.ReadFile(e.yaml)
	if err != nil {
		e.t.Fatal(err)
	}
	head := string(cur)[:strings.Index(string(cur), "models:")]
	tmp := filepath.Join(filepath.Dir(e.yaml), ".config.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(head+body), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, e.yaml); err != nil {
		e.t.Fatal(err)
	}
}

func (e *reloadEnv) waitLog(substr string, n int) {
	e.t.Helper()
	testkit.Until(e.t, 60*time.Second, func() (bool, string) {
		logs := e.logs.String()
		return strings.Count(logs, substr) >= n, fmt.Sprintf("waiting until the log shows %q %d times:\n%s", substr, n, logs)
	})
}

// askAndWait sends a message and waits for the model to be asked; it
// returns the user turn the model received.
func (e *reloadEnv) askAndWait(text string) string {
	e.t.Helper()
	before := e.llm.Count()
	e.llm.Script(llmtest.Text("ok"))
	e.say(text, "")
	testkit.Eventually(e.t, 30*time.Second, "the model is asked", func() bool { return e.llm.Count() > before })
	r := e.llm.LastRequest(e.t)
	return string(r.Body.Messages[len(r.Body.Messages)-1].Content)
}

func TestReloadEnablesPluginForNextTurn(t *testing.T) {
	e := newReloadEnv(t, "")
	if got := e.askAndWait("first"); strings.Contains(got, "hookroom_message_context") {
		t.Fatalf("context block before the plugin was enabled:\n%s", got)
	}
	e.rewrite(e.body("plugins:\n  - builtin: context_info\n    settings:\n      timezone: Europe/Paris\n", ""))
	e.waitLog("configuration reloaded", 1)
	got := e.askAndWait("second")
	if !strings.Contains(got, "hookroom_message_context") || !strings.Contains(got, "Europe/Paris") {
		t.Errorf("the turn after enabling context_info lacks its items:\n%s", got)
	}
	if !strings.Contains(e.logs.String(), "added context_info") {
		t.Errorf("reload log does not say the plugin was added")
	}
}

func TestBrokenEditKeepsRunningConfig(t *testing.T) {
	e := newReloadEnv(t, "plugins:\n  - builtin: context_info\n")
	for i, tc := range []struct {
		name, body, want string
	}{
		{"yaml syntax", e.body("plugins:\n  - builtin: context_info\n   bad: [\n", ""), "config.yaml:"},
		{"unknown key", e.body("plugins:\n  - builtin: context_info\n    colour: blue\n", ""), "plugins[0].colour: unknown key"},
		{"unknown builtin", e.body("plugins:\n  - builtin: no_such_plugin\n", ""), "no_such_plugin"},
		{"duplicate plugin", e.body("plugins:\n  - builtin: context_info\n  - builtin: context_info\n", ""), "listed twice"},
		{"unknown tool", e.body("plugins:\n  - builtin: context_info\n", "    tools: [current_time, teleport]\n"), `agents.helper.tools[1]: unknown tool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.rewrite(tc.body)
			e.waitLog("configuration not reloaded", i+1)
			logs := e.logs.String()
			at := strings.LastIndex(logs, "configuration not reloaded")
			last := logs[strings.LastIndex(logs[:at], "\n")+1:]
			if !strings.Contains(last, tc.want) || !strings.Contains(last, "config.yaml:") {
				t.Errorf("error does not name %q with file:line:\n%s", tc.want, last)
			}
			if got := e.askAndWait("still there?"); !strings.Contains(got, "hookroom_message_context") {
				t.Errorf("the running configuration (with context_info) is no longer in service:\n%s", got)
			}
		})
	}
}

func TestReloadAddsAndRemovesAgents(t *testing.T) {
	e := newReloadEnv(t, "")
	second := fmt.Sprintf("  second:\n    username: %s\n    rooms: [main]\n", e.localpart("second"))
	e.rewrite(e.body("", second))
	e.waitLog("configuration reloaded", 1)
	w := e.bot.bot.w()
	acct, ok := w.agents["second"]
	if !ok {
		t.Fatal("the new agent has no account")
	}
	members, err := e.bot.bot.router.JoinedMembers(context.Background(), e.room)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := members[acct.UserID()]; !ok {
		t.Errorf("the new agent did not join the room")
	}
	// It answers when mentioned.
	e.llm.Script(llmtest.Text("second here"))
	e.say("@"+e.localpart("second")+" hi", "")
	testkit.Eventually(t, 30*time.Second, "the new agent answers", func() bool { return strings.Contains(e.logs.String(), `"agent":"second"`) })
	e.rewrite(e.body("", ""))
	e.waitLog("configuration reloaded", 2)
	if _, ok := e.bot.bot.w().agents["second"]; ok {
		t.Error("the removed agent is still configured")
	}
}

// BenchmarkReload measures the time from saving config.yaml to the new
// hook registry serving (a plugin's hook override changed), through the
// file watcher. It needs no homeserver: nothing Matrix-side changes.
func BenchmarkReload(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "config.yaml")
	write := func(priority int) {
		body := reloadConfig(fmt.Sprintf(`    hooks:
      datetime:
        priority: %d
  - builtin: tool_guard
    settings:
      blocked_tools: [shell]
`, priority))
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			b.Fatal(err)
		}
	}
	write(1)
	ctx, cancel := context.WithCancel(zerolog.Nop().WithContext(context.Background()))
	defer cancel()
	cfg, err := config.Load(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	bot, err := New(ctx, cfg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer bot.Close()
	go bot.watch(ctx)
	time.Sleep(100 * time.Millisecond) // let the watcher start
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		before := bot.Registry()
		start := time.Now()
		write(i + 2)
		for bot.Registry() == before {
			time.Sleep(100 * time.Microsecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// An agent a reload removes stops with agent:stopped naming the rooms it
// was in, from the configuration it was removed from (the new one has no
// entry for it).
func TestRemovedAgentStopsWithItsRooms(t *testing.T) {
	e := &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID("helper"))
	second := fmt.Sprintf("  second:\n    username: %s\n    rooms: [main]\n", e.localpart("second"))
	e.cfg = e.body("", second)
	rooms := hooks.Handle(hooks.AgentStopped, "rooms", func(_ context.Context, c *hooks.AgentLifecycleContext) error {
		e.rec.add(fmt.Sprintf("stopped-in:%s:%s", c.Agent, strings.Join(c.Rooms, ",")))
		return nil
	})
	e.bot = e.run(e.config(e.cfg), Options{Watch: true, ConfigOptions: e.configOptions(),
		Registry: func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry([]hooks.Plugin{e.rec.plugin(), {Name: "rooms", Hooks: []hooks.Hook{rooms}}}, hooks.Options{Services: s})
		}}, e.testLog(zerolog.InfoLevel))
	e.rec.waitFor(t, "ready:", 3, 60*time.Second) // router, helper, second
	e.rewrite(e.body("", ""))
	if got := e.rec.waitFor(t, "stopped-in:second:", 1, 30*time.Second); got[0] != "stopped-in:second:main" {
		t.Errorf("agent:stopped of the removed agent: %q, want its room main", got[0])
	}
}
