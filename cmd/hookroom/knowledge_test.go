package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/bot"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
	kb "github.com/hookroom/hookroom/knowledge"
	"github.com/hookroom/hookroom/plugins"
	kplugin "github.com/hookroom/hookroom/plugins/builtin/knowledge"
)

// knowledgeEnv is a configuration directory with a knowledge base
// "handbook" over <dir>/kb (files bigger than 2000 bytes skipped) and a
// second base "notes" over <dir>/notes.
type knowledgeEnv struct {
	t       *testing.T
	dir     string
	cfgPath string
}

const knowledgeConfig = `data_dir: ./data
log:
  level: warn
matrix:
  homeserver: http://127.0.0.1:1
  server_name: localhost
models:
  default: {provider: echo}
plugins:
  - builtin: knowledge
    settings:
      max_file_bytes: 2000
      bases:
        handbook: {paths: [kb]}
        notes: {paths: [notes]}
`

func newKnowledgeEnv(t *testing.T, head string) *knowledgeEnv {
	e := &knowledgeEnv{t: t, dir: t.TempDir()}
	e.cfgPath = filepath.Join(e.dir, "config.yaml")
	writeFile(t, e.cfgPath, knowledgeConfig+head)
	writeFile(t, filepath.Join(e.dir, "notes", "n.md"), "# Notes\nNothing much.\n")
	if err := os.MkdirAll(filepath.Join(e.dir, "kb"), 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// createDatabase makes the SQLite file the server would have made.
func (e *knowledgeEnv) createDatabase() {
	if err := os.MkdirAll(filepath.Join(e.dir, "data"), 0o700); err != nil {
		e.t.Fatal(err)
	}
	db, err := database.OpenSQLite(e.t.Context(), filepath.Join(e.dir, "data", "hookroom.db"))
	if err != nil {
		e.t.Fatal(err)
	}
	_ = db.Close()
}

func (e *knowledgeEnv) knowledge(args ...string) (int, string, string) {
	e.t.Helper()
	return runCLI(append(append([]string{"knowledge"}, args...), "--config", e.cfgPath)...)
}

// reindexJSON runs reindex --json and decodes what it printed.
func (e *knowledgeEnv) reindexJSON(args ...string) []knowledgeBase {
	e.t.Helper()
	code, out, errOut := e.knowledge(append([]string{"reindex", "--json"}, args...)...)
	if code != 0 {
		e.t.Fatalf("reindex exited %d:\n%s", code, errOut)
	}
	var bases []knowledgeBase
	if err := json.Unmarshal([]byte(out), &bases); err != nil {
		e.t.Fatalf("reindex --json printed no JSON: %v\n%s", err, out)
	}
	return bases
}

// search searches handbook the way the server's plugin does.
func (e *knowledgeEnv) search(query string) []kb.Hit {
	e.t.Helper()
	cfg, err := config.Load(e.t.Context(), e.cfgPath)
	if err != nil {
		e.t.Fatal(err)
	}
	db, err := openSharedDatabase(e.t.Context(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	settings, err := hooks.NewSettings(cfg.Plugins[0].Settings)
	if err != nil {
		e.t.Fatal(err)
	}
	ix, err := kplugin.OpenIndex(e.t.Context(), plugins.Env{Settings: settings, ConfigDir: cfg.Dir, DB: db})
	if err != nil {
		e.t.Fatal(err)
	}
	hits, err := ix.Search(e.t.Context(), []string{"handbook"}, query, 5)
	if err != nil {
		e.t.Fatal(err)
	}
	return hits
}

// hookroom knowledge reindex and status on a folder: a first indexing
// (a huge and a binary file skipped, each named with its reason), an
// edit and a deletion picked up incrementally, --full, status without
// indexing — all while a "server" holds the database's lock.
func TestKnowledgeReindexAndStatus(t *testing.T) {
	e := newKnowledgeEnv(t, "")
	e.createDatabase()
	cfg, err := config.Load(t.Context(), e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	held, err := bot.OpenDatabase(t.Context(), cfg) // as hookroom run does
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	kbDir := filepath.Join(e.dir, "kb")
	writeFile(t, filepath.Join(kbDir, "guide", "install.md"), "# Install\n\nRun the installer.\nThe aardvark checks the ports.\n")
	writeFile(t, filepath.Join(kbDir, "faq.txt"), "Questions and answers.\nThe platypus answers them.\n")
	writeFile(t, filepath.Join(kbDir, "huge.md"), strings.Repeat("word ", 1000))
	writeFile(t, filepath.Join(kbDir, "blob.md"), "PK\x00\x01\x02binary")

	code, out, errOut := e.knowledge("status", "handbook")
	if code != 0 || !strings.Contains(out, "handbook: 0 files, 0 chunks (0 with embeddings), 0 bytes, never indexed") {
		t.Fatalf("status before indexing: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = e.knowledge("reindex")
	if code != 0 {
		t.Fatalf("reindex exited %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"handbook: 2 files, 2 chunks (0 with embeddings), ",
		"re-indexed in ",
		"2 changed (2 chunks, ",
		"skipped blob.md: not a text file (binary or not UTF-8)",
		"skipped huge.md: too big: 5000 bytes, more than max_file_bytes 2000",
		"notes: 1 files, 1 chunks",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("reindex output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"skipped a knowledge file", "huge.md", "blob.md"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("reindex's log lacks %q:\n%s", want, errOut)
		}
	}
	if hits := e.search("aardvark"); len(hits) != 1 || hits[0].Path != "guide/install.md" {
		t.Fatalf("search aardvark after the first reindex = %+v", hits)
	}

	// An edit and a deletion: only those are indexed again.
	writeFile(t, filepath.Join(kbDir, "guide", "install.md"), "# Install\n\nRun the installer.\nThe wombat checks the ports now.\n")
	if err := os.Remove(filepath.Join(kbDir, "faq.txt")); err != nil {
		t.Fatal(err)
	}
	bases := e.reindexJSON("handbook")
	if len(bases) != 1 || bases[0].Base != "handbook" || bases[0].Reindexed == nil {
		t.Fatalf("reindex --json handbook = %+v", bases)
	}
	b, r := bases[0], bases[0].Reindexed
	if r.Changed != 1 || r.Removed != 1 || r.Unchanged != 2 || b.Files != 1 || b.Chunks != 1 || len(b.Skipped) != 2 {
		t.Errorf("after an edit and a deletion: status %+v, reindex %+v", b.BaseStatus, *r)
	}
	if want := int64(len("# Install\n\nRun the installer.\nThe wombat checks the ports now.\n")); b.Bytes != want {
		t.Errorf("bytes = %d, want %d", b.Bytes, want)
	}
	if time.Since(b.LastIndexed) > time.Minute {
		t.Errorf("last indexed %v", b.LastIndexed)
	}
	if hits := e.search("aardvark"); len(hits) != 0 {
		t.Errorf("the edited file's old text is still found: %+v", hits)
	}
	if hits := e.search("wombat"); len(hits) != 1 || hits[0].Path != "guide/install.md" || hits[0].StartLine != 1 {
		t.Errorf("search wombat = %+v", hits)
	}
	if hits := e.search("platypus"); len(hits) != 0 {
		t.Errorf("the deleted file is still found: %+v", hits)
	}

	if r := e.reindexJSON("--full", "handbook")[0].Reindexed; r.Changed != 1 || r.Unchanged != 0 {
		t.Errorf("reindex --full: %+v, want the one text file changed", *r)
	}

	// status indexes nothing: a new file is not counted until reindex.
	writeFile(t, filepath.Join(kbDir, "new.md"), "# New\nFresh text.\n")
	code, out, _ = e.knowledge("status", "--json")
	var st []knowledgeBase
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v\n%s", code, err, out)
	}
	if len(st) != 2 || st[0].Base != "handbook" || st[0].Files != 1 || st[0].Reindexed != nil || st[1].Base != "notes" {
		t.Errorf("status --json = %+v", st)
	}
}

// The command's failures: exit 1 with a message naming what and where,
// exit 2 for usage errors.
func TestKnowledgeCommandErrors(t *testing.T) {
	noPlugin := t.TempDir()
	writeFile(t, filepath.Join(noPlugin, "config.yaml"), strings.Split(knowledgeConfig, "plugins:")[0])
	pgDir := t.TempDir()
	writeFile(t, filepath.Join(pgDir, "config.yaml"), knowledgeConfig+"database:\n  type: postgres\n  uri: postgres://hookroom:s3cret-pw@127.0.0.1:1/hookroom?sslmode=disable\n")

	withDB := newKnowledgeEnv(t, "")
	withDB.createDatabase()
	noDB := newKnowledgeEnv(t, "")

	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		want    []string
		notWant string
	}{
		{"unknown base", []string{"status", "--config", withDB.cfgPath, "handbook", "nope"}, 1,
			[]string{`no knowledge base named "nope" in ` + withDB.cfgPath + ` (its bases: handbook, notes)`}, ""},
		{"unknown base to reindex", []string{"reindex", "nope", "--config", withDB.cfgPath}, 1,
			[]string{`no knowledge base named "nope"`}, ""},
		{"no database yet", []string{"status", "--config", noDB.cfgPath}, 1,
			[]string{"failed to open the sqlite database " + filepath.Join(noDB.dir, "data", "hookroom.db"), "database.uri in " + noDB.cfgPath}, ""},
		{"database unreachable", []string{"reindex", "--config", filepath.Join(pgDir, "config.yaml")}, 1,
			[]string{"failed to reach the postgres database postgres://hookroom@127.0.0.1:1/hookroom"}, "s3cret-pw"},
		{"no knowledge plugin", []string{"status", "--config", filepath.Join(noPlugin, "config.yaml")}, 1,
			[]string{"enables no knowledge plugin"}, ""},
		{"no subcommand", nil, 2, []string{"Usage:"}, ""},
		{"unknown subcommand", []string{"rebuild"}, 2, []string{`unknown command "rebuild"`}, ""},
		{"--full on status", []string{"status", "--full", "--config", withDB.cfgPath}, 2, []string{"--full"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(append([]string{"knowledge"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if tc.notWant != "" && strings.Contains(out+errOut, tc.notWant) {
				t.Errorf("output holds %q:\n%s%s", tc.notWant, out, errOut)
			}
		})
	}
}
