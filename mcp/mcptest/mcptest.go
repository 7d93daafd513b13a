package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hookroom/hookroom/internal/testkit"
)

// FilesystemDir is the directory of the npm package files (relative to
// the repository root).
const FilesystemDir = "mcp/mcptest/filesystem"

// filesystemEntry is the installed server's script, installed on first use.
var filesystemEntry = sync.OnceValues(func() (string, error) {
	installer, err := testkit.RepoFile("scripts/test-clients.sh")
	if err != nil {
		return "", err
	}
	root := filepath.Dir(filepath.Dir(installer))
	var out strings.Builder
	cmd := exec.Command("bash", installer, "install-mcp")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to install the MCP filesystem server with %s install-mcp: %w\n%s", installer, err, out.String())
	}
	entry := filepath.Join(root, FilesystemDir, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		return "", fmt.Errorf("the MCP filesystem server is not installed: %w", err)
	}
	return filepath.Clean(entry), nil
})

// Filesystem is how to run the reference MCP filesystem server.
type Filesystem struct {
	// Node is the node executable.
	Node string
	// Args run the server on the allowed directories: the script, then
	// the directories.
	Args []string
	// Packages is the node_modules directory the server runs from (grant
	// it read-only in a sandbox).
	Packages string
}

// FilesystemServer returns the command that runs the reference filesystem
// server serving dirs, installing it first when needed. The test fails
// when node or npm is missing or the install fails.
func FilesystemServer(t testing.TB, dirs ...string) Filesystem {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to run the MCP filesystem server: %v", err)
	}
	entry, err := filesystemEntry()
	if err != nil {
		t.Fatal(err)
	}
	pkgs := entry
	for filepath.Base(pkgs) != "node_modules" {
		pkgs = filepath.Dir(pkgs)
	}
	return Filesystem{Node: node, Args: append([]string{entry}, dirs...), Packages: pkgs}
}

// HTTPServer is a streamable-HTTP MCP server in process.
type HTTPServer struct {
	// URL is the MCP endpoint.
	URL string
	// MCP is the SDK server: add tools to it (tools/list_changed reaches
	// connected clients).
	MCP *mcp.Server

	mu      sync.Mutex
	headers []http.Header
	handler http.Handler
	srv     *httptest.Server
}

// EchoArgs are the arguments of the echo tool.
type EchoArgs struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

// NewHTTPServer starts a streamable-HTTP MCP server with one tool, echo
// (returns "echo: " + text), closed when the test ends.
func NewHTTPServer(t testing.TB) *HTTPServer {
	t.Helper()
	s := &HTTPServer{MCP: mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)}
	mcp.AddTool(s.MCP, &mcp.Tool{Name: "echo", Description: "Returns the text it is given."},
		func(_ context.Context, _ *mcp.CallToolRequest, a EchoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
		})
	s.ForgetSessions()
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		h := s.handler
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL + "/mcp"
	t.Cleanup(s.Close)
	return s
}

// Headers returns the headers of every request so far.
func (s *HTTPServer) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

// ForgetSessions makes the server forget its sessions, as a restarted
// server does: requests of a session it no longer knows are answered 404,
// and clients must connect again.
func (s *HTTPServer) ForgetSessions() {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.MCP }, nil)
	s.mu.Lock()
	s.handler = h
	s.mu.Unlock()
	if s.srv != nil {
		s.srv.CloseClientConnections()
	}
}

// Close stops the server.
func (s *HTTPServer) Close() { s.srv.Close() }
