package bot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/database"
	"github.com/hookroom/hookroom/internal/testkit"
	kb "github.com/hookroom/hookroom/knowledge"
)

// knowledgeIndexDeadline is how soon after a file changes under a
// knowledge folder search_knowledge must see the change (issue 19).
const knowledgeIndexDeadline = 2 * time.Second

// A knowledge base on a real homeserver, through the built-in plugin and
// its watcher: a file added to the folder while hookroom runs is found by
// search_knowledge within 2 s, an edited one returns its new text (and not
// the old), a deleted one disappears — each asserted on the tool result
// the scripted model receives, with its path:start-end citation. A huge
// and a binary file are skipped with warnings naming them (the log,
// !knowledge), and the turns go on. auto_enrich puts the top passages into
// the model request.
func TestKnowledgePlugin(t *testing.T) {
	folder := t.TempDir()
	writeKnowledgeFile(t, folder, "guide/install.md", "# Install\n\nThe installer listens on port 8448.\n")
	writeKnowledgeFile(t, folder, "huge.md", strings.Repeat("lorem ipsum ", 500)) // 6000 bytes
	writeKnowledgeFile(t, folder, "logo.txt", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

	e := &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID("helper"))
	e.cfg = e.body(fmt.Sprintf(`plugins:
  - builtin: knowledge
    settings:
      max_file_bytes: 4096
      bases:
        handbook: {paths: [%q]}
      agents:
        helper: {bases: [handbook], auto_enrich: true}
`, folder), "")
	cfg := e.config(e.cfg)
	e.bot = e.run(cfg, Options{ConfigOptions: e.configOptions()}, e.testLog(zerolog.InfoLevel))
	e.waitLog("account caught up", 2)
	e.waitLog("re-indexed a knowledge base", 1) // the first indexing, at load
	router, helper := e.userID("router"), e.userID("helper")

	// The huge and the binary file: skipped, each named in a warning.
	for _, name := range []string{"huge.md", "logo.txt"} {
		testkit.Eventually(t, 10*time.Second, "a warning names "+name, func() bool {
			for line := range strings.SplitSeq(e.logs.String(), "\n") {
				if strings.Contains(line, `"level":"warn"`) && strings.Contains(line, "skipped a knowledge file") &&
					strings.Contains(line, filepath.Join(folder, name)) {
					return true
				}
			}
			return false
		})
	}
	e.say("!knowledge", "")
	status := waitMessageFrom(t, e.person, e.room, router, "Knowledge bases:")
	for _, want := range []string{"**handbook**: 1 files", "huge.md`: too big: 6000 bytes, more than max_file_bytes 4096", "logo.txt`: not a text file"} {
		if !strings.Contains(status, want) {
			t.Errorf("!knowledge lacks %q:\n%s", want, status)
		}
	}

	// probe searches the bot's database the way the tool does.
	db, err := database.OpenSQLite(t.Context(), cfg.Database.URI.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	probe := kb.New(db, kb.Options{Bases: map[string]kb.BaseOptions{"handbook": {Paths: []string{folder}}}}, nil)
	// indexedWithin waits until a search for query finds (or no longer
	// finds) want, and returns how long that took after since.
	indexedWithin := func(what, query, want string, found bool, since time.Time) time.Duration {
		t.Helper()
		var took time.Duration
		testkit.Eventually(t, 30*time.Second, what, func() bool {
			hits, err := probe.Search(t.Context(), []string{"handbook"}, query, 5)
			if err != nil {
				t.Fatal(err)
			}
			has := strings.Contains(kb.RenderHits(hits), want)
			if has == found {
				took = time.Since(since)
				return true
			}
			return false
		})
		t.Logf("%s: %v after the change", what, took.Round(time.Millisecond))
		if took > knowledgeIndexDeadline {
			t.Errorf("%s took %v, more than %v", what, took.Round(time.Millisecond), knowledgeIndexDeadline)
		}
		return took
	}
	// ask runs one turn in which the model searches for query, and returns
	// the tool result it got and every message of its last request.
	turn := 0
	ask := func(question, query string) (result, request string) {
		t.Helper()
		turn++
		reply := fmt.Sprintf("answer %d", turn)
		e.llm.Script(
			llmtest.Calls(llmtest.ToolCall(fmt.Sprintf("k%d", turn), "search_knowledge", fmt.Sprintf(`{"query":%q}`, query))),
			llmtest.Text(reply),
		)
		e.say(question, "")
		waitMessageFrom(t, e.person, e.room, helper, reply)
		reqs := e.llm.Requests()
		return e.lastToolResult(), strings.Join(messageContents(reqs[len(reqs)-1].Body.Messages), "\n")
	}

	// Added while hookroom runs, in a new sub-folder.
	t0 := time.Now()
	writeKnowledgeFile(t, folder, "animals/zebra.md", "# Zebra\n\nZebras graze on tall grass.\n")
	indexedWithin("the added file is found", "zebras graze", "tall grass", true, t0)
	result, request := ask("what do zebras eat?", "zebras graze")
	if !strings.Contains(result, "[handbook] animals/zebra.md:1-3 (Zebra)") || !strings.Contains(result, "Zebras graze on tall grass.") {
		t.Errorf("the tool result lacks the added file's passage and citation:\n%s", result)
	}
	if !strings.Contains(request, "Passages from the knowledge bases that may answer the message; cite them as path:start-end.") ||
		!strings.Contains(request, "[handbook] animals/zebra.md:1-3 (Zebra)\n") {
		t.Errorf("the model request lacks the auto_enrich passages:\n%s", request)
	}

	// Edited: the new text, not the old.
	t0 = time.Now()
	writeKnowledgeFile(t, folder, "animals/zebra.md", "# Zebra\n\nZebras in the zoo graze on hay.\nThey sleep standing.\n")
	indexedWithin("the edited file's new text is found", "zebras graze", "on hay", true, t0)
	result, _ = ask("and in the zoo?", "zebras graze")
	if !strings.Contains(result, "[handbook] animals/zebra.md:1-4 (Zebra)") || !strings.Contains(result, "graze on hay") {
		t.Errorf("the tool result lacks the edited file's new text:\n%s", result)
	}
	if strings.Contains(result, "tall grass") {
		t.Errorf("the tool result still holds the edited file's old text:\n%s", result)
	}

	// Deleted: gone.
	t0 = time.Now()
	if err := os.Remove(filepath.Join(folder, "animals", "zebra.md")); err != nil {
		t.Fatal(err)
	}
	indexedWithin("the deleted file is gone", "zebras graze", "zebra.md", false, t0)
	result, _ = ask("any zebras left?", "zebras graze")
	if result != `No passage matched "zebras graze".` {
		t.Errorf("the deleted file is still found:\n%s", result)
	}

	// The file that was there from the start is still found, cited.
	result, _ = ask("which port?", "installer port")
	if !strings.Contains(result, "[handbook] guide/install.md:1-3 (Install)") || !strings.Contains(result, "port 8448") {
		t.Errorf("the tool result lacks the first file's passage:\n%s", result)
	}
}

// writeKnowledgeFile writes content to the slash-separated path rel under
// folder, creating its folders.
func writeKnowledgeFile(t *testing.T, folder, rel, content string) {
	t.Helper()
	path := filepath.Join(folder, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
