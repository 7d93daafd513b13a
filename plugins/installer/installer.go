package installer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
)

// Errors wrapped by what Installer's methods return.
var (
	// ErrNotInstalled: Update or Remove named a plugin the lock file does
	// not list.
	ErrNotInstalled = errors.New("not installed")
	// ErrCollision: the plugin's name is taken, by a plugin installed from
	// another source or by a directory the installer did not put there.
	ErrCollision = errors.New("name already taken")
	// ErrDeclined: the gate refused the install.
	ErrDeclined = errors.New("refused by the install gate (plugin:before_install)")
	// ErrLocked: another operation held the plugin directory's lock for
	// longer than Options.LockWait.
	ErrLocked = errors.New("another hookroom plugin command is running")
)

// lockName is the file flock(2) is taken on (not the lock file, which is
// replaced by renames).
const lockName = ".hookroom-install.lock"

// stagingPrefix starts the names of staging directories in the plugin
// directory.
const stagingPrefix = ".hookroom-staging-"

// rename is os.Rename; tests make it fail to exercise rollbacks.
var rename = os.Rename

// Installer installs plugins into one plugin directory. Its methods may be
// called concurrently, also from several processes: each holds the
// directory's lock while it changes anything.
type Installer struct {
	opts Options
	dir  string
}

// New returns an installer for opts.Dir (made absolute).
func New(opts Options) (*Installer, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid plugin installer options: %w", err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	return &Installer{opts: opts, dir: dir}, nil
}

// Dir returns the absolute plugin directory.
func (i *Installer) Dir() string { return i.dir }

func (i *Installer) limits() limits {
	return limits{maxSize: orDefault(i.opts.MaxSize, DefaultMaxSize), maxFiles: orDefault(i.opts.MaxFiles, DefaultMaxFiles)}
}

func (i *Installer) now() time.Time {
	if i.opts.Now != nil {
		return i.opts.Now()
	}
	return time.Now()
}

// Installed describes a plugin Install or Update put in place. Its JSON
// form (for --json output) is the lock file entry's fields and the ones
// tagged here.
type Installed struct {
	// Entry is what the lock file now records.
	Entry
	// Dir is where the plugin lives: <plugin dir>/<name>.
	Dir string `json:"dir"`
	// Manifest is the installed plugin's manifest.
	Manifest *plugins.Manifest `json:"-"`
	// Previous is the version that was replaced; nil for a new install.
	Previous *Entry `json:"previous,omitempty"`
	// Unchanged is set when an update found the installed files already
	// identical: nothing was moved and the gate was not asked.
	Unchanged bool `json:"unchanged,omitempty"`
	// Warnings are problems that did not stop the install (a hookroom
	// version range that could not be checked against a development
	// build, a password left out of the lock file).
	Warnings []string `json:"warnings,omitempty"`
}

// Install installs the plugin at source (a directory, a .tar.gz archive or
// a git URL with an optional #ref; see the package documentation) into
// <dir>/<name>, name being its manifest's. A plugin of that name installed
// from the same source is updated (with rollback, as Update); one installed
// from another source, or a directory the installer did not create, is an
// ErrCollision.
func (i *Installer) Install(ctx context.Context, source string) (Installed, error) {
	src, err := parseSource(source)
	if err != nil {
		return Installed{}, fmt.Errorf("failed to install %s: %w", source, err)
	}
	res, err := i.run(ctx, src, "")
	if err != nil {
		return Installed{}, fmt.Errorf("failed to install %s: %w", src, err)
	}
	return res, nil
}

// Update installs the newest content of the installed plugin name from the
// source the lock file records (for git, the newest commit of the same
// ref). The new version passes every check an install does; if any check
// or the move fails, the installed version stays in place, unchanged.
func (i *Installer) Update(ctx context.Context, name string) (Installed, error) {
	entries, err := readLock(i.dir)
	if err != nil {
		return Installed{}, fmt.Errorf("failed to update %s: %w", name, err)
	}
	e, at := findEntry(entries, name)
	if at < 0 {
		return Installed{}, fmt.Errorf("failed to update %s: %w (it is not in %s)", name, ErrNotInstalled, filepath.Join(i.dir, LockFile))
	}
	src := source{typ: e.SourceType, location: e.Source, display: e.Source, ref: e.Ref}
	res, err := i.run(ctx, src, name)
	if err != nil {
		return Installed{}, fmt.Errorf("failed to update %s from %s: %w", name, src, err)
	}
	return res, nil
}

