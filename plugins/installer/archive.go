package installer

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// extractTarGz extracts the gzip-compressed tar archive file into dst
// (which must not exist), refusing unsafe entries (see the package
// documentation) and archives beyond lim. Entries are written through an
// os.Root, so even an entry that slipped past the checks could not be
// written outside dst.
func extractTarGz(ctx context.Context, file, dst string, lim limits) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("not a gzip-compressed archive: %w", err)
	}
	defer zr.Close()
	if err := os.Mkdir(dst, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()

	tr := tar.NewReader(zr)
	var size int64
	var n int
	var dirs dirModes
	seen := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("failed to read the archive: %w", err)
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := checkName(hdr.Name)
		if err != nil {
			return err
		}
		if name == "." || excluded(name, hdr.Typeflag == tar.TypeDir) {
			continue // "./", the root itself; .git, __pycache__, *.pyc
		}
		n++
		if lim.maxFiles > 0 && n > lim.maxFiles {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, lim.maxFiles)
		}
		if seen[name] && hdr.Typeflag != tar.TypeDir {
			return fmt.Errorf("%s: %w: the archive holds it twice", name, ErrUnsafe)
		}
		seen[name] = true
		perm := fs.FileMode(hdr.Mode).Perm() &^ 0o022 // never group- or world-writable
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			dirs.add(name, perm|0o700)
		case tar.TypeReg:
			size += hdr.Size
			if lim.maxSize > 0 && size > lim.maxSize {
				return fmt.Errorf("%w: more than %d bytes unpacked", ErrTooLarge, lim.maxSize)
			}
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := writeEntry(root, name, perm, tr, hdr.Size); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case tar.TypeSymlink:
			if err := checkLink(name, hdr.Linkname); err != nil {
				return err
			}
			if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		case tar.TypeLink:
			return fmt.Errorf("%s: %w: hard links are not allowed", name, ErrUnsafe)
		case tar.TypeChar, tar.TypeBlock:
			return fmt.Errorf("%s: %w: device files are not allowed", name, ErrUnsafe)
		case tar.TypeFifo:
			return fmt.Errorf("%s: %w: FIFOs are not allowed", name, ErrUnsafe)
		default:
			return fmt.Errorf("%s: %w: entries of type %q are not allowed", name, ErrUnsafe, hdr.Typeflag)
		}
	}
	for i := len(dirs.paths) - 1; i >= 0; i-- {
		if err := root.Chmod(dirs.paths[i], dirs.perms[i]); err != nil {
			return err
		}
	}
	return nil
}

// excluded reports whether a slash-separated name is, or lies below, what
// skipped leaves out of plugins.
func excluded(name string, isDir bool) bool {
	els := strings.Split(name, "/")
	for j, el := range els {
		last := j == len(els)-1
		if skipped(el, !last || isDir) {
			return true
		}
	}
	return false
}

// writeEntry writes one regular file of the archive, exactly size bytes.
func writeEntry(root *os.Root, name string, perm fs.FileMode, r io.Reader, size int64) error {
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, r, size); err != nil {
		out.Close()
		return fmt.Errorf("failed to extract: %w", err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	return root.Chmod(name, perm)
}

// pluginRoot returns the directory of an unpacked plugin: dir itself when
// it holds the manifest or more than one entry, else its single top-level
// directory.
func pluginRoot(dir, manifest string) (string, error) {
	if _, err := os.Lstat(filepath.Join(dir, manifest)); err == nil {
		return dir, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	if len(ents) == 1 && ents[0].IsDir() {
		return filepath.Join(dir, ents[0].Name()), nil
	}
	return dir, nil
}
