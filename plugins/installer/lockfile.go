package installer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hookroom/hookroom/hooks"
)

// LockFile is the name of the lock file in the plugin directory.
const LockFile = "hookroom-plugins.lock"

// lockVersion is the lock file format this package writes and reads.
const lockVersion = 1

// Entry is one installed plugin as the lock file records it.
type Entry struct {
	// Name and Version are the manifest's.
	Name    string `json:"name"`
	Version string `json:"version"`
	// Source is the directory, archive or git URL (without its password)
	// it was installed from; SourceType says which.
	Source     string                 `json:"source"`
	SourceType hooks.PluginSourceType `json:"source_type"`
	// Ref is the git ref asked for ("" for the default branch), Commit the
	// commit installed.
	Ref    string `json:"ref,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Checksum is "sha256:<hex>" over the installed file tree (see the
	// package documentation).
	Checksum string `json:"checksum"`
	// InstalledAt is when it was installed or last updated (UTC, seconds).
	InstalledAt time.Time `json:"installed_at"`
}

// SourceString is the source as the operator can give it to Install again:
// the source, with "#ref" for a git ref and a "git+" prefix for a git
// repository named by a path.
func (e Entry) SourceString() string {
	s := e.Source
	if e.SourceType == hooks.PluginSourceGit && filepath.IsAbs(s) {
		s = "git+" + s
	}
	if e.Ref != "" {
		s += "#" + e.Ref
	}
	return s
}

type lockData struct {
	LockVersion int     `json:"lock_version"`
	Plugins     []Entry `json:"plugins"`
}

// readLock reads dir's lock file; a missing file is an empty lock.
func readLock(dir string) ([]Entry, error) {
	file := filepath.Join(dir, LockFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("failed to read the lock file: %w", err)
	}
	var l lockData
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", file, err)
	}
	if l.LockVersion != lockVersion {
		return nil, fmt.Errorf("%s: lock_version %d is not supported (this hookroom writes %d)", file, l.LockVersion, lockVersion)
	}
	seen := map[string]bool{}
	for i, e := range l.Plugins {
		if e.Name == "" || strings.ContainsAny(e.Name, `/\`) || e.Name == "." || e.Name == ".." {
			return nil, fmt.Errorf("%s: plugins[%d]: invalid name %q", file, i, e.Name)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("%s: plugin %q is listed twice", file, e.Name)
		}
		seen[e.Name] = true
	}
	return l.Plugins, nil
}

// marshalLock renders the lock file: entries sorted by name, two-space
// indentation, a final newline.
func marshalLock(entries []Entry) ([]byte, error) {
	l := lockData{LockVersion: lockVersion, Plugins: slices.Clone(entries)}
	if l.Plugins == nil {
		l.Plugins = []Entry{}
	}
	slices.SortFunc(l.Plugins, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	for i := range l.Plugins {
		l.Plugins[i].InstalledAt = l.Plugins[i].InstalledAt.UTC().Truncate(time.Second)
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// writeLock replaces dir's lock file atomically.
func writeLock(dir string, entries []Entry) error {
	data, err := marshalLock(entries)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".hookroom-plugins.lock-*")
	if err != nil {
		return fmt.Errorf("failed to write the lock file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = rename(tmp, filepath.Join(dir, LockFile))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("failed to write the lock file: %w", err)
	}
	return nil
}

func findEntry(entries []Entry, name string) (Entry, int) {
	i := slices.IndexFunc(entries, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return Entry{}, -1
	}
	return entries[i], i
}
