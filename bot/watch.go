package bot

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/plugins"
)

// reloadDebounce is how long the files must stay quiet after a change
// before hookroom reloads: editors write a file in several steps.
const reloadDebounce = 100 * time.Millisecond

// watch reloads the configuration when config.yaml or a plugin directory
// changes, until ctx ends. It watches config.yaml's directory (editors
// replace the file) and every enabled plugin directory.
func (b *Bot) watch(ctx context.Context) {
	log := zerolog.Ctx(ctx)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Error().Err(err).Msg("failed to watch config.yaml; edits need a restart")
		return
	}
	defer w.Close()
	watched := map[string]bool{}
	sync := func() {
		want := b.watchDirs()
		for _, d := range want {
			if !watched[d] {
				if err := w.Add(d); err != nil {
					log.Warn().Err(err).Str("dir", d).Msg("failed to watch directory")
					continue
				}
				watched[d] = true
			}
		}
		for d := range watched {
			if !slices.Contains(want, d) {
				_ = w.Remove(d)
				delete(watched, d)
			}
		}
	}
	sync()
	cfgPath := b.w().cfg.Path
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-w.Errors:
			log.Warn().Err(err).Msg("file watcher error")
		case ev := <-w.Events:
			if b.relevant(ev, cfgPath) {
				timer.Reset(reloadDebounce)
			}
		case <-timer.C:
			b.reloadAndLog(ctx)
			sync()
		}
	}
}

// watchDirs are config.yaml's directory and the enabled plugin directories.
func (b *Bot) watchDirs() []string {
	cfg := b.w().cfg
	dirs := append([]string{filepath.Dir(cfg.Path)}, plugins.Dirs(cfg)...)
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// relevant reports whether a file event should trigger a reload: a change
// of config.yaml itself, or of a plugin's files (not caches, not hidden
// files, not the data directory that may live beside config.yaml).
func (b *Bot) relevant(ev fsnotify.Event, cfgPath string) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	if filepath.Clean(ev.Name) == filepath.Clean(cfgPath) {
		return true
	}
	dir, base := filepath.Split(ev.Name)
	dir = filepath.Clean(dir)
	if dir == filepath.Dir(cfgPath) {
		return false // another file beside config.yaml
	}
	if strings.HasPrefix(base, ".") || strings.HasSuffix(base, ".pyc") || base == "__pycache__" || strings.HasSuffix(base, "~") {
		return false
	}
	return true
}