// run installs src under the directory lock; update names the plugin the
// source must still hold ("" for Install).
func (i *Installer) run(ctx context.Context, src source, update string) (Installed, error) {
	unlock, err := i.lock(ctx)
	if err != nil {
		return Installed{}, err
	}
	defer unlock()
	entries, err := readLock(i.dir)
	if err != nil {
		return Installed{}, err
	}

	staging, err := os.MkdirTemp(i.dir, stagingPrefix)
	if err != nil {
		return Installed{}, fmt.Errorf("failed to create a staging directory: %w", err)
	}
	defer os.RemoveAll(staging)
	unpacked := filepath.Join(staging, "plugin")
	commit, err := i.fetch(ctx, src, unpacked)
	if err != nil {
		return Installed{}, err
	}
	root, err := pluginRoot(unpacked, plugins.ManifestFile)
	if err != nil {
		return Installed{}, err
	}
	m, err := plugins.ReadManifest(root)
	if err != nil {
		return Installed{}, i.manifestError(src, unpacked, root, err)
	}
	res := Installed{Manifest: m, Dir: filepath.Join(i.dir, m.Name)}
	if src.location != src.display {
		res.Warnings = append(res.Warnings, "the lock file records the git URL without its password: give git the credentials through a credential helper for updates")
	}
	if update != "" && m.Name != update {
		return Installed{}, fmt.Errorf("%w: the source now holds plugin %q, not %q", ErrCollision, m.Name, update)
	}

	prev, at := findEntry(entries, m.Name)
	if at >= 0 {
		if prev.Source != src.display || prev.SourceType != src.typ {
			return Installed{}, fmt.Errorf("%w: plugin %q is already installed from %s; remove it first (hookroom plugin remove %s)", ErrCollision, m.Name, prev.SourceString(), m.Name)
		}
		res.Previous = &prev
	} else if _, err := os.Lstat(res.Dir); err == nil {
		return Installed{}, fmt.Errorf("%w: %s already exists and was not installed by hookroom plugin install (it is not in %s); move it away first", ErrCollision, res.Dir, LockFile)
	}

	ok, err := plugins.CheckCompatible(m, i.opts.HookroomVersion)
	if err != nil {
		return Installed{}, err
	}
	if !ok {
		res.Warnings = append(res.Warnings, fmt.Sprintf("plugin %s declares hookroom %s, which cannot be checked against this build's version %q", m.Name, m.Hookroom, i.opts.HookroomVersion))
	}

	t, err := scanTree(ctx, root, i.limits())
	if err != nil {
		return Installed{}, err
	}
	res.Entry = Entry{
		Name: m.Name, Version: m.Version, Source: src.display, SourceType: src.typ,
		Ref: src.ref, Commit: commit, Checksum: t.checksum, InstalledAt: i.now().UTC().Truncate(time.Second),
	}

	installedExists := false
	if _, err := os.Lstat(res.Dir); err == nil {
		installedExists = true
		if cur, err := scanTree(ctx, res.Dir, limits{}); err == nil && cur.checksum == t.checksum && prev.Version == m.Version {
			res.Entry = prev // same files: nothing to do
			res.Entry.Commit = cmpOr(commit, prev.Commit)
			res.Unchanged = true
			if res.Entry != prev {
				entries[at] = res.Entry
				if err := writeLock(i.dir, entries); err != nil {
					return Installed{}, err
				}
			}
			return res, nil
		}
	}

	if i.opts.Gate != nil {
		c := hooks.PluginInstallContext{
			Name: m.Name, Version: m.Version, Description: m.Description,
			Update: res.Previous != nil, Source: src.display, SourceType: src.typ, Ref: src.ref, Commit: commit,
			Checksum: t.checksum, Command: slices.Clone(m.Command), Builtin: m.Builtin, Env: slices.Clone(m.Env),
			HookroomRange: m.Hookroom, HookroomVersion: i.opts.HookroomVersion,
			Dir: root, Files: t.files, Size: t.size,
		}
		if res.Previous != nil {
			c.PreviousVersion = res.Previous.Version
		}
		allow, reason, err := i.opts.Gate(ctx, c)
		switch {
		case err != nil:
			return Installed{}, fmt.Errorf("%w: the gate failed: %v", ErrDeclined, err)
		case !allow:
			return Installed{}, fmt.Errorf("%w: %s", ErrDeclined, cmpOr(reason, "no reason given"))
		}
	}
	// The gate may have taken long: nothing is moved for a caller that
	// has given up.
	if err := ctx.Err(); err != nil {
		return Installed{}, err
	}

	next := slices.Clone(entries)
	if at >= 0 {
		next[at] = res.Entry
	} else {
		next = append(next, res.Entry)
	}
	if err := i.swap(staging, root, res.Dir, installedExists, next); err != nil {
		return Installed{}, err
	}
	return res, nil
}

