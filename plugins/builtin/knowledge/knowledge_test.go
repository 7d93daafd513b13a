package knowledge

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/internal/testkit"
	kb "github.com/hookroom/hookroom/knowledge"
	"github.com/hookroom/hookroom/plugins"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	assistant = hooks.AgentName("assistant") // auto_enrich on handbook
	reader    = hooks.AgentName("reader")    // the tool only
	stranger  = hooks.AgentName("stranger")  // not in the settings
	alice     = id.UserID("@alice:x")
	roomA     = id.RoomID("!a:x")
	secret    = id.RoomID("!secret:x")
)

func encryptedRooms(_ context.Context, room id.RoomID) (bool, error) { return room == secret, nil }

type loaded struct {
	t      *testing.T
	dir    string // config.yaml's folder
	set    *plugins.Set
	reg    *hooks.Registry
	plugin *Plugin
}

// load writes config.yaml (plugins section pluginsYAML) into dir and loads
// it through the real loader on db.
func load(t *testing.T, dir string, db *dbutil.Database, enc func(context.Context, id.RoomID) (bool, error), pluginsYAML string) (*loaded, error) {
	t.Helper()
	src := "matrix:\n  homeserver: http://localhost:8008\nplugins:\n" + pluginsYAML
	cfg, err := config.Parse([]byte(src), filepath.Join(dir, "config.yaml"), config.WithLookupEnv(func(string) (string, bool) { return "", false }))
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	l := plugins.Loader{DB: db, RoomEncrypted: enc}
	set, err := l.Load(hooktest.Context(t), cfg, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = set.Close() })
	reg, err := set.Registry(hooks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := set.Instance(Name)
	return &loaded{t: t, dir: dir, set: set, reg: reg, plugin: inst.(*Plugin)}, nil
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const settingsYAML = `  - builtin: knowledge
    settings:
      debounce_ms: 20
      bases:
        handbook:
          paths: [kb]
      agents:
        assistant: {bases: [handbook], auto_enrich: true, top_k: 2}
        reader: {bases: [handbook]}
`

func (l *loaded) enrich(agent hooks.AgentName, room id.RoomID, body string) string {
	l.t.Helper()
	c := hooktest.MessageEnrich(body)
	c.Envelope.AgentName, c.TargetAgent, c.Envelope.RoomID = agent, agent, room
	hooktest.Emit(l.t, l.reg, hooks.MessageEnrich, c)
	var s []string
	for _, it := range c.Items {
		s = append(s, it.Key+": "+it.Text)
	}
	return strings.Join(s, "\n")
}

func (l *loaded) search(agent hooks.AgentName, query string) (string, error) {
	args, _ := json.Marshal(map[string]string{"query": query})
	return l.set.CallTool(hooktest.Context(l.t), l.reg, kb.ToolName, plugins.ToolCall{ToolCall: hooks.ToolCall{
		Tool: kb.ToolName, Arguments: args, Agent: agent, RoomID: roomA, RequesterID: alice,
	}})
}

// eventually waits until cond holds, at most 10 s (the project's wait
// helper, testkit).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, what, cond)
}

// A file written into a base's folder after the plugin started is found by
// auto-enrichment and by search_knowledge; an edit replaces its text, a
// deletion removes it.
func TestWatchedBase(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "kb", "intro.md"), "# Intro\n\nThe handbook explains the office.\n")
		l, err := load(t, dir, d.Fresh(t), encryptedRooms, settingsYAML)
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the initial index finds intro.md", func() bool {
			return strings.Contains(l.enrich(assistant, roomA, "what does the handbook explain?"), "intro.md:")
		})

		write(t, filepath.Join(dir, "kb", "guide", "wifi.md"), "# Wifi\n\nThe wifi password rotates every Monday.\nAsk the zanzibar desk.\n")
		eventually(t, "the new file is found", func() bool {
			return strings.Contains(l.enrich(assistant, roomA, "who knows the wifi password?"), "guide/wifi.md:1-4")
		})
		out, err := l.search(reader, "wifi password")
		if err != nil || !strings.Contains(out, "[handbook] guide/wifi.md:1-4") || !strings.Contains(out, "zanzibar desk") {
			t.Fatalf("search_knowledge = %q, %v", out, err)
		}

		write(t, filepath.Join(dir, "kb", "guide", "wifi.md"), "# Wifi\n\nThe wifi password is on the fridge.\n")
		eventually(t, "the edit is indexed", func() bool {
			text := l.enrich(assistant, roomA, "where is the wifi password?")
			return strings.Contains(text, "fridge") && !strings.Contains(text, "zanzibar")
		})

		if err := os.Remove(filepath.Join(dir, "kb", "guide", "wifi.md")); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the deleted file is gone", func() bool {
			out, err := l.search(reader, "wifi password fridge")
			return err == nil && !strings.Contains(out, "wifi.md")
		})

		// Passages only for agents with auto_enrich.
		if text := l.enrich(reader, roomA, "what does the handbook explain?"); text != "" {
			t.Errorf("reader (no auto_enrich) got items: %s", text)
		}
		if text := l.enrich(stranger, roomA, "what does the handbook explain?"); text != "" {
			t.Errorf("stranger got items: %s", text)
		}
	})
}

