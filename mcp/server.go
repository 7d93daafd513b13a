package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/internal/child"
	"github.com/hookroom/hookroom/internal/restart"
	"github.com/hookroom/hookroom/sandbox"
)

// SourcePrefix starts the source of an MCP server's tools in qualified
// tool names: mcp:SERVER/TOOL.
const SourcePrefix = "mcp:"

// errs are the failures shared with every supervised process.
var errs = restart.NewErrors("MCP server")

// Errors a call fails with; check with errors.Is.
var (
	// ErrUnavailable ("MCP server unavailable"): the server is not
	// connected right now (a stdio server that crashed and waits for its
	// restart, or did not start).
	ErrUnavailable = errs.Unavailable
	// ErrDisabled: the stdio server crashed too often and stays down until
	// the next reload. Wraps ErrUnavailable.
	ErrDisabled = errs.Disabled
	// ErrClosed: the server was closed (removed from the configuration).
	ErrClosed = errs.Closed
	// ErrUnknownTool: the server does not offer the tool (now).
	ErrUnknownTool = errors.New("unknown tool")
	// ErrExited: the stdio server's process exited during the call.
	ErrExited = errs.Exited
)

// Tool is a tool an MCP server offers.
type Tool struct {
	// Server is the name of the server (its mcp_servers key).
	Server string `json:"server"`
	// Name is the tool's name, as the model sees it.
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments (the tool's
	// inputSchema).
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Source returns the tool's source in qualified names: "mcp:SERVER".
func (t Tool) Source() string { return SourcePrefix + t.Server }

// Spec is everything needed to run one MCP server. Exactly one of Command
// and URL is set.
type Spec struct {
	// Name is the server's name (its mcp_servers key).
	Name string
	// Command is the program of a stdio server and its arguments; the
	// program is an absolute path or looked up in PATH.
	Command []string
	// Env is the stdio process's complete environment (KEY=VALUE).
	Env []string
	// Dir is the stdio process's working directory, created if missing.
	Dir string
	// Sandbox, when set, confines the stdio process (Landlock); without
	// Landlock in the kernel it runs unconfined and a warning says so once.
	Sandbox *sandbox.Policy
	// URL is the endpoint of a streamable-HTTP server.
	URL string
	// Headers are added to every HTTP request (values are secrets: never
	// logged).
	Headers map[string]string
	// HTTPClient sends the HTTP requests (nil: a client without timeout;
	// calls are bounded by CallTimeout).
	HTTPClient *http.Client
	// CallTimeout bounds a tool call (default 60 s); StartTimeout bounds
	// connecting and listing the tools (default 30 s).
	CallTimeout  time.Duration
	StartTimeout time.Duration
	// Restart is the back-off and crash-loop limit of a stdio server.
	Restart restart.Policy
	// NoRestart leaves a stdio server down after it exits (hookroom check
	// lists tools once).
	NoRestart bool
	// StopTimeout bounds each step of stopping a stdio process: the exit
	// after its stdin closed, then after SIGTERM; then it is killed
	// (default 2 s).
	StopTimeout time.Duration
}

func (s Spec) stdio() bool { return len(s.Command) > 0 }

// Server is one MCP server and, for stdio servers, its supervisor. All
// methods are safe for concurrent use.
type Server struct {
	spec   Spec
	log    zerolog.Logger
	client *sdk.Client
	// supervisor keeps the connection in service and, for a stdio server,
	// restarts its process after a crash.
	supervisor *restart.Supervisor[*conn]

	mu    sync.Mutex // guards tools and pids
	tools []Tool
	pids  []int

	connectMu     sync.Mutex // one HTTP connect at a time
	version       atomic.Uint64
	sandboxWarned atomic.Bool
	wg            sync.WaitGroup
}

// conn is one connection: a session, and for a stdio server its process.
type conn struct {
	sess *sdk.ClientSession
	proc *child.Process // nil for an HTTP server
}

// Exited is closed once a stdio server's process ended; nil for an HTTP
// server.
func (c *conn) Exited() <-chan struct{} {
	if c.proc == nil {
		return nil
	}
	return c.proc.Exited()
}

// ExitDescription says how the process ended (see exitDescription).
func (c *conn) ExitDescription() string { return c.exitDescription() }

// pid returns the stdio process's id, 0 for an HTTP server.
func (c *conn) pid() int {
	if c.proc == nil {
		return 0
	}
	return c.proc.PID()
}

// New returns a server for spec; Start connects it.
func New(ctx context.Context, spec Spec) *Server {
	if spec.CallTimeout <= 0 {
		spec.CallTimeout = 60 * time.Second
	}
	if spec.StartTimeout <= 0 {
		spec.StartTimeout = 30 * time.Second
	}
	if spec.StopTimeout <= 0 {
		spec.StopTimeout = 2 * time.Second
	}
	s := &Server{
		spec: spec,
		log:  zerolog.Ctx(ctx).With().Str("mcp_server", spec.Name).Logger(),
	}
	s.supervisor = restart.NewSupervisor[*conn](restart.Config{
		Kind: "MCP server", Name: spec.Name, Serves: "its tools",
		Policy: spec.Restart, NoRestart: spec.NoRestart,
		Errors: errs, Log: s.log,
	}, starter{s})
	s.client = sdk.NewClient(&sdk.Implementation{Name: "hookroom", Version: "1"}, &sdk.ClientOptions{
		// No roots: servers use what their configuration gives them.
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: s.toolsChanged,
	})
	return s
}

// Name returns the server's name.
func (s *Server) Name() string { return s.spec.Name }

// Start connects to the server and lists its tools, within StartTimeout.
// A stdio server that fails to start counts as a crash: it is started
// again with back-off (unless NoRestart) and the error says why this
// attempt failed. An HTTP server that fails is connected again at the
// next call.
func (s *Server) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.spec.StartTimeout)
	defer cancel()
	if !s.spec.stdio() {
		s.connectMu.Lock()
		defer s.connectMu.Unlock()
		_, err := s.connectHTTP(ctx)
		return err
	}
	c, err := s.spawn(ctx)
	if err != nil {
		if cerr := s.supervisor.Failed(err.Error()); cerr != nil {
			return cerr // closed meanwhile
		}
		return err
	}
	if err := s.supervisor.Serve(c); err != nil {
		return err
	}
	s.log.Info().Int("pid", c.pid()).Int("tools", len(s.Tools())).Msg("MCP server started")
	return nil
}

