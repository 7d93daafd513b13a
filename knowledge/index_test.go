package knowledge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// writeFile writes content to dir/rel, making its folders, and moves its
// modification time forward so a rewrite within the same clock tick is
// still seen as a change.
func writeFile(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var mtime time.Time
	if st, err := os.Stat(p); err == nil {
		mtime = st.ModTime().Add(time.Second)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
}

// newIndex returns an upgraded Index of one base "docs" on dir (and the
// options given), on a fresh database of dialect d.
func newIndex(t *testing.T, d dbtest.Dialect, dir string, emb Embedder, mod func(*Options)) (*Index, *dbutil.Database) {
	t.Helper()
	o := Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}}}}
	if mod != nil {
		mod(&o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	db := d.Fresh(t)
	ix := New(db, o, emb)
	if err := ix.Upgrade(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := ix.Upgrade(t.Context()); err != nil {
		t.Fatalf("second Upgrade: %v", err)
	}
	return ix, db
}

func reindex(t *testing.T, ix *Index, base string, full bool) Report {
	t.Helper()
	rep, err := ix.Reindex(t.Context(), base, full)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func search(t *testing.T, ix *Index, query string, limit int, bases ...string) []Hit {
	t.Helper()
	hits, err := ix.Search(t.Context(), bases, query, limit)
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func citations(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Citation()
	}
	return out
}

// count returns the rows of a table for path (chunks, files) and, on
// SQLite, the full-text rows matching word.
func count(t *testing.T, db *dbutil.Database, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const install = `# Install

Run the installer with the --prefix flag.

## Debian

Use the quokka package from the archive.
`

func TestSearchCitesFileAndLines(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		writeFile(t, dir, "install.md", install)
		writeFile(t, dir, "sub/notes.txt", "first note\n\nthe quokka is a small marsupial\nliving on Rottnest\n")
		writeFile(t, dir, "image.png", "\x89PNG quokka")
		ix, _ := newIndex(t, d, dir, nil, nil)
		rep := reindex(t, ix, "docs", false)
		if rep.Files != 2 || rep.Changed != 2 || rep.Chunks != 3 {
			t.Fatalf("report %+v; want 2 files changed, 3 chunks (the .png is not included)", rep)
		}
		hits := search(t, ix, "Where do I find the quokkas?", 5)
		got := strings.Join(citations(hits), " ")
		if got != "install.md:5-7 sub/notes.txt:1-4" && got != "sub/notes.txt:1-4 install.md:5-7" {
			t.Fatalf("hits %s; want install.md:5-7 and sub/notes.txt:1-4 (one chunk)", got)
		}
		for _, h := range hits {
			if h.Base != "docs" || h.Score <= 0 || h.ID == "" {
				t.Errorf("hit %+v", h)
			}
			if h.Path == "install.md" && (h.Heading != "Install > Debian" || h.Text != "## Debian\n\nUse the quokka package from the archive.") {
				t.Errorf("hit %+v", h)
			}
		}
		if hits := search(t, ix, "the and of", 5); len(hits) != 0 {
			t.Errorf("a query of stopwords found %v", citations(hits))
		}
		if hits := search(t, ix, "installers prefix", 1); len(hits) != 1 || hits[0].Citation() != "install.md:1-3" {
			t.Errorf("stemmed search found %v; want install.md:1-3", citations(hits))
		}
		if _, err := ix.Search(t.Context(), []string{"nope"}, "x", 3); !errors.Is(err, ErrUnknownBase) {
			t.Errorf("search of an unknown base: %v", err)
		}
	})
}

func TestReindexIsIncremental(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		writeFile(t, dir, "a.md", "# A\n\nalpha wombat\n")
		writeFile(t, dir, "b.md", "# B\n\nbravo numbat\n")
		writeFile(t, dir, "c.txt", "charlie dingo\n")
		ix, db := newIndex(t, d, dir, nil, nil)
		if rep := reindex(t, ix, "docs", false); rep.Changed != 3 || rep.Unchanged != 0 {
			t.Fatalf("first reindex %+v; want 3 changed", rep)
		}
		rid := func(path string) int64 {
			var r int64
			if err := db.QueryRow(t.Context(), `SELECT MIN(rid) FROM knowledge_chunk WHERE path=$1`, path).Scan(&r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		ridA, ridC := rid("a.md"), rid("c.txt")
		if rep := reindex(t, ix, "docs", false); rep.Changed != 0 || rep.Unchanged != 3 || rep.Removed != 0 {
			t.Fatalf("second reindex %+v; want nothing changed", rep)
		}

		// Change one file: only it is re-chunked; the old text is gone.
		writeFile(t, dir, "b.md", "# B\n\nbravo bilby\n")
		if rep := reindex(t, ix, "docs", false); rep.Changed != 1 || rep.Unchanged != 2 || rep.Chunks != 1 {
			t.Fatalf("reindex after a change %+v; want 1 changed, 2 unchanged", rep)
		}
		if rid("a.md") != ridA || rid("c.txt") != ridC {
			t.Error("unchanged files were re-chunked")
		}
		if hits := search(t, ix, "numbat", 5); len(hits) != 0 {
			t.Errorf("old text still found: %v", citations(hits))
		}
		if hits := search(t, ix, "bilby", 5); len(hits) != 1 || hits[0].Citation() != "b.md:1-3" {
			t.Errorf("new text: %v", citations(hits))
		}

		// Touch without a change: read, hash equal, not re-chunked.
		writeFile(t, dir, "c.txt", "charlie dingo\n")
		if rep := reindex(t, ix, "docs", false); rep.Changed != 0 || rep.Unchanged != 3 {
			t.Fatalf("reindex after a touch %+v; want nothing changed", rep)
		}

		// Delete one: gone from search, rows and the full-text index.
		if err := os.Remove(filepath.Join(dir, "a.md")); err != nil {
			t.Fatal(err)
		}
		if rep := reindex(t, ix, "docs", false); rep.Removed != 1 || rep.Files != 2 {
			t.Fatalf("reindex after a delete %+v; want 1 removed, 2 files", rep)
		}
		if hits := search(t, ix, "wombat", 5); len(hits) != 0 {
			t.Errorf("deleted file still found: %v", citations(hits))
		}
		if n := count(t, db, `SELECT COUNT(*) FROM knowledge_chunk WHERE path='a.md'`) + count(t, db, `SELECT COUNT(*) FROM knowledge_file WHERE path='a.md'`); n != 0 {
			t.Errorf("%d rows of the deleted file left", n)
		}
		if d.Name == "sqlite" {
			if n := count(t, db, `SELECT COUNT(*) FROM knowledge_fts WHERE knowledge_fts MATCH 'wombat'`); n != 0 {
				t.Errorf("%d full-text entries of the deleted file left", n)
			}
			if n := count(t, db, `SELECT COUNT(*) FROM knowledge_fts`); n != 2 {
				t.Errorf("%d full-text entries; want 2", n)
			}
		}

		// Full: every file re-chunked.
		if rep := reindex(t, ix, "docs", true); rep.Changed != 2 {
			t.Fatalf("full reindex %+v; want 2 changed", rep)
		}
	})
}

func TestReindexSkipsHugeAndBinaryFiles(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		writeFile(t, dir, "ok.md", "fine platypus\n")
		writeFile(t, dir, "huge.txt", strings.Repeat("platypus ", 200))
		writeFile(t, dir, "blob.txt", "platypus\x00\x01\x02")
		writeFile(t, dir, "latin1.txt", "caf\xe9 platypus")
		ix, _ := newIndex(t, d, dir, nil, func(o *Options) { o.MaxFileBytes = 1000 })
		rep := reindex(t, ix, "docs", false)
		if rep.Files != 1 || len(rep.Skipped) != 3 {
			t.Fatalf("report %+v; want 1 file, 3 skipped", rep)
		}
		st, err := ix.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 || st[0].Files != 1 || st[0].Chunks != 1 || len(st[0].Skipped) != 3 || st[0].LastIndexed.IsZero() {
			t.Fatalf("status %+v", st)
		}
		want := map[string]string{"blob.txt": "not a text file", "huge.txt": "too big: 1800 bytes, more than max_file_bytes 1000", "latin1.txt": "not a text file"}
		for _, s := range st[0].Skipped {
			if !strings.Contains(s.Error, want[s.Path]) {
				t.Errorf("skipped %s: %q; want %q", s.Path, s.Error, want[s.Path])
			}
		}
		if hits := search(t, ix, "platypus", 5); len(hits) != 1 || hits[0].Path != "ok.md" {
			t.Errorf("hits %v; want ok.md only", citations(hits))
		}
		// Unchanged skipped files are not reported again; fixed ones are indexed.
		writeFile(t, dir, "huge.txt", "small platypus now\n")
		rep = reindex(t, ix, "docs", false)
		if rep.Changed != 1 || len(rep.Skipped) != 0 || rep.Files != 2 {
			t.Fatalf("report %+v; want huge.txt indexed, nothing newly skipped", rep)
		}
	})
}

