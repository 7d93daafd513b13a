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
	dirs := watchedDirs{w: w, watched: map[string]bool{}}
	sync := func() { dirs.sync(log, b.watchDirs()) }
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
			dirs.gone(ev)
			if b.relevant(ev, cfgPath) {
				timer.Reset(reloadDebounce)
			}
		case <-timer.C:
			b.reloadAndLog(ctx)
			sync()
		}
	}
}

// watchedDirs are the directories a watcher watches.
type watchedDirs struct {
	w       *fsnotify.Watcher
	watched map[string]bool
}

// sync makes the watcher watch exactly want.
func (d *watchedDirs) sync(log *zerolog.Logger, want []string) {
	for _, dir := range want {
		if !d.watched[dir] {
			if err := d.w.Add(dir); err != nil {
				log.Warn().Err(err).Str("dir", dir).Msg("failed to watch directory")
				continue
			}
			d.watched[dir] = true
		}
	}
	for dir := range d.watched {
		if !slices.Contains(want, dir) {
			_ = d.w.Remove(dir)
			delete(d.watched, dir)
		}
	}
}

// gone forgets a watched directory that ev renamed or removed (hookroom
// plugin update renames the old version away): the kernel dropped its
// watch, and the next sync watches the directory now at that path.
func (d *watchedDirs) gone(ev fsnotify.Event) {
	dir := filepath.Clean(ev.Name)
	if d.watched[dir] && ev.Op&(fsnotify.Rename|fsnotify.Remove) != 0 {
		_ = d.w.Remove(dir)
		delete(d.watched, dir)
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
