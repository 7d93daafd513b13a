package mcp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookroom/hookroom/mcp"
	"github.com/hookroom/hookroom/mcp/mcptest"
)

// BenchmarkCallTool measures one tool call round trip: the in-process Go
// SDK server over streamable HTTP, the Go test server over stdio, and the
// reference filesystem server from npm (node) over stdio, reading a small
// file.
func BenchmarkCallTool(b *testing.B) {
	ctx, _ := testContext(b)
	run := func(b *testing.B, s *mcp.Server, tool string, args json.RawMessage) {
		b.Cleanup(func() { _ = s.Close() })
		if err := s.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			if _, err := s.CallTool(ctx, tool, args); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("go-http", func(b *testing.B) {
		hs := mcptest.NewHTTPServer(b)
		run(b, mcp.New(ctx, mcp.Spec{Name: "web", URL: hs.URL}), "echo", json.RawMessage(`{"text":"hi"}`))
	})
	b.Run("go-stdio", func(b *testing.B) {
		run(b, mcp.New(ctx, mcp.Spec{Name: "go", Command: []string{stdioServer}, Dir: b.TempDir()}), "echo", json.RawMessage(`{"text":"hi"}`))
	})
	b.Run("npm-filesystem-stdio", func(b *testing.B) {
		dir := b.TempDir()
		note := filepath.Join(dir, "note.txt")
		if err := os.WriteFile(note, []byte("hello\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		fs := mcptest.FilesystemServer(b, dir)
		args, _ := json.Marshal(map[string]string{"path": note})
		run(b, mcp.New(ctx, mcp.Spec{Name: "files", Command: append([]string{fs.Node}, fs.Args...), Dir: b.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}}), "read_file", args)
	})
}
