package installer_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/installer"
)

// clock is the fixed installed_at of the tests.
var clock = time.Date(2026, 11, 29, 4, 33, 10, 0, time.UTC)

// manifest returns a process plugin manifest; extra is spliced in
// (`"hookroom": ">=1"`).
func manifest(name, version string, extra ...string) string {
	fields := []string{
		`  "name": "` + name + `"`,
		`  "version": "` + version + `"`,
		`  "api_version": 1`,
	}
	for _, e := range extra {
		fields = append(fields, "  "+e)
	}
	fields = append(fields, `  "command": ["python3", "plugin.py"]`)
	return "{\n" + strings.Join(fields, ",\n") + "\n}\n"
}

// writeTree writes files (slash paths → content; a content starting with
// "->" is a symbolic link) under dir with fixed permissions.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// pluginFiles are the files of a small valid plugin.
func pluginFiles(name, version string, extra ...string) map[string]string {
	return map[string]string{
		"hookroom-plugin.json": manifest(name, version, extra...),
		"plugin.py":            "print('" + name + " " + version + "')\n",
		"lib/util.py":          "X = 1\n",
	}
}

// pluginDir writes a plugin source directory.
func pluginDir(t *testing.T, name, version string, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name+"-src")
	writeTree(t, dir, pluginFiles(name, version, extra...))
	return dir
}

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name     string
	typ      byte
	body     string
	linkname string
	mode     int64
}

// tarGz writes a .tar.gz of entries and returns its path.
func tarGz(t *testing.T, entries ...tarEntry) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: e.name, Typeflag: typ, Mode: mode, Linkname: e.linkname, ModTime: clock, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "plugin.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// pluginTar is a valid plugin archive, its files under prefix ("" or
// "geo-1.0/").
func pluginTar(t *testing.T, prefix, name, version string) string {
	t.Helper()
	var entries []tarEntry
	if prefix != "" {
		entries = append(entries, tarEntry{name: prefix, typ: tar.TypeDir})
	}
	entries = append(entries,
		tarEntry{name: prefix + "hookroom-plugin.json", body: manifest(name, version)},
		tarEntry{name: prefix + "plugin.py", body: "print('" + name + " " + version + "')\n", mode: 0o755},
		tarEntry{name: prefix + "lib/", typ: tar.TypeDir},
		tarEntry{name: prefix + "lib/util.py", body: "X = 1\n"},
		tarEntry{name: prefix + "lib/link.py", typ: tar.TypeSymlink, linkname: "util.py"},
	)
	return tarGz(t, entries...)
}

// gitEnv makes git hermetic and its commits reproducible.
func gitEnv(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	for k, v := range map[string]string{
		"GIT_CONFIG_GLOBAL": os.DevNull, "GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.org", "GIT_AUTHOR_DATE": "2026-11-29T04:00:00Z",
		"GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.org", "GIT_COMMITTER_DATE": "2026-11-29T04:00:00Z",
	} {
		t.Setenv(k, v)
	}
}

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// gitRepo makes a repository holding files in one commit on main and
// returns its path.
func gitRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	gitEnv(t)
	dir := filepath.Join(t.TempDir(), "repo")
	git(t, t.TempDir(), "init", "--quiet", "--initial-branch=main", dir)
	commit(t, dir, files, "first")
	return dir
}

// commit replaces the repository's files with files and commits.
func commit(t *testing.T, repo string, files map[string]string, msg string) string {
	t.Helper()
	ents, _ := os.ReadDir(repo)
	for _, e := range ents {
		if e.Name() != ".git" {
			os.RemoveAll(filepath.Join(repo, e.Name()))
		}
	}
	writeTree(t, repo, files)
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "--quiet", "--allow-empty", "-m", msg)
	return git(t, repo, "rev-parse", "HEAD")
}

// gate records what it was asked and refuses the plugins named in refuse.
type gate struct {
	asked  []hooks.PluginInstallContext
	refuse map[string]string
	err    error
}

func (g *gate) decide(_ context.Context, c hooks.PluginInstallContext) (bool, string, error) {
	g.asked = append(g.asked, c)
	if g.err != nil {
		return false, "", g.err
	}
	if reason, ok := g.refuse[c.Name]; ok {
		return false, reason, nil
	}
	return true, "", nil
}

// newInstaller returns an installer for a fresh plugin directory.
func newInstaller(t *testing.T, g *gate, mod ...func(*installer.Options)) *installer.Installer {
	t.Helper()
	opts := installer.Options{
		Dir:             filepath.Join(t.TempDir(), "plugins"),
		HookroomVersion: "1.4.0",
		Now:             func() time.Time { return clock },
	}
	if g != nil {
		opts.Gate = g.decide
	}
	for _, m := range mod {
		m(&opts)
	}
	in, err := installer.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// lockEntries reads the lock file's entries.
func lockEntries(t *testing.T, in *installer.Installer) []installer.Entry {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(in.Dir(), installer.LockFile))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Plugins []installer.Entry `json:"plugins"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	return l.Plugins
}

// dirNames lists the plugin directory (hidden files included).
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
