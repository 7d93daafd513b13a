package installer_test

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/installer"
)

// Every kind of source installs the same plugin into <dir>/<name>, records
// it in the lock file and asks the gate with what it installs.
func TestInstallSources(t *testing.T) {
	gitEnv(t)
	repo := gitRepo(t, pluginFiles("geo", "1.0.0"))
	first := git(t, repo, "rev-parse", "HEAD")
	git(t, repo, "tag", "v1.0.0")
	second := commit(t, repo, pluginFiles("geo", "1.1.0"), "second")

	tests := []struct {
		name       string
		source     func(t *testing.T) string
		typ        hooks.PluginSourceType
		version    string
		ref        string
		commit     string
		wantSource func(src string) string
	}{
		{name: "directory", source: func(t *testing.T) string { return pluginDir(t, "geo", "1.0.0") }, typ: hooks.PluginSourceDir, version: "1.0.0"},
		{name: "flat tarball", source: func(t *testing.T) string { return pluginTar(t, "", "geo", "1.0.0") }, typ: hooks.PluginSourceTarball, version: "1.0.0"},
		{name: "tarball with a top-level directory", source: func(t *testing.T) string { return pluginTar(t, "geo-1.0.0/", "geo", "1.0.0") }, typ: hooks.PluginSourceTarball, version: "1.0.0"},
		{name: "git file URL", source: func(*testing.T) string { return "file://" + repo }, typ: hooks.PluginSourceGit, version: "1.1.0", commit: second},
		{name: "git tag", source: func(*testing.T) string { return "file://" + repo + "#v1.0.0" }, typ: hooks.PluginSourceGit, version: "1.0.0", ref: "v1.0.0", commit: first,
			wantSource: func(string) string { return "file://" + repo }},
		{name: "git commit", source: func(*testing.T) string { return "file://" + repo + "#" + first }, typ: hooks.PluginSourceGit, version: "1.0.0", ref: first, commit: first,
			wantSource: func(string) string { return "file://" + repo }},
		{name: "git path", source: func(*testing.T) string { return "git+" + repo }, typ: hooks.PluginSourceGit, version: "1.1.0", commit: second,
			wantSource: func(string) string { return repo }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &gate{}
			in := newInstaller(t, g)
			src := tc.source(t)
			res, err := in.Install(t.Context(), src)
			if err != nil {
				t.Fatal(err)
			}
			wantSource := src
			if tc.wantSource != nil {
				wantSource = tc.wantSource(src)
			}
			if res.Name != "geo" || res.Version != tc.version || res.SourceType != tc.typ || res.Source != wantSource ||
				res.Ref != tc.ref || res.Commit != tc.commit || !strings.HasPrefix(res.Checksum, "sha256:") || !res.InstalledAt.Equal(clock) {
				t.Errorf("installed %+v", res.Entry)
			}
			if res.Previous != nil || res.Unchanged || res.Dir != filepath.Join(in.Dir(), "geo") {
				t.Errorf("previous=%v unchanged=%v dir=%s", res.Previous, res.Unchanged, res.Dir)
			}
			if got := readFile(t, filepath.Join(res.Dir, "plugin.py")); got != "print('geo "+tc.version+"')\n" {
				t.Errorf("plugin.py = %q", got)
			}
			if _, err := os.Stat(filepath.Join(res.Dir, ".git")); !os.IsNotExist(err) {
				t.Errorf(".git installed: %v", err)
			}
			if _, err := plugins.ReadManifest(res.Dir); err != nil {
				t.Errorf("the installed plugin does not load: %v", err)
			}
			if got := lockEntries(t, in); len(got) != 1 || got[0] != res.Entry {
				t.Errorf("lock file %+v, want %+v", got, res.Entry)
			}
			if names := dirNames(t, in.Dir()); !slices.Equal(names, []string{".hookroom-install.lock", "geo", installer.LockFile}) {
				t.Errorf("plugin directory holds %v", names)
			}
			if len(g.asked) != 1 {
				t.Fatalf("gate asked %d times", len(g.asked))
			}
			c := g.asked[0]
			if c.Name != "geo" || c.Version != tc.version || c.Update || c.Source != wantSource || c.SourceType != tc.typ || c.Checksum != res.Checksum ||
				c.Commit != tc.commit || c.Ref != tc.ref || !slices.Equal(c.Command, []string{"python3", "plugin.py"}) || c.HookroomVersion != "1.4.0" || c.Files != 3 || c.Size == 0 {
				t.Errorf("gate asked with %+v", c)
			}
		})
	}
}

