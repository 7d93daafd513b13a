package installer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// ErrUnsafe is wrapped by the errors about a plugin's files that could
// reach outside the plugin (an absolute path, "..", a symbolic link
// leaving the root) or are not plain files (devices, FIFOs, sockets, hard
// links).
var ErrUnsafe = errors.New("unsafe plugin content")

// ErrTooLarge is wrapped when a plugin passes Options.MaxSize or
// Options.MaxFiles.
var ErrTooLarge = errors.New("plugin too large")

// skipped reports whether a plugin file is left out of installs and
// checksums: version-control data and Python byte code.
func skipped(name string, isDir bool) bool {
	if isDir {
		return name == ".git" || name == "__pycache__"
	}
	return name == ".git" || strings.HasSuffix(name, ".pyc")
}

// tree is what scanTree found.
type tree struct {
	checksum string
	files    int   // regular files
	size     int64 // their bytes
}

type entry struct {
	rel  string // slash-separated, relative to the root
	mode fs.FileMode
	data string // hex sha256 of a file, a link's target, "" for a directory
}

// limits bound a tree; zero fields are unbounded.
type limits struct {
	maxSize  int64
	maxFiles int
}

// walkPlugin calls fn for every entry below root (not root itself), with
// its path relative to root, leaving out what skipped names (version
// control, byte code) and stopping when ctx ends.
func walkPlugin(ctx context.Context, root string, fn func(p, rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if skipped(d.Name(), d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return fn(p, rel, d)
	})
}

// scanTree walks root (not following symbolic links), checks that it holds
// only directories, regular files and symbolic links that stay inside root,
// within lim, and computes its checksum (see the package documentation).
func scanTree(ctx context.Context, root string, lim limits) (tree, error) {
	var entries []entry
	var t tree
	err := walkPlugin(ctx, root, func(p, rel string, d fs.DirEntry) error {
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := entry{rel: rel, mode: info.Mode()}
		switch {
		case info.Mode().IsDir():
		case info.Mode().IsRegular():
			sum, err := hashFile(p)
			if err != nil {
				return err
			}
			e.data = sum
			t.files++
			t.size += info.Size()
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := checkLink(rel, target); err != nil {
				return err
			}
			e.data = target
		default:
			return fmt.Errorf("%s: %w: %s is not a regular file, directory or symbolic link", rel, ErrUnsafe, info.Mode().Type())
		}
		entries = append(entries, e)
		if lim.maxFiles > 0 && len(entries) > lim.maxFiles {
			return fmt.Errorf("%w: more than %d files", ErrTooLarge, lim.maxFiles)
		}
		if lim.maxSize > 0 && t.size > lim.maxSize {
			return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, lim.maxSize)
		}
		return nil
	})
	if err != nil {
		return tree{}, err
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.rel, b.rel) })
	h := sha256.New()
	for _, e := range entries {
		typ := "f"
		switch {
		case e.mode.IsDir():
			typ = "d"
		case e.mode&fs.ModeSymlink != 0:
			typ = "l"
		}
		fmt.Fprintf(h, "%s\x00%s\x00%04o\x00%s\x00", typ, e.rel, e.mode.Perm(), e.data)
	}
	t.checksum = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return t, nil
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("failed to read %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkName refuses an entry name that is absolute or climbs out of the
// root; it returns the cleaned slash-separated name.
func checkName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: an entry without a name", ErrUnsafe)
	}
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) || (len(name) > 1 && name[1] == ':') || strings.Contains(name, "\\") {
		return "", fmt.Errorf("%s: %w: absolute path", name, ErrUnsafe)
	}
	for el := range strings.SplitSeq(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("%s: %w: the path climbs out with \"..\"", name, ErrUnsafe)
		}
	}
	return path.Clean(name), nil
}

// checkLink refuses a symbolic link at rel (slash-separated, relative to
// the root) whose target is absolute or resolves outside the root.
func checkLink(rel, target string) error {
	if target == "" || path.IsAbs(target) || filepath.IsAbs(target) {
		return fmt.Errorf("%s: %w: symbolic link to absolute path %q", rel, ErrUnsafe, target)
	}
	joined := path.Join(path.Dir(rel), filepath.ToSlash(target))
	if joined == ".." || strings.HasPrefix(joined, "../") {
		return fmt.Errorf("%s: %w: symbolic link %q points outside the plugin", rel, ErrUnsafe, target)
	}
	return nil
}

// copyTree copies the plugin at src into dst (which must not exist),
// leaving out what skipped names, preserving permission bits and symbolic
// links (which must stay inside src).
func copyTree(ctx context.Context, src, dst string, lim limits) error {
	if _, err := scanTree(ctx, src, lim); err != nil { // refuse before copying anything
		return err
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	var dirs dirModes
	err := walkPlugin(ctx, src, func(p, rel string, d fs.DirEntry) error {
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			dirs.add(to, info.Mode().Perm())
			return os.Mkdir(to, 0o755)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := checkLink(filepath.ToSlash(rel), target); err != nil {
				return err
			}
			return os.Symlink(target, to)
		case info.Mode().IsRegular():
			return copyFile(p, to, info.Mode().Perm())
		}
		return fmt.Errorf("%s: %w: %s is not a regular file, directory or symbolic link", rel, ErrUnsafe, info.Mode().Type())
	})
	if err != nil {
		return err
	}
	return dirs.apply()
}

// dirModes sets directories' permission bits once their content is in
// place (a read-only directory could not be filled afterwards).
type dirModes struct {
	paths []string
	perms []fs.FileMode
}

func (d *dirModes) add(p string, perm fs.FileMode) {
	d.paths = append(d.paths, p)
	d.perms = append(d.perms, perm)
}

func (d *dirModes) apply() error {
	for i := len(d.paths) - 1; i >= 0; i-- {
		if err := os.Chmod(d.paths[i], d.perms[i]); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("failed to copy %s: %w", from, err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(to, perm) // the umask must not change what the checksum sees
}
