package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrStale is wrapped by the error WriteFile returns when the file changed
// on disk since it was read.
var ErrStale = errors.New("config file changed on disk since it was loaded")

// Hash returns the SHA-256 of data in hex: what WriteFile compares to tell
// whether a file changed since it was read.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// writeMu serialises WriteFile within the process, so that two saves do
// not both pass the check against the same base.
var writeMu sync.Mutex

// WriteFile replaces the file at path with data, atomically, if its
// current contents still hash to baseHash (Hash of the text the edit
// started from). Otherwise it writes nothing and returns an error that
// wraps ErrStale; a file that no longer exists counts as changed. The new
// contents go to a temporary file in the same directory, which is synced,
// given the old file's permission bits and renamed over it (then the
// directory is synced), so a reader sees the old file or the new one,
// never a part. A symbolic link at path is followed: the file it points to
// is replaced and the link stays. The file's owner is not kept: the new
// file belongs to the user hookroom runs as.
//
// WriteFile does not check data: run Check first. Another program writing
// the file between the comparison and the rename is not detected (the
// window is short; within hookroom, WriteFile calls are serialised).
func WriteFile(path string, data []byte, baseHash string) error {
	if len(data) > MaxFileSize {
		return tooLarge()
	}
	writeMu.Lock()
	defer writeMu.Unlock()

	target, err := filepath.EvalSymlinks(path)
	if errors.Is(err, os.ErrNotExist) {
		return staleError(path, "it no longer exists")
	}
	if err != nil {
		return fmt.Errorf("failed to write config: %w", err)
	}
	info, err := os.Stat(target)
	if err != nil {
		return fmt.Errorf("failed to write config: %w", err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("failed to write config: %s is not a regular file", path)
	}
	current, err := readFile(target)
	if err != nil {
		return err
	}
	if Hash(current) != baseHash {
		return staleError(path, "")
	}

	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".*.tmp")
	if err != nil {
		return fmt.Errorf("failed to write config: %w (the directory must be writable for an atomic replace)", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("failed to write config: %w", err)
	}
	if err := tmp.Chmod(info.Mode().Perm()); err != nil {
		return fmt.Errorf("failed to write config: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("failed to write config: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("failed to write config: %w", err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		_ = os.Remove(tmp.Name())
		done = true
		return fmt.Errorf("failed to write config: %w", err)
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable; not every system can
		_ = d.Close()
	}
	return nil
}

func staleError(path, why string) error {
	if why != "" {
		why = " (" + why + ")"
	}
	return &staleErr{fmt.Sprintf("%s changed on disk since it was loaded%s; reload the page to see the current file, then make the edit again (nothing was written)", filepath.Base(path), why)}
}

// staleErr is the error for a stale write; it matches ErrStale.
type staleErr struct{ msg string }

func (e *staleErr) Error() string        { return e.msg }
func (e *staleErr) Is(target error) bool { return target == ErrStale }
