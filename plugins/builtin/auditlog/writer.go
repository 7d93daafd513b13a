package auditlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// writers holds the open log files by path, so that instances sharing a
// file share its writer and its lock.
var writers = struct {
	sync.Mutex
	m map[string]*writer
}{m: map[string]*writer{}}

// writer appends lines to one file and rotates it by size.
type writer struct {
	path string
	refs int // guarded by writers

	mu       sync.Mutex
	f        *os.File
	size     int64
	maxBytes int64
	maxFiles int
}

// openWriter returns the shared writer of path, taking a reference; the
// limits of the latest caller apply. The file itself is opened on the first
// write.
func openWriter(path string, maxBytes int64, maxFiles int) *writer {
	writers.Lock()
	defer writers.Unlock()
	w := writers.m[path]
	if w == nil {
		w = &writer{path: path}
		writers.m[path] = w
	}
	w.refs++
	w.mu.Lock()
	w.maxBytes, w.maxFiles = maxBytes, maxFiles
	w.mu.Unlock()
	return w
}

// release drops a reference and closes the file with the last one.
func (w *writer) release() error {
	writers.Lock()
	w.refs--
	last := w.refs == 0
	if last {
		delete(writers.m, w.path)
	}
	writers.Unlock()
	if !last {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("failed to close audit log: %w", err)
	}
	return nil
}

// write appends one line (which ends in a newline).
func (w *writer) write(line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	if w.size > 0 && w.size+int64(len(line)) > w.maxBytes {
		if err := w.rotate(); err != nil {
			return err
		}
	}
	n, err := w.f.Write(line)
	w.size += int64(n)
	if err != nil {
		return fmt.Errorf("failed to write audit log: %w", err)
	}
	return nil
}

func (w *writer) open() error {
	if err := os.MkdirAll(filepath.Dir(w.path), 0o750); err != nil {
		return fmt.Errorf("failed to create audit log directory: %w", err)
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("failed to open audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("failed to open audit log: %w", err)
	}
	w.f, w.size = f, st.Size()
	return nil
}

// rotate shifts path.N to path.N+1 (dropping the oldest), path to path.1,
// and starts a new file.
func (w *writer) rotate() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("failed to close audit log for rotation: %w", err)
	}
	w.f = nil
	name := func(i int) string { return w.path + "." + strconv.Itoa(i) }
	if err := os.Remove(name(w.maxFiles)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to rotate audit log: %w", err)
	}
	for i := w.maxFiles - 1; i >= 1; i-- {
		if err := os.Rename(name(i), name(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("failed to rotate audit log: %w", err)
		}
	}
	if err := os.Rename(w.path, name(1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("failed to rotate audit log: %w", err)
	}
	return w.open()
}
