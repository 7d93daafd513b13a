package installer_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookroom/hookroom/plugins/installer"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// installedState is what a rollback must leave exactly as it was.
func installedState(t *testing.T, in *installer.Installer) string {
	t.Helper()
	return readFile(t, filepath.Join(in.Dir(), installer.LockFile)) + "\n---\n" +
		readFile(t, filepath.Join(in.Dir(), "geo", "hookroom-plugin.json")) + readFile(t, filepath.Join(in.Dir(), "geo", "plugin.py"))
}

// A failed update leaves the installed version installed, loadable and in
// the lock file: when the new version does not validate, is incompatible,
// is refused by the gate, or cannot be moved into place.
func TestUpdateRollback(t *testing.T) {
	gitEnv(t)
	repo := gitRepo(t, pluginFiles("geo", "1.0.0"))
	g := &gate{refuse: map[string]string{}}
	in := newInstaller(t, g)
	v1, err := in.Install(t.Context(), "file://"+repo)
	if err != nil {
		t.Fatal(err)
	}
	before := installedState(t, in)

	steps := []struct {
		name  string
		files map[string]string
		setup func() (undo func())
		want  string
	}{
		{name: "invalid manifest", files: map[string]string{"hookroom-plugin.json": "{\"name\": \"geo\",\n\"version\": \"2.0.0\"}", "plugin.py": "broken"},
			want: "hookroom-plugin.json:1: api_version: is required"},
		{name: "no manifest", files: map[string]string{"plugin.py": "broken"}, want: "no hookroom-plugin.json"},
		{name: "another plugin", files: pluginFiles("weather", "2.0.0"), want: `the source now holds plugin "weather", not "geo"`},
		{name: "incompatible", files: pluginFiles("geo", "2.0.0", `"hookroom": ">=9"`), want: "needs hookroom >=9, this is 1.4.0"},
		{name: "gate refuses", files: pluginFiles("geo", "2.0.0"), want: "refused by the install gate (plugin:before_install): 2.0.0 is under review",
			setup: func() func() { g.refuse["geo"] = "2.0.0 is under review"; return func() { delete(g.refuse, "geo") } }},
		{name: "move into place fails", files: pluginFiles("geo", "2.0.0"), want: "failed to move the plugin into place: disk on fire (the installed version was restored)",
			setup: func() func() {
				return installer.SetRename(func(from, to string) error {
					if filepath.Base(to) == "geo" && strings.Contains(from, ".hookroom-staging-") && !strings.Contains(filepath.Base(from), "backup-") {
						return errors.New("disk on fire")
					}
					return os.Rename(from, to)
				})
			}},
		{name: "lock file write fails", files: pluginFiles("geo", "2.0.0"), want: "failed to write the lock file: disk full (the installed version was restored)",
			setup: func() func() {
				return installer.SetRename(func(from, to string) error {
					if filepath.Base(to) == installer.LockFile {
						return errors.New("disk full")
					}
					return os.Rename(from, to)
				})
			}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			commit(t, repo, st.files, st.name)
			if st.setup != nil {
				defer st.setup()()
			}
			_, err := in.Update(t.Context(), "geo")
			if err == nil || !strings.Contains(err.Error(), st.want) || !strings.Contains(err.Error(), "failed to update geo from file://"+repo+": ") {
				t.Fatalf("err = %v\nwant %q", err, st.want)
			}
			if got := installedState(t, in); got != before {
				t.Errorf("the installed version changed:\n%s\nwant\n%s", got, before)
			}
			if names := dirNames(t, in.Dir()); !slices.Equal(names, []string{".hookroom-install.lock", "geo", installer.LockFile}) {
				t.Errorf("plugin directory holds %v", names)
			}
			if list, err := in.List(t.Context()); err != nil || len(list) != 1 || list[0].State != installer.StateOK {
				t.Errorf("list after a failed update: %+v %v", list, err)
			}
		})
	}

	t.Run("success", func(t *testing.T) {
		c2 := commit(t, repo, pluginFiles("geo", "2.0.0"), "v2")
		res, err := in.Update(t.Context(), "geo")
		if err != nil {
			t.Fatal(err)
		}
		if res.Version != "2.0.0" || res.Commit != c2 || res.Previous == nil || *res.Previous != v1.Entry || res.Unchanged {
			t.Errorf("updated %+v (previous %+v)", res.Entry, res.Previous)
		}
		if got := readFile(t, filepath.Join(in.Dir(), "geo", "plugin.py")); got != "print('geo 2.0.0')\n" {
			t.Errorf("plugin.py = %q", got)
		}
		if got := lockEntries(t, in); len(got) != 1 || got[0] != res.Entry {
			t.Errorf("lock %+v", got)
		}
		asked := len(g.asked)
		again, err := in.Update(t.Context(), "geo")
		if err != nil || !again.Unchanged || again.Entry != res.Entry || len(g.asked) != asked {
			t.Errorf("update without news: %+v %v (gate asked %d more)", again, err, len(g.asked)-asked)
		}
	})
	t.Run("not installed", func(t *testing.T) {
		if _, err := in.Update(t.Context(), "nope"); !errors.Is(err, installer.ErrNotInstalled) {
			t.Errorf("err = %v", err)
		}
	})
}