// Tools returns the tools the server offered when it last listed them
// (none before it first started).
func (s *Server) Tools() []Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tools)
}

// Version changes whenever the tool list changes.
func (s *Server) Version() uint64 { return s.version.Load() }

// Healthy reports whether the server is connected or (stdio) restarting;
// false once it was disabled or closed, or while an HTTP server has no
// session.
func (s *Server) Healthy() bool {
	return s.supervisor.State().Healthy()
}

// Disabled reports whether the stdio server was disabled for crashing
// repeatedly.
func (s *Server) Disabled() bool { return s.supervisor.State() == restart.Disabled }

// PID returns the process id of a running stdio server, 0 otherwise.
func (s *Server) PID() int {
	c, err := s.supervisor.Current()
	if err != nil {
		return 0
	}
	return c.pid()
}

// Starts returns how many processes a stdio server has started, for
// tests and diagnostics.
func (s *Server) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pids)
}

// setTools replaces the tool list, bumping the version when it changed.
func (s *Server) setToolsLocked(tools []Tool) {
	a, _ := json.Marshal(s.tools)
	b, _ := json.Marshal(tools)
	s.tools = tools
	if string(a) != string(b) {
		s.version.Add(1)
	}
}

// listTools lists every tool of sess. Tools whose names a model cannot
// call (1 to 64 characters of a-z A-Z 0-9 _ -) are left out with a
// warning.
func (s *Server) listTools(ctx context.Context, sess *sdk.ClientSession) ([]Tool, error) {
	var tools []Tool
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("failed to list the tools of MCP server %q: %w", s.spec.Name, err)
		}
		if !validToolName(t.Name) {
			s.log.Warn().Str("tool", t.Name).Msg("MCP server offers a tool whose name models cannot call (want 1 to 64 characters of a-z A-Z 0-9 _ -); it is left out")
			continue
		}
		tool := Tool{Server: s.spec.Name, Name: t.Name, Description: t.Description}
		if t.InputSchema != nil {
			raw, err := json.Marshal(t.InputSchema)
			if err == nil && len(raw) > 0 && raw[0] == '{' {
				tool.Parameters = raw
			}
		}
		tools = append(tools, tool)
	}
	return tools, nil
}