// The three sources of the same files give the same checksum; the
// checksum follows the documented format.
func TestChecksum(t *testing.T) {
	files := map[string]string{"hookroom-plugin.json": manifest("geo", "1.0.0"), "a/b.txt": "hi\n", "a/l": "->b.txt"}
	dir := filepath.Join(t.TempDir(), "src")
	writeTree(t, dir, files)
	os.Chmod(filepath.Join(dir, "a"), 0o755)
	in := newInstaller(t, nil)
	res, err := in.Install(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// sha256 of "hi\n" and of the manifest, by hand.
	want := checksumOf([][4]string{
		{"d", "a", "0755", ""},
		{"f", "a/b.txt", "0644", sha256hex("hi\n")},
		{"l", "a/l", "0777", "b.txt"},
		{"f", "hookroom-plugin.json", "0644", sha256hex(manifest("geo", "1.0.0"))},
	})
	if res.Checksum != want {
		t.Errorf("checksum %s, want %s", res.Checksum, want)
	}
	tgz := tarGz(t,
		tarEntry{name: "hookroom-plugin.json", body: manifest("geo", "1.0.0")},
		tarEntry{name: "a/", typ: tar.TypeDir},
		tarEntry{name: "a/b.txt", body: "hi\n"},
		tarEntry{name: "a/l", typ: tar.TypeSymlink, linkname: "b.txt"},
		tarEntry{name: "__pycache__/x.pyc", body: "junk"}, // never installed
	)
	res2, err := newInstaller(t, nil).Install(t.Context(), tgz)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Checksum != want {
		t.Errorf("tarball checksum %s, want %s", res2.Checksum, want)
	}
	if _, err := os.Stat(filepath.Join(res2.Dir, "__pycache__")); !os.IsNotExist(err) {
		t.Errorf("__pycache__ installed: %v", err)
	}
}

// Archives that could write outside the plugin, or hold what a plugin has
// no business holding, are refused, and nothing is left behind.
func TestMaliciousTarballs(t *testing.T) {
	good := tarEntry{name: "hookroom-plugin.json", body: manifest("evil", "1.0.0")}
	big := strings.Repeat("x", 2048)
	tests := []struct {
		name    string
		entries []tarEntry
		opts    func(*installer.Options)
		want    error
		msg     string
	}{
		{"dot-dot", []tarEntry{good, {name: "../escape.txt", body: "x"}}, nil, installer.ErrUnsafe, `../escape.txt: unsafe plugin content: the path climbs out with ".."`},
		{"dot-dot inside", []tarEntry{good, {name: "lib/../../escape.txt", body: "x"}}, nil, installer.ErrUnsafe, "climbs out"},
		{"absolute", []tarEntry{good, {name: "/tmp/escape.txt", body: "x"}}, nil, installer.ErrUnsafe, "/tmp/escape.txt: unsafe plugin content: absolute path"},
		{"symlink to an absolute path", []tarEntry{good, {name: "passwd", typ: tar.TypeSymlink, linkname: "/etc/passwd"}}, nil, installer.ErrUnsafe, `symbolic link to absolute path "/etc/passwd"`},
		{"symlink escaping", []tarEntry{good, {name: "lib/up", typ: tar.TypeSymlink, linkname: "../../.."}}, nil, installer.ErrUnsafe, `symbolic link "../../.." points outside the plugin`},
		{"write through an escaping symlink", []tarEntry{good, {name: "out", typ: tar.TypeSymlink, linkname: ".."}, {name: "out/escape.txt", body: "x"}}, nil, installer.ErrUnsafe, "points outside"},
		{"hard link", []tarEntry{good, {name: "h", typ: tar.TypeLink, linkname: "hookroom-plugin.json"}}, nil, installer.ErrUnsafe, "hard links are not allowed"},
		{"device", []tarEntry{good, {name: "dev", typ: tar.TypeChar}}, nil, installer.ErrUnsafe, "device files are not allowed"},
		{"fifo", []tarEntry{good, {name: "fifo", typ: tar.TypeFifo}}, nil, installer.ErrUnsafe, "FIFOs are not allowed"},
		{"duplicate entry", []tarEntry{good, good}, nil, installer.ErrUnsafe, "the archive holds it twice"},
		{"oversize", []tarEntry{good, {name: "big", body: big}}, func(o *installer.Options) { o.MaxSize = 1024 }, installer.ErrTooLarge, "more than 1024 bytes unpacked"},
		{"too many entries", []tarEntry{good, {name: "a", body: "1"}, {name: "b", body: "2"}}, func(o *installer.Options) { o.MaxFiles = 2 }, installer.ErrTooLarge, "more than 2 entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &gate{}
			var mods []func(*installer.Options)
			if tc.opts != nil {
				mods = append(mods, tc.opts)
			}
			in := newInstaller(t, g, mods...)
			tgz := tarGz(t, tc.entries...)
			_, err := in.Install(t.Context(), tgz)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "failed to install "+tgz+": ") {
				t.Fatalf("err = %v, want %v with %q", err, tc.want, tc.msg)
			}
			if len(g.asked) != 0 {
				t.Error("the gate was asked about a refused archive")
			}
			if names := dirNames(t, in.Dir()); !slices.Equal(names, []string{".hookroom-install.lock"}) {
				t.Errorf("left behind: %v", names)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(in.Dir()), "escape.txt")); !os.IsNotExist(err) {
				t.Errorf("a file escaped: %v", err)
			}
		})
	}
	t.Run("not gzip", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "x.tar.gz")
		os.WriteFile(p, []byte("plain text"), 0o644)
		if _, err := newInstaller(t, nil).Install(t.Context(), p); err == nil || !strings.Contains(err.Error(), "not a gzip-compressed archive") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("directory with an escaping symlink", func(t *testing.T) {
		dir := pluginDir(t, "evil", "1.0.0")
		os.Symlink("/etc", filepath.Join(dir, "etc"))
		if _, err := newInstaller(t, nil).Install(t.Context(), dir); !errors.Is(err, installer.ErrUnsafe) {
			t.Errorf("err = %v", err)
		}
	})
}