// The lock file's content: sorted by name, stable, as documented.
func TestLockFileGolden(t *testing.T) {
	gitEnv(t)
	repo := gitRepo(t, pluginFiles("weather", "0.3.0"))
	git(t, repo, "tag", "v0.3.0")
	in := newInstaller(t, nil)
	dir := pluginDir(t, "geo", "1.2.0", `"hookroom": ">=1, <2"`)
	tgz := pluginTar(t, "audit/", "audit", "2.0.0")
	for _, src := range []string{"file://" + repo + "#v0.3.0", dir, tgz} {
		if _, err := in.Install(t.Context(), src); err != nil {
			t.Fatal(err)
		}
	}
	got := readFile(t, filepath.Join(in.Dir(), installer.LockFile))
	got = strings.NewReplacer(repo, "REPO", dir, "DIR", tgz, "TARBALL").Replace(got)
	golden := filepath.Join("testdata", "lock.golden")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, []byte(got), 0o644)
	}
	if want := readFile(t, golden); got != want {
		t.Errorf("lock file:\n%s\nwant (%s):\n%s", got, golden, want)
	}
}

// List reports drift: files changed, added or removed since the install,
// a plugin directory that is gone, and directories the lock file does not
// know. Python's byte code is no drift.
func TestListDrift(t *testing.T) {
	in := newInstaller(t, nil)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		if _, err := in.Install(t.Context(), pluginDir(t, name, "1.0.0")); err != nil {
			t.Fatal(err)
		}
	}
	d := func(parts ...string) string { return filepath.Join(append([]string{in.Dir()}, parts...)...) }
	os.WriteFile(d("a", "plugin.py"), []byte("print('patched')\n"), 0o644)
	os.WriteFile(d("b", "new.py"), []byte("x"), 0o644)
	os.RemoveAll(d("c"))
	os.Chmod(d("d", "plugin.py"), 0o755)
	os.MkdirAll(d("e", "__pycache__"), 0o755)
	os.WriteFile(d("e", "__pycache__", "plugin.cpython-313.pyc"), []byte("x"), 0o644)
	os.WriteFile(d("e", "lib", "util.pyc"), []byte("x"), 0o644)
	writeTree(t, d("handmade"), pluginFiles("handmade", "0.1.0"))
	os.MkdirAll(d("not-a-plugin"), 0o755)

	list, err := in.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range list {
		got = append(got, s.Name+"="+string(s.State)+"@"+s.Version)
		if s.State == installer.StateModified && (s.Current == "" || s.Current == s.Checksum) {
			t.Errorf("%s: checksum now %q, installed %q", s.Name, s.Current, s.Checksum)
		}
		if s.State == installer.StateOK && s.Current != s.Checksum {
			t.Errorf("%s: ok with checksum now %q, installed %q", s.Name, s.Current, s.Checksum)
		}
	}
	want := []string{"a=modified@1.0.0", "b=modified@1.0.0", "c=missing@1.0.0", "d=modified@1.0.0", "e=ok@1.0.0", "handmade=unmanaged@0.1.0"}
	if !slices.Equal(got, want) {
		t.Errorf("list %v\nwant %v", got, want)
	}

	// An update repairs drift.
	if res, err := in.Update(t.Context(), "a"); err != nil || res.Unchanged {
		t.Errorf("update of a modified plugin: %+v %v", res, err)
	}
	if list, _ := in.List(t.Context()); list[0].State != installer.StateOK {
		t.Errorf("after the update: %+v", list[0])
	}
}

