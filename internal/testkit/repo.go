package testkit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RepoFile returns the absolute path of rel (slash-separated, relative to
// the repository root), found by walking up from the working directory
// (a test runs in its package's directory) to the first directory that
// has a go.mod and rel. It does not rely on the source file's path, which
// a -trimpath build (scripts/test.sh) does not keep.
func RepoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("failed to get the working directory: %w", err)
	}
	for {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("failed to find " + rel + " in any parent directory with a go.mod")
		}
		dir = parent
	}
}