// What stops an install says which source and what is wrong.
func TestInstallErrors(t *testing.T) {
	gitEnv(t)
	noManifest := filepath.Join(t.TempDir(), "empty")
	writeTree(t, noManifest, map[string]string{"plugin.py": "x"})
	badManifest := filepath.Join(t.TempDir(), "bad")
	writeTree(t, badManifest, map[string]string{"hookroom-plugin.json": "{\n  \"name\": \"geo\",\n  \"version\": \"1\",\n  \"api_version\": 2,\n  \"command\": [\"x\"]\n}\n"})
	badRepo := gitRepo(t, map[string]string{"hookroom-plugin.json": "{\n  \"name\": \"Geo\"\n}\n"})
	badTar := tarGz(t, tarEntry{name: "geo/", typ: tar.TypeDir}, tarEntry{name: "geo/hookroom-plugin.json", body: "{\n\"name\": 1}"})

	tests := []struct {
		name   string
		source string
		gate   *gate
		want   error
		msg    string
	}{
		{"no manifest", noManifest, nil, plugins.ErrNoManifest, "failed to install " + noManifest + ": " + filepath.Join(noManifest, "hookroom-plugin.json") + ": no hookroom-plugin.json in the plugin directory"},
		{"invalid manifest", badManifest, nil, nil, filepath.Join(badManifest, "hookroom-plugin.json") + ":4: api_version: 2 is not supported (this hookroom speaks 1)"},
		{"invalid manifest in git", "file://" + badRepo, nil, nil, "file://" + badRepo + ":hookroom-plugin.json:2: name: \"Geo\" must match"},
		{"invalid manifest in an archive", badTar, nil, nil, badTar + ":geo/hookroom-plugin.json:2: name: must be a string"},
		{"incompatible", pluginDir(t, "geo", "2.0.0", `"hookroom": ">=2, <3"`), nil, plugins.ErrIncompatible, "plugin geo 2.0.0 needs hookroom >=2, <3, this is 1.4.0"},
		{"gate refuses", pluginDir(t, "geo", "1.0.0"), &gate{refuse: map[string]string{"geo": "geo is not on the allowlist"}}, installer.ErrDeclined,
			"refused by the install gate (plugin:before_install): geo is not on the allowlist"},
		{"gate fails", pluginDir(t, "geo", "1.0.0"), &gate{err: errors.New("policy plugin crashed")}, installer.ErrDeclined, "the gate failed: policy plugin crashed"},
		{"missing source", "/nonexistent/plugin", nil, nil, "/nonexistent/plugin does not exist"},
		{"plain file", badManifest + "/hookroom-plugin.json", nil, nil, "is neither a directory nor a .tar.gz archive"},
		{"git repository that is not there", "file:///nonexistent/repo.git", nil, nil, "failed to install file:///nonexistent/repo.git: git clone failed: "},
		{"git ref that is not there", "file://" + badRepo + "#nope", nil, nil, "git clone failed: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := newInstaller(t, tc.gate)
			_, err := in.Install(t.Context(), tc.source)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v\nwant %v containing %q", err, tc.want, tc.msg)
			}
			if strings.Contains(err.Error(), ".hookroom-staging") {
				t.Errorf("the error names the staging directory: %v", err)
			}
			if _, err := os.Lstat(filepath.Join(in.Dir(), "geo")); !os.IsNotExist(err) {
				t.Errorf("installed anyway: %v", err)
			}
			if got := lockEntries(t, in); len(got) != 0 {
				t.Errorf("lock file lists %+v", got)
			}
		})
	}
}