func TestRemove(t *testing.T) {
	in := newInstaller(t, nil)
	res, err := in.Install(t.Context(), pluginDir(t, "geo", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, filepath.Join(in.Dir(), "handmade"), pluginFiles("handmade", "1.0.0"))

	restore := installer.SetRename(func(from, to string) error {
		if filepath.Base(to) == installer.LockFile {
			return errors.New("disk full")
		}
		return os.Rename(from, to)
	})
	if _, err := in.Remove(t.Context(), "geo"); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("remove with a failing lock file: %v", err)
	}
	restore()
	if _, err := os.Stat(filepath.Join(res.Dir, "plugin.py")); err != nil {
		t.Errorf("a failed removal removed the plugin: %v", err)
	}

	e, err := in.Remove(t.Context(), "geo")
	if err != nil || e != res.Entry {
		t.Fatalf("remove: %+v %v", e, err)
	}
	if _, err := os.Lstat(res.Dir); !os.IsNotExist(err) {
		t.Errorf("still there: %v", err)
	}
	if got := lockEntries(t, in); len(got) != 0 {
		t.Errorf("lock %+v", got)
	}
	if _, err := in.Remove(t.Context(), "geo"); !errors.Is(err, installer.ErrNotInstalled) {
		t.Errorf("second remove: %v", err)
	}
	if _, err := in.Remove(t.Context(), "handmade"); !errors.Is(err, installer.ErrNotInstalled) || !strings.Contains(err.Error(), "remove it by hand") {
		t.Errorf("remove of a hand-made directory: %v", err)
	}
	if names := dirNames(t, in.Dir()); !slices.Equal(names, []string{".hookroom-install.lock", "handmade", installer.LockFile}) {
		t.Errorf("plugin directory holds %v", names)
	}
}

// Operations exclude each other: concurrent installs all end up in the
// lock file, and an operation waits for the lock only so long.
func TestConcurrency(t *testing.T) {
	in := newInstaller(t, nil)
	names := []string{"a", "b", "c", "d", "e", "f"}
	srcs := map[string]string{}
	for _, n := range names {
		srcs[n] = pluginDir(t, n, "1.0.0")
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Go(func() {
			// A separate Installer per goroutine, as separate CLI
			// invocations would have.
			other, err := installer.New(installer.Options{Dir: in.Dir(), LockWait: time.Minute})
			if err == nil {
				_, err = other.Install(context.Background(), srcs[n])
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var got []string
	for _, e := range lockEntries(t, in) {
		got = append(got, e.Name)
	}
	if !slices.Equal(got, names) {
		t.Errorf("lock file lists %v, want %v", got, names)
	}

	unlock, err := in.Lock(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	waiter, _ := installer.New(installer.Options{Dir: in.Dir(), LockWait: 100 * time.Millisecond})
	_, err = waiter.Remove(t.Context(), "a")
	if !errors.Is(err, installer.ErrLocked) || !strings.Contains(err.Error(), "pid ") {
		t.Errorf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := waiter.Remove(ctx, "a"); !errors.Is(err, context.Canceled) && !errors.Is(err, installer.ErrLocked) {
		t.Errorf("cancelled wait: %v", err)
	}
}

// An operation that died between moving the installed version aside and
// moving the new one in is repaired by the next operation.
func TestRecoverAfterCrash(t *testing.T) {
	in := newInstaller(t, nil)
	res, err := in.Install(t.Context(), pluginDir(t, "geo", "1.0.0"))
	if err != nil {
		t.Fatal(err)
	}
	staging := filepath.Join(in.Dir(), ".hookroom-staging-123")
	os.MkdirAll(staging, 0o700)
	if err := os.Rename(res.Dir, filepath.Join(staging, "backup-geo")); err != nil {
		t.Fatal(err)
	}
	// A crashed removal of a plugin the lock file no longer lists stays
	// removed.
	writeTree(t, filepath.Join(staging, "backup-gone"), pluginFiles("gone", "1.0.0"))

	if _, err := in.Install(t.Context(), pluginDir(t, "other", "1.0.0")); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(res.Dir, "plugin.py")); got != "print('geo 1.0.0')\n" {
		t.Errorf("geo not restored: %q", got)
	}
	if names := dirNames(t, in.Dir()); !slices.Equal(names, []string{".hookroom-install.lock", "geo", installer.LockFile, "other"}) {
		t.Errorf("plugin directory holds %v", names)
	}
}