// search_knowledge is offered to the agents with bases only.
func TestToolOnlyForAgentsWithBases(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kb", "a.md"), "alpha\n")
	l, err := load(t, dir, dbtest.SQLite.Fresh(t), encryptedRooms, settingsYAML)
	if err != nil {
		t.Fatal(err)
	}
	tools := l.set.Tools()
	if len(tools) != 1 || tools[0].Name != kb.ToolName || !slices.Equal(tools[0].Agents, []hooks.AgentName{assistant, reader}) {
		t.Fatalf("tools %+v", tools)
	}
	if _, err := l.search(stranger, "alpha"); err == nil || !strings.Contains(err.Error(), "no knowledge base is available") {
		t.Errorf("stranger's search: %v", err)
	}
	hs := l.reg.Hooks()
	if i := slices.IndexFunc(hs, func(h hooks.HookInfo) bool { return h.Plugin == Name && h.Hook == HookPassages }); i < 0 ||
		!slices.Equal(hs[i].Agents, []hooks.AgentName{assistant}) {
		t.Errorf("passages hook: %+v", hs)
	}

	bare, err := load(t, dir, dbtest.SQLite.Fresh(t), nil, "  - builtin: knowledge\n    settings:\n      bases: {handbook: {paths: [kb]}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(bare.set.Tools()) != 0 || len(bare.plugin.Hooks()) != 0 {
		t.Errorf("no agents: tools %v, hooks %v", bare.set.Tools(), bare.plugin.Hooks())
	}
}

