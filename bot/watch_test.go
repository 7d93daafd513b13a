package bot

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

// A plugin directory replaced by another at the same path (hookroom plugin
// update renames the old version away and the new one in) is watched
// again: a change in the new directory is seen.
func TestWatchedDirReplaced(t *testing.T) {
	root := t.TempDir()
	plugin := filepath.Join(root, "geo")
	if err := os.Mkdir(plugin, 0o755); err != nil {
		t.Fatal(err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	log := zerolog.Nop()
	dirs := watchedDirs{w: w, watched: map[string]bool{}}
	dirs.sync(&log, []string{plugin})

	// next waits for an event for which ok holds, handing every event to
	// dirs as the watcher's loop does.
	next := func(what string, ok func(fsnotify.Event) bool) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-w.Events:
				dirs.gone(ev)
				if ok(ev) {
					return
				}
			case err := <-w.Errors:
				t.Fatal(err)
			case <-timeout:
				t.Fatalf("no event: %s", what)
			}
		}
	}
	if err := os.Rename(plugin, filepath.Join(root, ".geo.old")); err != nil {
		t.Fatal(err)
	}
	next("the rename of the plugin directory", func(ev fsnotify.Event) bool { return ev.Has(fsnotify.Rename) })
	if dirs.watched[plugin] {
		t.Fatal("the renamed directory is still counted as watched")
	}
	if err := os.Mkdir(plugin, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs.sync(&log, []string{plugin}) // after the reload the rename triggered
	if err := os.WriteFile(filepath.Join(plugin, "plugin.py"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	next("a write in the new directory", func(ev fsnotify.Event) bool {
		return ev.Name == filepath.Join(plugin, "plugin.py")
	})
}
