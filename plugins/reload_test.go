package plugins_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins"
)

func lastBuiltin() *testInstance {
	builtinInstances.Lock()
	defer builtinInstances.Unlock()
	return builtinInstances.list[len(builtinInstances.list)-1]
}

// TestReload walks one plugin set through a series of reloads and checks
// which instances are reused, restarted and closed.
func TestReload(t *testing.T) {
	p := newProject(t)
	p.procPlugin("plugins/a", "a", "message:received log")
	p.procPlugin("plugins/b", "b", "message:received log")
	procs := newFakeProcs()
	l := &plugins.Loader{StartProcess: procs.start}
	ctx := hooktest.Context(t)

	base := `plugins:
  - ./plugins/a
  - path: ./plugins/b
    settings: {level: 1}
  - builtin: test_builtin
    settings: {hooks: ["message:received log"]}
`
	cur, err := l.Load(ctx, p.config(base), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cur.Changes(nil), []string{"added a", "added b", "added test_builtin"}; !slices.Equal(got, want) {
		t.Errorf("first load: changes %q, want %q", got, want)
	}

	// reload loads src with the current set as prev, checks the changes and
	// the number of instances started, then swaps and closes the old set.
	reload := func(t *testing.T, l *plugins.Loader, src string, wantChanges []string, wantStarts int) {
		t.Helper()
		startsBefore := procs.starts()
		builtinInstances.Lock()
		builtinsBefore := len(builtinInstances.list)
		builtinInstances.Unlock()
		next, err := l.Load(ctx, p.config(src), cur)
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		builtinInstances.Lock()
		started := procs.starts() - startsBefore + len(builtinInstances.list) - builtinsBefore
		builtinInstances.Unlock()
		if got := next.Changes(cur); !slices.Equal(got, wantChanges) {
			t.Errorf("changes %q, want %q", got, wantChanges)
		}
		if started != wantStarts {
			t.Errorf("%d instances started, want %d", started, wantStarts)
		}
		if err := cur.Close(); err != nil {
			t.Fatal(err)
		}
		cur = next
	}

	a1, b1, bi1 := procs.instance("a"), procs.instance("b"), lastBuiltin()
	t.Run("unchanged", func(t *testing.T) {
		reload(t, l, base, nil, 0)
		for _, info := range cur.Plugins() {
			if !info.Reused {
				t.Errorf("%s was not reused", info.Name)
			}
		}
		if a1.isClosed() || b1.isClosed() || bi1.isClosed() {
			t.Error("closing the previous set closed instances the new one uses")
		}
	})
	t.Run("files the plugin writes itself do not count", func(t *testing.T) {
		p.file("plugins/a/__pycache__/x.pyc", "bytecode")
		p.file("plugins/a/.git/HEAD", "ref")
		p.file("plugins/a/lib.pyc", "bytecode")
		reload(t, l, base, nil, 0)
	})
	t.Run("code changed", func(t *testing.T) {
		p.file("plugins/a/plugin.sh", "#!/bin/sh\necho v2\n")
		reload(t, l, base, []string{"restarted a"}, 1)
		if !a1.isClosed() {
			t.Error("the old process of a was not stopped")
		}
		if b1.isClosed() || bi1.isClosed() {
			t.Error("unchanged plugins were stopped")
		}
	})
	t.Run("settings changed", func(t *testing.T) {
		reload(t, l, strings.Replace(base, "level: 1", "level: 2", 1), []string{"restarted b"}, 1)
		if !b1.isClosed() {
			t.Error("the old process of b was not stopped")
		}
	})
	base = strings.Replace(base, "level: 1", "level: 2", 1)
	t.Run("hook override of a built-in", func(t *testing.T) {
		src := base + "    hooks: {log: {priority: 5}}\n"
		reload(t, l, src, []string{"reconfigured test_builtin"}, 0)
		if bi1.isClosed() {
			t.Error("a built-in was recreated for an override change")
		}
		reg, err := cur.Registry(hooksOptions())
		if err != nil {
			t.Fatal(err)
		}
		if h := reg.Hooks()[0]; h.Plugin != "test_builtin" || h.Priority != 5 {
			t.Errorf("first hook %+v, want test_builtin at priority 5", h)
		}
		base = src
	})
	t.Run("unhealthy process", func(t *testing.T) {
		b2 := procs.instance("b")
		b2.unhealthy.Store(true)
		reload(t, l, base, []string{"restarted b"}, 1)
		if !b2.isClosed() {
			t.Error("the unhealthy process was not stopped")
		}
	})
	t.Run("forced", func(t *testing.T) {
		forced := *l
		forced.ForceRestart = true
		reload(t, &forced, base, []string{"restarted a", "restarted b", "restarted test_builtin"}, 3)
	})
	t.Run("failed reload leaves the running set alone", func(t *testing.T) {
		p.procPlugin("plugins/c", "c", "message:received log")
		a, b := procs.instance("a"), procs.instance("b")
		_, err := l.Load(ctx, p.config(base+"  - ./plugins/c\n  - ./plugins/missing\n"), cur)
		if err == nil {
			t.Fatal("Load succeeded with a missing plugin")
		}
		if c := procs.instance("c"); c == nil || !c.isClosed() {
			t.Error("the plugin started for the failed load is still running")
		}
		if a.isClosed() || b.isClosed() {
			t.Error("a failed reload stopped running plugins")
		}
		// The running set still owns its instances: a good reload reuses them.
		reload(t, l, base, nil, 0)
	})
	t.Run("removed and reordered", func(t *testing.T) {
		a := procs.instance("a")
		src := `plugins:
  - builtin: test_builtin
    settings: {hooks: ["message:received log"]}
    hooks: {log: {priority: 5}}
  - path: ./plugins/b
    settings: {level: 2}
`
		reload(t, l, src, []string{"removed a", "reordered plugins"}, 0)
		if !a.isClosed() {
			t.Error("the removed plugin was not stopped")
		}
	})
	t.Run("disabled", func(t *testing.T) {
		b := procs.instance("b")
		src := `plugins:
  - builtin: test_builtin
    settings: {hooks: ["message:received log"]}
    hooks: {log: {priority: 5}}
  - path: ./plugins/b
    enabled: false
`
		reload(t, l, src, []string{"removed b"}, 0)
		if !b.isClosed() {
			t.Error("the disabled plugin was not stopped")
		}
	})
	bi := lastBuiltin()
	if err := cur.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cur.Close(); err != nil {
		t.Fatal(err)
	}
	if n := bi.closed.Load(); n != 1 {
		t.Errorf("last built-in closed %d times, want 1", n)
	}
	for _, inst := range procs.all {
		if n := inst.closed.Load(); n != 1 {
			t.Errorf("process %s closed %d times, want 1", inst.name, n)
		}
	}
}