func TestReindexKeepsTheFilesOfAFolderThatIsGone(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		root := t.TempDir()
		dir := filepath.Join(root, "docs")
		writeFile(t, dir, "a.md", "echidna\n")
		ix, _ := newIndex(t, d, dir, nil, nil)
		reindex(t, ix, "docs", false)
		if err := os.Rename(dir, filepath.Join(root, "elsewhere")); err != nil {
			t.Fatal(err)
		}
		rep := reindex(t, ix, "docs", false)
		if rep.Removed != 0 {
			t.Fatalf("report %+v; want nothing removed while the folder is missing", rep)
		}
		st, _ := ix.Status(t.Context())
		if !strings.Contains(st[0].Error, "folder "+dir) || st[0].Files != 1 {
			t.Fatalf("status %+v; want the folder's error and its file kept", st[0])
		}
	})
}

func TestSeveralFoldersAndGlobs(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		root := t.TempDir()
		one, two := filepath.Join(root, "handbook"), filepath.Join(root, "wiki")
		writeFile(t, one, "a.md", "kangaroo one\n")
		writeFile(t, one, "drafts/b.md", "kangaroo draft\n")
		writeFile(t, one, ".git/c.md", "kangaroo hidden\n")
		writeFile(t, two, "x/y.rst", "kangaroo rst\n")
		writeFile(t, two, "x/y.md", "kangaroo md\n")
		ix, _ := newIndex(t, d, one, nil, func(o *Options) {
			o.Bases["docs"] = BaseOptions{Paths: []string{one, two}, Include: []string{"*.md", "x/*.rst"}, Exclude: []string{"drafts"}}
		})
		reindex(t, ix, "docs", false)
		got := citations(search(t, ix, "kangaroo", 10))
		want := map[string]bool{"handbook/a.md:1-1": true, "wiki/x/y.rst:1-1": true, "wiki/x/y.md:1-1": true}
		if len(got) != len(want) {
			t.Fatalf("hits %v; want %v", got, want)
		}
		for _, c := range got {
			if !want[c] {
				t.Errorf("unexpected hit %s", c)
			}
		}
	})
}