// A name taken by another source or by a hand-made directory is not
// overwritten; the same source again is an update.
func TestNameCollision(t *testing.T) {
	in := newInstaller(t, nil)
	a := pluginDir(t, "geo", "1.0.0")
	if _, err := in.Install(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	b := pluginDir(t, "geo", "1.0.0")
	_, err := in.Install(t.Context(), b)
	if !errors.Is(err, installer.ErrCollision) || !strings.Contains(err.Error(), `plugin "geo" is already installed from `+a+"; remove it first (hookroom plugin remove geo)") {
		t.Errorf("err = %v", err)
	}
	writeTree(t, a, pluginFiles("geo", "1.0.1"))
	res, err := in.Install(t.Context(), a)
	if err != nil || res.Previous == nil || res.Previous.Version != "1.0.0" || res.Version != "1.0.1" {
		t.Errorf("same source again: %+v, %v", res, err)
	}

	writeTree(t, filepath.Join(in.Dir(), "weather"), pluginFiles("weather", "1.0.0"))
	_, err = in.Install(t.Context(), pluginDir(t, "weather", "2.0.0"))
	if !errors.Is(err, installer.ErrCollision) || !strings.Contains(err.Error(), "was not installed by hookroom plugin install") {
		t.Errorf("err = %v", err)
	}
	if got := readFile(t, filepath.Join(in.Dir(), "weather", "plugin.py")); !strings.Contains(got, "1.0.0") {
		t.Errorf("the hand-made directory was replaced: %q", got)
	}
}

func TestOptionsValidate(t *testing.T) {
	err := (&installer.Options{GitTimeout: -1, MaxSize: -1, MaxFiles: -1, LockWait: -1}).Validate()
	for _, want := range []string{"dir: the plugin directory is required", "git_timeout: must not be negative", "max_size", "max_files", "lock_wait"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
	}
	if err := (&installer.Options{Dir: "plugins"}).Validate(); err != nil {
		t.Errorf("a zero-valued option is invalid: %v", err)
	}
	if _, err := installer.New(installer.Options{}); err == nil || !strings.Contains(err.Error(), "invalid plugin installer options") {
		t.Errorf("New: %v", err)
	}
}

// The gate is asked with what an update replaces; a dev build cannot check
// ranges and says so.
func TestGateContextAndWarnings(t *testing.T) {
	g := &gate{}
	in := newInstaller(t, g, func(o *installer.Options) { o.HookroomVersion = "dev" })
	src := pluginDir(t, "geo", "1.0.0", `"hookroom": ">=1, <2"`)
	res, err := in.Install(t.Context(), src)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], `declares hookroom >=1, <2, which cannot be checked against this build's version "dev"`) {
		t.Errorf("warnings %q", res.Warnings)
	}
	writeTree(t, src, pluginFiles("geo", "1.1.0", `"hookroom": ">=1, <2"`))
	if _, err := in.Update(t.Context(), "geo"); err != nil {
		t.Fatal(err)
	}
	c := g.asked[1]
	if !c.Update || c.PreviousVersion != "1.0.0" || c.Version != "1.1.0" || c.HookroomRange != ">=1, <2" {
		t.Errorf("update asked with %+v", c)
	}
}

// A git URL's password appears in no error (git's own message included).
func TestGitPasswordNotShown(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "git")
	os.WriteFile(fake, []byte("#!/bin/sh\necho \"fatal: unable to access $*\" >&2\nexit 128\n"), 0o755)
	in := newInstaller(t, nil, func(o *installer.Options) { o.Git = fake })
	_, err := in.Install(context.Background(), "https://user:hunter2@git.example.org/x.git#main")
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "https://user@git.example.org/x.git") {
		t.Errorf("err = %v", err)
	}
}
