package knowledge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"
)

// Watcher re-indexes a base shortly after something under its folders
// changed: each change restarts a per-base timer of Options.Debounce (but a
// steady stream of changes still re-indexes at least every 10 debounce
// periods), then Reindex runs incrementally. New subdirectories are
// watched as they appear.
type Watcher struct {
	ix *Index
	// OnIndexed, when set before Run, is called after each re-index the
	// watcher runs (the bot logs it or counts it in metrics).
	OnIndexed func(Report, error)
}

// NewWatcher returns a watcher of ix's bases.
func NewWatcher(ix *Index) *Watcher { return &Watcher{ix: ix} }

// Run re-indexes every base once (incrementally), then watches the bases'
// folders until ctx ends. It returns nil when ctx ends, or an error when
// the operating system's file watching cannot start. Run it in its own
// goroutine; one Run per Watcher.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("failed to watch the knowledge folders: %w", err)
	}
	defer fw.Close()
	log := zerolog.Ctx(ctx)
	type root struct{ base, dir string }
	var roots []root
	for _, name := range w.ix.opts.Names() {
		for _, p := range w.ix.opts.Bases[name].Paths {
			abs, err := filepath.Abs(p)
			if err != nil {
				abs = filepath.Clean(p)
			}
			roots = append(roots, root{name, abs})
			w.addTree(ctx, fw, name, abs, abs)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	d := newDebouncer(w.ix.opts.debounce(), 10*w.ix.opts.debounce(), func(base string) {
		wg.Go(func() { w.reindex(ctx, base) })
	})
	defer d.stop()
	for _, name := range w.ix.opts.Names() {
		d.touch(name)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			log.Warn().Err(err).Msg("knowledge folder watching reported an error; re-indexing every base")
			for _, name := range w.ix.opts.Names() {
				d.touch(name)
			}
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			for _, r := range roots {
				if ev.Name != r.dir && !strings.HasPrefix(ev.Name, r.dir+string(filepath.Separator)) {
					continue
				}
				if ev.Has(fsnotify.Create) {
					if st, err := os.Lstat(ev.Name); err == nil && st.IsDir() {
						w.addTree(ctx, fw, r.base, r.dir, ev.Name)
					}
				}
				d.touch(r.base)
			}
		}
	}
}

// reindex runs Reindex for the watcher, logging the outcome.
func (w *Watcher) reindex(ctx context.Context, base string) {
	if ctx.Err() != nil {
		return
	}
	rep, err := w.ix.Reindex(ctx, base, false)
	log := zerolog.Ctx(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		log.Error().Err(err).Str("base", base).Msg("failed to re-index a knowledge base")
	case rep.Changed+rep.Removed > 0:
		log.Info().Str("base", base).Int("changed", rep.Changed).Int("removed", rep.Removed).Int("chunks", rep.Chunks).
			Dur("took", rep.Duration).Msg("re-indexed a knowledge base")
	}
	if w.OnIndexed != nil && ctx.Err() == nil {
		w.OnIndexed(rep, err)
	}
}

// addTree watches dir and its subdirectories that base indexes.
func (w *Watcher) addTree(ctx context.Context, fw *fsnotify.Watcher, base, root, dir string) {
	f := w.ix.filters[base]
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			if err != nil && d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			if f.skipDir(filepath.ToSlash(rel)) {
				return fs.SkipDir
			}
		}
		if err := fw.Add(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			zerolog.Ctx(ctx).Warn().Err(err).Str("base", base).Str("folder", p).Msg("failed to watch a knowledge folder")
		}
		return nil
	})
}

// debouncer calls fire(key) once a key has not been touched for delay, or
// maxWait after its first touch since the last fire, whichever is first.
type debouncer struct {
	delay, maxWait time.Duration
	fire           func(key string)

	mu      sync.Mutex
	pending map[string]*pending
	stopped bool
}

type pending struct {
	timer *time.Timer
	first time.Time
}

func newDebouncer(delay, maxWait time.Duration, fire func(string)) *debouncer {
	return &debouncer{delay: delay, maxWait: maxWait, fire: fire, pending: map[string]*pending{}}
}

func (d *debouncer) touch(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	now := time.Now()
	if p := d.pending[key]; p != nil {
		wait := min(d.delay, d.maxWait-now.Sub(p.first))
		if p.timer.Stop() {
			p.timer.Reset(max(wait, 0))
		}
		return
	}
	p := &pending{first: now}
	p.timer = time.AfterFunc(d.delay, func() {
		d.mu.Lock()
		if d.pending[key] != p || d.stopped {
			d.mu.Unlock()
			return
		}
		delete(d.pending, key)
		d.mu.Unlock()
		d.fire(key)
	})
	d.pending[key] = p
}

// stop cancels every pending call.
func (d *debouncer) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	for k, p := range d.pending {
		p.timer.Stop()
		delete(d.pending, k)
	}
}