// !knowledge is for admins; it shows each base's state and re-indexes on
// request.
func TestKnowledgeCommand(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kb", "a.md"), "alpha beta\n")
	write(t, filepath.Join(dir, "kb", "blob.txt"), "binary\x00data\n")
	l, err := load(t, dir, dbtest.SQLite.Fresh(t), nil, settingsYAML)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := l.set.Command("knowledge")
	if !ok {
		t.Fatal("no !knowledge")
	}
	run := func(admin bool, args ...string) string {
		out, err := c.Call(t.Context(), plugins.CommandRequest{Room: roomA, Sender: alice, Admin: admin, Args: args})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if out := run(false); !strings.Contains(out, "Only hookroom's admins") {
		t.Errorf("non-admin: %q", out)
	}
	if out := run(true, "reindex"); !strings.Contains(out, "**handbook**: 1 files") {
		t.Errorf("!knowledge reindex = %q", out)
	}
	out := run(true)
	for _, w := range []string{"**handbook**: 1 files", "indexed 20", "skipped `blob.txt`"} {
		if !strings.Contains(out, w) {
			t.Errorf("!knowledge lacks %q:\n%s", w, out)
		}
	}
	if out := run(true, "reindex", "nope"); !strings.Contains(out, "nope: no such base") {
		t.Errorf("!knowledge reindex nope = %q", out)
	}
}

// From an encrypted room, or one the host cannot tell, the message never
// reaches the embeddings endpoint: the search ranks by full text alone.
func TestEncryptedRoomsSearchByFullText(t *testing.T) {
	srv := llmtest.NewServer(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kb", "a.md"), "The vault opens at noon.\n")
	l, err := load(t, dir, dbtest.SQLite.Fresh(t), encryptedRooms, settingsYAML+
		"      embeddings: {base_url: "+srv.URL+", model: embedder}\n")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "indexed", func() bool {
		return strings.Contains(l.enrich(assistant, secret, "when does the vault open?"), "a.md:1-1")
	})
	embedded := func(text string) bool {
		for _, r := range srv.EmbeddingRequests() {
			if slices.Contains(r.Input, text) {
				return true
			}
		}
		return false
	}
	if embedded("when does the vault open?") {
		t.Error("a message of an encrypted room was sent to the embeddings endpoint")
	}
	if !strings.Contains(l.enrich(assistant, roomA, "vault opening hours"), "a.md:1-1") || !embedded("vault opening hours") {
		t.Error("a plain room's message was not ranked with embeddings")
	}
}

// Bad settings are reported at their line; relative folders are resolved
// against config.yaml's folder.
func TestInvalidSettings(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"missing folder", "  - builtin: knowledge\n    settings:\n      bases:\n        handbook:\n          paths: [nowhere]\n",
			`config\.yaml:8: plugins\[0\]\.settings\.bases\.handbook\.paths\[0\]: folder ROOT/nowhere does not exist$`},
		{"unknown base", "  - builtin: knowledge\n    settings:\n      agents:\n        assistant: {bases: [nope]}\n",
			`config\.yaml:7: plugins\[0\]\.settings\.agents\.assistant\.bases\[0\]: no knowledge base "nope"`},
		{"auto_enrich without bases", "  - builtin: knowledge\n    settings:\n      agents:\n        assistant: {auto_enrich: true}\n",
			`plugins\[0\]\.settings\.agents\.assistant\.auto_enrich: needs at least one base$`},
		{"bad embeddings", "  - builtin: knowledge\n    settings:\n      embeddings: {base_url: http://x}\n",
			`config\.yaml:6: plugins\[0\]\.settings\.embeddings\.model: required`},
		{"negative max_pdf_bytes", "  - builtin: knowledge\n    settings:\n      max_pdf_bytes: -1\n",
			`config\.yaml:6: plugins\[0\]\.settings\.max_pdf_bytes: must not be negative$`},
		{"unknown key", "  - builtin: knowledge\n    settings:\n      base: {}\n",
			`config\.yaml:6: plugins\[0\]\.settings\.base: unknown setting$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := load(t, dir, dbtest.SQLite.Fresh(t), nil, tt.yaml)
			if err == nil || !regexp.MustCompile(tt.want).MatchString(strings.ReplaceAll(err.Error(), dir, "ROOT")) {
				t.Fatalf("Load = %v\nwant %s", err, tt.want)
			}
		})
	}
	dir := t.TempDir()
	if _, err := load(t, dir, nil, nil, "  - builtin: knowledge\n"); err == nil || !strings.Contains(err.Error(), "knowledge needs hookroom's database") {
		t.Errorf("without a database: %v", err)
	}
}

// A reload that drops a base removes its rows; Close stops the watcher.
func TestReloadPrunesAndClose(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kb", "a.md"), "alpha\n")
	write(t, filepath.Join(dir, "old", "b.md"), "bravo\n")
	db := dbtest.SQLite.Fresh(t)
	both := "  - builtin: knowledge\n    settings:\n      bases:\n        handbook: {paths: [kb]}\n        old: {paths: [old]}\n"
	l, err := load(t, dir, db, nil, both)
	if err != nil {
		t.Fatal(err)
	}
	files := func(base string) int {
		var n int
		if err := db.QueryRow(t.Context(), `SELECT COUNT(*) FROM knowledge_file WHERE base=$1`, base).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	eventually(t, "both bases indexed", func() bool { return files("old") == 1 && files("handbook") == 1 })
	if err := l.set.Close(); err != nil { // waits for the watcher to stop
		t.Fatal(err)
	}
	if _, err := load(t, dir, db, nil, "  - builtin: knowledge\n    settings:\n      bases:\n        handbook: {paths: [kb]}\n"); err != nil {
		t.Fatal(err)
	}
	if n := files("old"); n != 0 {
		t.Errorf("%d files of the dropped base left", n)
	}
	if n := files("handbook"); n != 1 {
		t.Errorf("the kept base has %d files", n)
	}
}

// Loaded only to be looked at, the plugin declares everything but creates
// no tables and watches nothing.
func TestInspect(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kb", "a.md"), "alpha\n")
	for _, withDB := range []bool{false, true} {
		var db *dbutil.Database
		if withDB {
			db = dbtest.SQLite.Fresh(t)
		}
		cfg, err := config.Parse([]byte("matrix:\n  homeserver: http://localhost:8008\nplugins:\n"+settingsYAML), filepath.Join(dir, "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		l := plugins.Loader{DB: db, Inspect: true}
		set, err := l.Load(hooktest.Context(t), cfg, nil)
		if err != nil {
			t.Fatalf("with database %v: %v", withDB, err)
		}
		if len(set.Tools()) != 1 || len(set.Commands()) != 1 || len(set.HookPlugins()[0].Hooks) != 1 {
			t.Errorf("with database %v: tools %d, commands %d", withDB, len(set.Tools()), len(set.Commands()))
		}
		if db != nil {
			if ok, err := db.TableExists(t.Context(), "knowledge_chunk"); err != nil || ok {
				t.Errorf("inspecting created the knowledge tables (%v)", err)
			}
		}
		_ = set.Close()
	}
}

// The size limits reach the index.
func TestSizeLimits(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "kb", "a.md"), "alpha\n")
	l, err := load(t, dir, dbtest.SQLite.Fresh(t), nil, settingsYAML+"      max_file_bytes: 1000\n      max_pdf_bytes: 2000\n")
	if err != nil {
		t.Fatal(err)
	}
	if o := l.plugin.Index().Options(); o.MaxFileBytes != 1000 || o.MaxPDFBytes != 2000 {
		t.Fatalf("options %+v; want max_file_bytes 1000, max_pdf_bytes 2000", o)
	}
}
