package knowledge

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/testkit"
)

func TestDebouncer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var fired []string
		var at []time.Duration
		start := time.Now()
		d := newDebouncer(300*time.Millisecond, time.Second, func(k string) {
			mu.Lock()
			defer mu.Unlock()
			fired = append(fired, k)
			at = append(at, time.Since(start))
		})
		got := func() []string {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(fired)
		}
		d.touch("a")
		time.Sleep(200 * time.Millisecond)
		d.touch("a") // restarts a's timer
		d.touch("b")
		time.Sleep(250 * time.Millisecond)
		if f := got(); len(f) != 0 {
			t.Fatalf("fired %v at %v before the quiet period ended", f, at)
		}
		time.Sleep(100 * time.Millisecond)
		if f := got(); len(f) != 2 || !slices.Contains(f, "a") || !slices.Contains(f, "b") || at[0] != 500*time.Millisecond || at[1] != at[0] {
			t.Fatalf("fired %v at %v; want a and b at 500ms", f, at)
		}

		// A steady stream of changes still fires after maxWait.
		mu.Lock()
		fired, at, start = nil, nil, time.Now()
		mu.Unlock()
		for range 8 {
			d.touch("c")
			time.Sleep(200 * time.Millisecond)
		}
		if f := got(); len(f) == 0 || f[0] != "c" || at[0] != time.Second {
			t.Fatalf("fired %v at %v; want c after 1s of steady changes", f, at)
		}

		// Stopped: nothing fires any more.
		d.touch("d")
		d.stop()
		d.touch("e")
		time.Sleep(time.Second)
		if f := got(); slices.Contains(f, "d") || slices.Contains(f, "e") {
			t.Fatalf("fired %v after stop", f)
		}
	})
}

// The watcher indexes what is there, then picks up a new file, a file in a
// new folder, an edit and a delete without anyone calling Reindex.
func TestWatcherFollowsTheFolders(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "old.md", "existing wallaby\n")
	ix, _ := newIndex(t, dbtest.SQLite, dir, nil, func(o *Options) { o.Debounce = 50 * time.Millisecond })
	w := NewWatcher(ix)
	var mu sync.Mutex
	var reports []Report
	w.OnIndexed = func(r Report, err error) {
		if err != nil {
			t.Errorf("watcher reindex: %v", err)
		}
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	found := func(query, citation string) func() bool {
		return func() bool {
			hits, err := ix.Search(t.Context(), nil, query, 5)
			if err != nil {
				t.Error(err)
				return true
			}
			if citation == "" {
				return len(hits) == 0
			}
			return len(hits) > 0 && hits[0].Citation() == citation
		}
	}
	testkit.Eventually(t, 5*time.Second, "the existing file indexed", found("wallaby", "old.md:1-1"))

	writeFile(t, dir, "new.md", "# New\n\nfresh quoll\n")
	testkit.Eventually(t, 5*time.Second, "a new file indexed", found("quoll", "new.md:1-3"))

	writeFile(t, dir, "deep/er/nested.txt", "nested bandicoot\n")
	testkit.Eventually(t, 5*time.Second, "a file in a new folder indexed", found("bandicoot", "deep/er/nested.txt:1-1"))
	writeFile(t, dir, "deep/er/second.txt", "second possum\n")
	testkit.Eventually(t, 5*time.Second, "a later file in the new folder indexed", found("possum", "deep/er/second.txt:1-1"))

	writeFile(t, dir, "new.md", "# New\n\nedited dunnart\n")
	testkit.Eventually(t, 5*time.Second, "the edit indexed", found("dunnart", "new.md:1-3"))
	testkit.Eventually(t, 5*time.Second, "the old text gone", found("quoll", ""))

	if err := os.RemoveAll(filepath.Join(dir, "deep")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the deleted files gone", found("bandicoot possum", ""))

	// PDFs alike: added, edited, deleted.
	writePDF(t, dir, "manual.pdf", [][]string{{"Contents"}, {"The numbat eats termites."}}, pdfOptions{})
	testkit.Eventually(t, 5*time.Second, "a new PDF indexed", found("numbat", "manual.pdf:p2"))
	writePDF(t, dir, "manual.pdf", [][]string{{"The kowari hunts insects."}}, pdfOptions{})
	testkit.Eventually(t, 5*time.Second, "the edited PDF indexed", found("kowari", "manual.pdf:p1"))
	testkit.Eventually(t, 5*time.Second, "the PDF's old text gone", found("numbat", ""))
	if err := os.Remove(filepath.Join(dir, "manual.pdf")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "the deleted PDF gone", found("kowari", ""))

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v; want nil after cancel", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) < 5 {
		t.Errorf("%d re-index reports; want one per change at least", len(reports))
	}
}