func validToolName(n string) bool {
	if len(n) == 0 || len(n) > 64 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// toolsChanged handles notifications/tools/list_changed: the list is
// fetched again in the background.
func (s *Server) toolsChanged(_ context.Context, req *sdk.ToolListChangedRequest) {
	sess := req.Session
	s.mu.Lock() // Close waits for s.wg after taking s.mu once
	c, err := s.supervisor.Current()
	current := err == nil && c.sess == sess
	if current {
		s.wg.Add(1)
	}
	s.mu.Unlock()
	if !current {
		return
	}
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), s.spec.StartTimeout)
		defer cancel()
		tools, err := s.listTools(ctx, sess)
		if err != nil {
			s.log.Warn().Err(err).Msg("failed to list the MCP server's tools after it said they changed; the previous list stays")
			return
		}
		s.mu.Lock()
		if c, err := s.supervisor.Current(); err == nil && c.sess == sess {
			s.setToolsLocked(tools)
		}
		s.mu.Unlock()
		s.log.Info().Int("tools", len(tools)).Msg("MCP server's tools changed")
	}()
}

// connectHTTP connects an HTTP server and lists its tools (connectMu
// held).
func (s *Server) connectHTTP(ctx context.Context) (*conn, error) {
	switch c, err := s.supervisor.Current(); {
	case err == nil:
		return c, nil
	case errors.Is(err, ErrClosed):
		return nil, err
	}
	hc := s.spec.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	if len(s.spec.Headers) > 0 {
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		cp := *hc
		cp.Transport = headerTransport{base: base, headers: s.spec.Headers}
		hc = &cp
	}
	sess, err := s.client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.spec.URL, HTTPClient: hc}, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to connect to MCP server %q at %s: %w", s.spec.Name, redactURL(s.spec.URL), err)
	}
	tools, err := s.listTools(ctx, sess)
	if err != nil {
		_ = sess.Close()
		return nil, err
	}
	s.mu.Lock()
	s.setToolsLocked(tools)
	s.mu.Unlock()
	c := &conn{sess: sess}
	if err := s.supervisor.Serve(c); err != nil {
		return nil, err // closed meanwhile; Serve closed the session
	}
	s.log.Info().Int("tools", len(tools)).Msg("connected to MCP server")
	return c, nil
}

// redactURL drops the user info and query of u for messages (they may hold
// credentials).
func redactURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			u = scheme + "://" + rest[at+1:]
		}
	}
	return u
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// live returns the connection to call on: the running one, or for an
// HTTP server a new one.
func (s *Server) live(ctx context.Context) (*conn, error) {
	c, err := s.supervisor.Current()
	switch {
	case err == nil:
		return c, nil
	case s.spec.stdio() || errors.Is(err, ErrClosed):
		return nil, err
	}
	s.connectMu.Lock()
	defer s.connectMu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, s.spec.StartTimeout)
	defer cancel()
	return s.connectHTTP(cctx)
}