// swap moves the staged plugin at root into target, moving an installed
// version (when exists) aside into staging first, and writes the lock
// file. On any failure it puts everything back as it was.
func (i *Installer) swap(staging, root, target string, exists bool, entries []Entry) error {
	backup := filepath.Join(staging, backupPrefix+filepath.Base(target))
	if exists {
		if err := rename(target, backup); err != nil {
			return fmt.Errorf("failed to move the installed version aside: %w", err)
		}
	}
	restore := func(cause error) error {
		if !exists {
			return cause
		}
		if err := rename(backup, target); err != nil {
			return fmt.Errorf("%w; and failed to restore the installed version from %s: %v", cause, backup, err)
		}
		return fmt.Errorf("%w (the installed version was restored)", cause)
	}
	if err := rename(root, target); err != nil {
		return restore(fmt.Errorf("failed to move the plugin into place: %w", err))
	}
	if err := writeLock(i.dir, entries); err != nil {
		if rerr := rename(target, root); rerr != nil {
			return fmt.Errorf("%w; and failed to take the new version back out of %s: %v", err, target, rerr)
		}
		return restore(err)
	}
	return nil
}

// backupPrefix names an installed version moved aside into a staging
// directory during an update or a removal.
const backupPrefix = "backup-"

// manifestError rewrites the staged manifest path in err to what the
// operator knows: the source and the manifest's place in it.
func (i *Installer) manifestError(src source, unpacked, root string, err error) error {
	inner, _ := filepath.Rel(unpacked, root)
	name := path.Join(filepath.ToSlash(inner), plugins.ManifestFile)
	var file string
	switch src.typ {
	case hooks.PluginSourceDir:
		file = filepath.Join(src.display, plugins.ManifestFile)
	default:
		file = src.String() + ":" + name
	}
	var errs []error
	for _, e := range splitErrors(err) {
		var me *plugins.ManifestError
		if errors.As(e, &me) {
			c := *me
			c.File = file
			e = &c
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

func splitErrors(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		return u.Unwrap()
	}
	return []error{err}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Remove removes the installed plugin name and its lock file entry, and
// returns the entry. Only plugins the lock file lists are removed.
func (i *Installer) Remove(ctx context.Context, name string) (Entry, error) {
	unlock, err := i.lock(ctx)
	if err != nil {
		return Entry{}, fmt.Errorf("failed to remove %s: %w", name, err)
	}
	defer unlock()
	entries, err := readLock(i.dir)
	if err != nil {
		return Entry{}, fmt.Errorf("failed to remove %s: %w", name, err)
	}
	e, at := findEntry(entries, name)
	target := filepath.Join(i.dir, name)
	if at < 0 {
		if _, err := os.Lstat(target); err == nil && plugins.NameRE.MatchString(name) {
			return Entry{}, fmt.Errorf("failed to remove %s: %w: %s was not installed by hookroom plugin install (it is not in %s); remove it by hand", name, ErrNotInstalled, target, LockFile)
		}
		return Entry{}, fmt.Errorf("failed to remove %s: %w", name, ErrNotInstalled)
	}
	staging, err := os.MkdirTemp(i.dir, stagingPrefix)
	if err != nil {
		return Entry{}, fmt.Errorf("failed to remove %s: %w", name, err)
	}
	defer os.RemoveAll(staging)
	backup := filepath.Join(staging, backupPrefix+name)
	_, statErr := os.Lstat(target)
	exists := statErr == nil
	if exists {
		if err := rename(target, backup); err != nil {
			return Entry{}, fmt.Errorf("failed to remove %s: %w", name, err)
		}
	}
	if err := writeLock(i.dir, slices.Delete(slices.Clone(entries), at, at+1)); err != nil {
		if exists {
			if rerr := rename(backup, target); rerr != nil {
				return Entry{}, fmt.Errorf("failed to remove %s: %w; and failed to put it back from %s: %v", name, err, backup, rerr)
			}
		}
		return Entry{}, fmt.Errorf("failed to remove %s: %w", name, err)
	}
	return e, nil
}

// State says how an installed plugin's files compare with the lock file.
type State string

// The states List reports.
const (
	// StateOK: the files are as installed.
	StateOK State = "ok"
	// StateModified: files changed, were added or removed since the
	// install (the checksum differs).
	StateModified State = "modified"
	// StateMissing: the lock file lists the plugin, its directory is gone.
	StateMissing State = "missing"
	// StateUnmanaged: a plugin directory the lock file does not list (put
	// there by hand); only Name, Version and Dir are set.
	StateUnmanaged State = "unmanaged"
)

// Status is one plugin as List reports it; its JSON form is the lock file
// entry's fields and the ones tagged here.
type Status struct {
	Entry
	Dir   string `json:"dir"`
	State State  `json:"state"`
	// Current is the checksum of the files now ("" when missing or
	// unmanaged); Problem says why they could not be read.
	Current string `json:"current_checksum,omitempty"`
	Problem string `json:"problem,omitempty"`
}

// List reports every plugin the lock file lists, with its drift, and the
// unmanaged plugin directories (those holding a manifest), sorted by name.
// It reads without the directory lock: the lock file is only ever
// replaced whole.
func (i *Installer) List(ctx context.Context) ([]Status, error) {
	entries, err := readLock(i.dir)
	if err != nil {
		return nil, fmt.Errorf("failed to list plugins: %w", err)
	}
	var out []Status
	for _, e := range entries {
		s := Status{Entry: e, Dir: filepath.Join(i.dir, e.Name)}
		if _, err := os.Lstat(s.Dir); errors.Is(err, fs.ErrNotExist) {
			s.State = StateMissing
			out = append(out, s)
			continue
		}
		t, err := scanTree(ctx, s.Dir, limits{})
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			s.State, s.Problem = StateModified, err.Error()
		case t.checksum != e.Checksum:
			s.State, s.Current = StateModified, t.checksum
		default:
			s.State, s.Current = StateOK, t.checksum
		}
		out = append(out, s)
	}
	ents, err := os.ReadDir(i.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("failed to list plugins: %w", err)
	}
	for _, d := range ents {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			continue
		}
		if _, at := findEntry(entries, d.Name()); at >= 0 {
			continue
		}
		dir := filepath.Join(i.dir, d.Name())
		m, err := plugins.ReadManifest(dir)
		if errors.Is(err, plugins.ErrNoManifest) {
			continue
		}
		s := Status{Entry: Entry{Name: d.Name()}, Dir: dir, State: StateUnmanaged}
		if err != nil {
			s.Problem = err.Error()
		} else {
			s.Version = m.Version
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Status) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// lock takes the plugin directory's lock (creating the directory), waiting
// up to Options.LockWait, and recovers what a crashed operation left
// behind. The returned function releases it.
func (i *Installer) lock(ctx context.Context) (func(), error) {
	if err := os.MkdirAll(i.dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the plugin directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(i.dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open the plugin directory's lock: %w", err)
	}
	wait := orDefault(i.opts.LockWait, DefaultLockWait)
	deadline := time.Now().Add(wait)
	for {
		busy, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("failed to lock the plugin directory: %w", err)
		}
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			owner, _ := os.ReadFile(f.Name())
			f.Close()
			return nil, fmt.Errorf("%w (pid %s holds %s; waited %s)", ErrLocked, cmpOr(strings.TrimSpace(string(owner)), "?"), f.Name(), wait)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	i.recover()
	return func() {
		_ = f.Truncate(0)
		_ = unlock(f)
		f.Close()
	}, nil
}

// recover cleans up after operations that died: an installed version
// still moved aside in a staging directory is put back when nothing took
// its place and the lock file still lists it (an update or a removal that
// did not get to write the lock file), and staging directories are
// removed. Called with the lock held, so no live operation owns them.
func (i *Installer) recover() {
	ents, err := os.ReadDir(i.dir)
	if err != nil {
		return
	}
	entries, err := readLock(i.dir)
	if err != nil {
		return // leave everything for a person to look at
	}
	for _, d := range ents {
		if !d.IsDir() || !strings.HasPrefix(d.Name(), stagingPrefix) {
			continue
		}
		staging := filepath.Join(i.dir, d.Name())
		inner, _ := os.ReadDir(staging)
		for _, b := range inner {
			name, ok := strings.CutPrefix(b.Name(), backupPrefix)
			if !ok || !plugins.NameRE.MatchString(name) {
				continue
			}
			target := filepath.Join(i.dir, name)
			if _, at := findEntry(entries, name); at < 0 {
				continue
			}
			if _, err := os.Lstat(target); errors.Is(err, fs.ErrNotExist) {
				_ = rename(filepath.Join(staging, b.Name()), target)
			}
		}
		_ = os.RemoveAll(staging)
	}
}