func TestPrune(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		writeFile(t, dir, "a.md", "koala\n")
		ix, db := newIndex(t, d, dir, nil, func(o *Options) { o.Bases["old"] = BaseOptions{Paths: []string{dir}} })
		if _, err := ix.ReindexAll(t.Context(), false); err != nil {
			t.Fatal(err)
		}
		next := New(db, Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}}}}, nil)
		removed, err := next.Prune(t.Context())
		if err != nil || len(removed) != 1 || removed[0] != "old" {
			t.Fatalf("Prune = %v, %v; want [old]", removed, err)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM knowledge_chunk WHERE base='old'`); n != 0 {
			t.Errorf("%d chunks of the removed base left", n)
		}
		if hits := search(t, next, "koala", 5); len(hits) != 1 {
			t.Errorf("the kept base lost its chunks: %v", hits)
		}
	})
}

// bowEmbedder embeds with llmtest's deterministic hashed bag of words (what
// the scripted /v1/embeddings answers), with some texts fixed to chosen
// vectors: a "semantic" neighbour that shares no word with its query.
type bowEmbedder struct {
	fixed map[string][]float32
	fail  atomic.Bool
	calls atomic.Int64
}

func (e *bowEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.calls.Add(1)
	if e.fail.Load() {
		return nil, errors.New("embedding server down")
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if v, ok := e.fixed[t]; ok {
			out[i] = v
		} else {
			out[i] = llmtest.Embedding(t, 64)
		}
	}
	return out, nil
}

func TestHybridSearch(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		writeFile(t, dir, "pets.md", "# Pets\n\nDogs need a walk every day.\n")
		writeFile(t, dir, "cars.md", "# Cars\n\nChange the oil every year.\n")
		semantic := make([]float32, 64)
		semantic[7] = 1
		emb := &bowEmbedder{fixed: map[string][]float32{
			"Pets\n# Pets\n\nDogs need a walk every day.": semantic,
			"how often should my puppy go outside":        semantic,
		}}
		ix, _ := newIndex(t, d, dir, emb, nil)
		reindex(t, ix, "docs", false)
		st, _ := ix.Status(t.Context())
		if st[0].Embedded != 2 {
			t.Fatalf("status %+v; want 2 chunks embedded", st[0])
		}
		// No word in common: only the vectors find it.
		hits := search(t, ix, "how often should my puppy go outside", 1)
		if len(hits) != 1 || hits[0].Path != "pets.md" {
			t.Fatalf("hits %v; want pets.md by its vector", citations(hits))
		}
		// Both rankings agree: first.
		if hits := search(t, ix, "oil change", 2); len(hits) == 0 || hits[0].Path != "cars.md" {
			t.Fatalf("hits %v; want cars.md first", citations(hits))
		}
		// The embedder fails: full-text only, no error.
		emb.fail.Store(true)
		if hits := search(t, ix, "oil", 2); len(hits) != 1 || hits[0].Path != "cars.md" {
			t.Fatalf("hits with a failing embedder %v; want cars.md", citations(hits))
		}
		writeFile(t, dir, "new.md", "ferrets\n")
		if rep := reindex(t, ix, "docs", false); rep.Changed != 1 {
			t.Fatalf("indexing with a failing embedder: %+v", rep)
		}
		if hits := search(t, ix, "ferrets", 2); len(hits) != 1 {
			t.Fatalf("a file indexed without vectors is not found: %v", citations(hits))
		}
	})
}

// Another Index on the same database (hookroom knowledge reindex next to
// the server) re-indexes a base: the server's Index ranks by the new
// vectors at its next search, though it changed nothing itself.
func TestVectorsFollowAnotherIndexer(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		writeFile(t, dir, "cars.md", "# Cars\n\nChange the oil every year.\n")
		writeFile(t, dir, "pets.md", "# Pets\n\nDogs need a walk every day.\n")
		semantic := make([]float32, 64)
		semantic[7] = 1
		const query = "how often should my puppy go outside"
		emb := &bowEmbedder{fixed: map[string][]float32{
			"Cars\n# Cars\n\nHounds stroll twice daily.": semantic,
			query: semantic,
		}}
		server, db := newIndex(t, d, dir, emb, nil)
		reindex(t, server, "docs", false)
		search(t, server, query, 1) // loads the vectors
		cli := New(db, server.Options(), emb)
		cli.now = func() time.Time { return time.Now().Add(time.Second) } // a later indexing, whatever the clock's resolution
		// The edited file's chunk gets a new row (not the last one's id).
		writeFile(t, dir, "cars.md", "# Cars\n\nHounds stroll twice daily.\n")
		if rep := reindex(t, cli, "docs", false); rep.Changed != 1 {
			t.Fatalf("the other Index's reindex: %+v", rep)
		}
		if hits := search(t, server, query, 1); len(hits) != 1 || !strings.Contains(hits[0].Text, "Hounds") {
			t.Fatalf("after another Index re-indexed: hits %v; want the new passage by its vector", hits)
		}
	})
}