// CallTool calls the server's tool name with the JSON object args and
// returns the text the model sees: the result's text content (other
// content is described in a line), or its structured content as JSON when
// it has no content. A result flagged isError is returned as an error
// carrying that text. The call is bounded by CallTimeout.
func (s *Server) CallTool(ctx context.Context, name string, args json.RawMessage) (string, error) {
	c, err := s.live(ctx)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	known := slices.ContainsFunc(s.tools, func(t Tool) bool { return t.Name == name })
	s.mu.Unlock()
	if !known {
		return "", fmt.Errorf("MCP server %q: %w %q", s.spec.Name, ErrUnknownTool, name)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	ctx, cancel := context.WithTimeout(ctx, s.spec.CallTimeout)
	defer cancel()
	res, err := c.sess.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil && c.proc == nil && errors.Is(err, sdk.ErrSessionMissing) {
		// The HTTP server forgot the session (it restarted): the call
		// never ran, so connect again and make it once more.
		s.drop(c)
		if c, err = s.live(ctx); err != nil {
			return "", err
		}
		res, err = c.sess.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	}
	if err != nil {
		return "", s.callError(ctx, c, name, err)
	}
	text := ResultText(res)
	if res.IsError {
		if text == "" {
			text = "the tool reported an error without saying why"
		}
		return "", errors.New(text)
	}
	return text, nil
}

// codeRejected is the JSON-RPC code the SDK gives failures of the
// transport (the request did not get an answer from the server).
const codeRejected = -32005

// callError describes a failed call; for an HTTP server a failure of the
// transport drops the session, so that the next call connects again.
func (s *Server) callError(ctx context.Context, c *conn, tool string, err error) error {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr) && rpcErr.Code != codeRejected:
		return fmt.Errorf("MCP server %q: tool %s failed: %w", s.spec.Name, tool, err)
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("MCP server %q did not answer tool %s in time (call_timeout %v): %w", s.spec.Name, tool, s.spec.CallTimeout, ctx.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("MCP server %q: tool %s: %w", s.spec.Name, tool, ctx.Err())
	}
	if c.proc != nil {
		select {
		case <-c.proc.Exited():
		case <-time.After(100 * time.Millisecond):
		}
		select {
		case <-c.proc.Exited():
			return fmt.Errorf("MCP server %q: tool %s: %w: %s", s.spec.Name, tool, ErrExited, c.exitDescription())
		default:
		}
		return fmt.Errorf("MCP server %q: tool %s: %w", s.spec.Name, tool, err)
	}
	s.drop(c)
	s.log.Warn().Err(err).Str("tool", tool).Msg("MCP server call failed; the next call connects again")
	return fmt.Errorf("MCP server %q: tool %s: %w", s.spec.Name, tool, err)
}

// drop takes an HTTP server's session c out of service.
func (s *Server) drop(c *conn) {
	if s.supervisor.Drop(c) {
		go func() { _ = c.sess.Close() }()
	}
}

// ResultText maps a tool result's content to the text the model sees.
func ResultText(res *sdk.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *sdk.EmbeddedResource:
			switch {
			case c.Resource == nil:
			case c.Resource.Text != "":
				parts = append(parts, c.Resource.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource %s, %s, %d bytes]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob)))
			}
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			return string(raw)
		}
	}
	return strings.Join(parts, "\n")
}

// Close disconnects the server; a stdio server's process is stopped (its
// stdin closed, then SIGTERM, then SIGKILL). Calls fail with ErrClosed
// afterwards. Close waits for the server's goroutines and is idempotent.
func (s *Server) Close() error {
	s.supervisor.Close()
	s.mu.Lock() // a toolsChanged that found the session current has added to s.wg
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// stop ends c: the session, then (stdio) the process.
func (s *Server) stop(c *conn) {
	done := make(chan struct{})
	go func() { _ = c.sess.Close(); close(done) }()
	if c.proc == nil {
		select {
		case <-done:
		case <-time.After(s.spec.StopTimeout):
		}
		return
	}
	c.proc.Stop(s.spec.StopTimeout, nil)
}

// starter restarts a stdio server's process for its supervisor.
type starter struct{ s *Server }

// Restart starts the process again after a crash, within StartTimeout.
func (st starter) Restart(ctx context.Context) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, st.s.spec.StartTimeout)
	defer cancel()
	return st.s.spawn(ctx)
}

