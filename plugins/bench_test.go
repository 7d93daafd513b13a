package plugins_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins"
)

// BenchmarkReloadUnchanged measures a reload that changes nothing about the
// plugins: config.Parse is not included; Load (manifests, hashing the
// plugin directories, reuse) and building the registry are.
func BenchmarkReloadUnchanged(b *testing.B) {
	t := &testing.T{}
	p := &project{t: t, root: b.TempDir()}
	var src strings.Builder
	src.WriteString("plugins:\n")
	for i := range 5 {
		dir := fmt.Sprintf("plugins/p%d", i)
		p.procPlugin(dir, fmt.Sprintf("p%d", i), "message:received log", "tool:before_call gate", "message:enrich enrich")
		for j := range 20 {
			p.file(fmt.Sprintf("%s/lib/mod%d.py", dir, j), strings.Repeat("x = 1\n", 200))
		}
		fmt.Fprintf(&src, "  - ./%s\n", dir)
	}
	src.WriteString("  - builtin: test_builtin\n    settings: {hooks: [\"message:received log\"]}\n")
	cfg := p.config(src.String())
	procs := newFakeProcs()
	l := &plugins.Loader{StartProcess: procs.start}
	ctx := hooktest.Context(b)
	cur, err := l.Load(ctx, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		next, err := l.Load(ctx, cfg, cur)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := next.Registry(hooks.Options{}); err != nil {
			b.Fatal(err)
		}
		cur.Close()
		cur = next
	}
	b.StopTimer()
	if procs.starts() != 5 {
		b.Fatalf("%d process starts, want 5 (reloads must reuse)", procs.starts())
	}
	cur.Close()
}