// Restarted logs the restarted server.
func (st starter) Restarted(c *conn) {
	st.s.log.Info().Int("pid", c.pid()).Int("tools", len(st.s.Tools())).Msg("MCP server restarted")
}

// Stop ends c (see Server.stop).
func (st starter) Stop(c *conn) { st.s.stop(c) }

// spawn starts the stdio process, connects a session over its stdin and
// stdout and lists the tools (stored before it returns). On error nothing
// of the attempt keeps running.
func (s *Server) spawn(ctx context.Context) (*conn, error) {
	fail := func(format string, args ...any) (*conn, error) {
		return nil, fmt.Errorf("failed to start MCP server %q: %s", s.spec.Name, fmt.Sprintf(format, args...))
	}
	argv := slices.Clone(s.spec.Command)
	if !filepath.IsAbs(argv[0]) {
		lp, err := exec.LookPath(argv[0])
		if err != nil {
			return fail("program %q not found: %v", argv[0], err)
		}
		argv[0] = lp
	}
	if s.spec.Dir != "" {
		if err := os.MkdirAll(s.spec.Dir, 0o750); err != nil {
			return fail("failed to create its directory: %v", err)
		}
	}
	proc, err := child.Start(child.Spec{
		Argv: argv, Dir: s.spec.Dir, Env: s.spec.Env, Sandbox: s.spec.Sandbox, Unconfined: s.warnUnconfined,
		TailLines: 10, Stderr: s.stderrLine,
	})
	if err != nil {
		return fail("failed to run %s: %v", argv[0], err) // not the arguments: they may hold ${VAR} secrets
	}
	c := &conn{proc: proc}
	s.mu.Lock()
	s.pids = append(s.pids, proc.PID())
	s.mu.Unlock()

	abort := func(format string, args ...any) (*conn, error) {
		_ = proc.Stdin().Close()
		_ = proc.Stdout().Close()
		proc.Kill("failed its start-up")
		<-proc.Exited()
		msg := fmt.Sprintf(format, args...)
		if d := c.exitDescription(); d != "" {
			msg += " (it " + d + ")"
		}
		return fail("%s", msg)
	}
	transport := &sdk.IOTransport{Reader: proc.Stdout(), Writer: proc.Stdin()}
	sess, err := s.client.Connect(ctx, transport, nil)
	if err != nil {
		return abort("initialize failed: %v", err)
	}
	c.sess = sess
	tools, err := s.listTools(ctx, sess)
	if err != nil {
		_ = sess.Close()
		return abort("%v", err)
	}
	s.mu.Lock()
	s.setToolsLocked(tools)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		<-proc.Exited()
		_ = sess.Close()
	}()
	return c, nil
}

// warnUnconfined logs, once per server, that its process starts without
// its sandbox (the kernel has no Landlock).
func (s *Server) warnUnconfined() {
	if s.sandboxWarned.CompareAndSwap(false, true) {
		s.log.Warn().Msg("This kernel has no Landlock: the MCP server runs without its sandbox and can read every file hookroom's user can")
	}
}

// stderrLine logs a line of the process's stderr at debug level (package
// child cut it at 4 KiB and keeps the last lines for crash reports).
func (s *Server) stderrLine(_ int, line string, truncated bool) {
	if truncated {
		line += "…"
	}
	s.log.Debug().Str("stderr", line).Msg("MCP server stderr")
}

// exitDescription says how the process ended and what it last wrote to
// stderr.
func (c *conn) exitDescription() string {
	e := c.proc.Exit()
	d := "exited"
	if e.Err != nil {
		d = "exited: " + e.Err.Error()
	}
	if len(e.Stderr) > 0 {
		d += "; stderr: " + strings.Join(e.Stderr, " | ")
	}
	return d
}
