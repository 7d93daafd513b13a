package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// Main serves p as a process plugin on stdin and stdout and exits: with
// status 0 when the host shut it down, 1 on error. Call it from main().
func Main(p Plugin) {
	if err := Serve(p); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", p.Name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Serve speaks hookroom's plugin protocol on stdin and stdout until the host
// shuts the plugin down or closes stdin. It points os.Stdout at stderr
// first, so a stray fmt.Println cannot corrupt the protocol stream (stderr
// goes to the server log).
func Serve(p Plugin) error {
	if p.Procs > 0 {
		runtime.GOMAXPROCS(p.Procs)
	} else if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	out := os.Stdout
	os.Stdout = os.Stderr
	return ServeStreams(context.Background(), p, stdin(), out)
}

// ServeStreams is Serve on any pair of streams (tests, sockets). It returns
// when r ends, the host sent shutdown, or ctx ends.
func ServeStreams(ctx context.Context, p Plugin, r io.Reader, w io.Writer) error {
	s := &server{p: p, tools: map[string]plugins.Tool{}, hooks: map[string]*hookEntry{}, shutdown: make(chan struct{}), started: make(chan struct{})}
	for _, t := range p.Tools {
		s.tools[t.Name] = t
	}
	stderr := zerolog.New(os.Stderr).With().Timestamp().Str("plugin", p.Name).Logger()
	s.conn = jsonrpc.NewConn(r, w, s, jsonrpc.Options{MaxInFlight: 1024, Logger: &stderr})
	s.services = hooks.Services{Sender: rpcServices{s}, State: rpcServices{s}, Events: rpcServices{s}, Attachments: rpcServices{s}}
	close(s.started)
	select {
	case <-s.conn.Done():
	case <-s.shutdown:
	case <-ctx.Done():
	}
	// Give the answer to shutdown a moment to leave before closing.
	_ = s.conn.Close()
	return nil
}

type hookEntry struct {
	hook hooks.Hook
	run  runner
	// pool holds registries of just this hook, one per concurrent call.
	pool sync.Pool
}

// registry returns a registry of just e's hook, which runs it with its
// context helpers bound: settings, state directory, logger, and the host
// services over RPC. The host applies the hook's failure policy and
// deadline, so locally it fails open and the host's deadline (on the
// call's context) is the one that ends it. Put it back into e.pool after a
// call that ran to its end (a call cut short by its context may still
// record statistics).
func (s *server) registry(e *hookEntry, name string, settings hooks.Settings, stateDir string) (*hooks.Registry, error) {
	if reg, ok := e.pool.Get().(*hooks.Registry); ok {
		return reg, nil
	}
	return hooks.NewRegistry([]hooks.Plugin{{
		Name: name, Hooks: []hooks.Hook{e.hook}, Settings: settings, StateRoot: stateDir,
		Overrides: map[string]hooks.Override{e.hook.Name(): {Timeout: &hookTimeout, FailurePolicy: &failOpen}},
	}}, hooks.Options{Services: s.services, Observer: runObserver{}})
}

type server struct {
	p        Plugin
	conn     *jsonrpc.Conn
	services hooks.Services
	// started is closed once conn and services are set.
	started chan struct{}

	mu        sync.RWMutex
	ready     bool
	name      string
	settings  hooks.Settings
	stateDir  string
	hooks     map[string]*hookEntry
	tools     map[string]plugins.Tool
	log       zerolog.Logger // to host.log, no invocation
	shutdown  chan struct{}
	closeOnce sync.Once
}

func (s *server) ServeRPC(ctx context.Context, req *jsonrpc.Request) (any, error) {
	<-s.started // a request can arrive before NewConn has returned
	switch req.Method {
	case protocol.MethodInitialize:
		return s.initialize(ctx, req.Params)
	case protocol.MethodPing:
		return struct{}{}, nil
	case protocol.MethodShutdown:
		s.closeOnce.Do(func() {
			go func() {
				// Let the answer go out first.
				time.Sleep(10 * time.Millisecond)
				close(s.shutdown)
			}()
		})
		return struct{}{}, nil
	case protocol.MethodHookInvoke:
		params, err := protocol.DecodeHookInvokeParams(req.Params)
		if err != nil {
			return nil, jsonrpc.InvalidParams(req.Method, err)
		}
		return s.invokeHook(ctx, &params)
	case protocol.MethodToolCall:
		var params protocol.ToolCallParams
		if err := json.Unmarshal(req.Params, &params); err != nil {
			return nil, jsonrpc.InvalidParams(req.Method, err)
		}
		return s.callTool(ctx, &params)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

func (s *server) initialize(ctx context.Context, raw json.RawMessage) (any, error) {
	var params protocol.InitializeParams
	if err := json.Unmarshal(raw, &params); err != nil {
		return nil, jsonrpc.InvalidParams(protocol.MethodInitialize, err)
	}
	if params.APIVersion != protocol.APIVersion {
		return nil, jsonrpc.Errorf(protocol.CodeAPIVersion, "this plugin speaks api_version %d, the host asked for %d", protocol.APIVersion, params.APIVersion)
	}
	name := params.Plugin
	if name == "" {
		name = s.p.Name
	}
	settings, err := settingsFrom(params.Settings)
	if err != nil {
		return nil, jsonrpc.InvalidParams(protocol.MethodInitialize, err)
	}
	decls, tools, err := s.p.declare(name)
	if err != nil {
		return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "invalid hooks: %v", err)
	}
	entries := map[string]*hookEntry{}
	for _, h := range s.p.Hooks {
		run, err := runnerFor(h.Event())
		if err != nil {
			return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "hook %q: %v", h.Name(), err)
		}
		entries[h.Name()] = &hookEntry{hook: h, run: run}
	}
	log := zerolog.New(&hostLogWriter{s: s}).With().Str("plugin", name).Logger()
	if s.p.Setup != nil {
		env := plugins.Env{Name: name, Settings: settings, StateDir: params.StateDir, Logger: &log}
		if err := s.p.Setup(ctx, env); err != nil {
			return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "setup failed: %v", err)
		}
	}
	s.mu.Lock()
	s.ready, s.name, s.settings, s.stateDir, s.hooks, s.log = true, name, settings, params.StateDir, entries, log
	s.mu.Unlock()
	return protocol.InitializeResult{
		APIVersion: protocol.APIVersion, Name: s.p.Name, Version: s.p.Version, Hooks: decls, Tools: tools,
	}, nil
}

// call is one hook or tool invocation in flight, found through the
// context by the RPC services and Emit.
type call struct {
	s   *server
	inv uint64
	// How the call's hook run ended, as the engine's run observer saw it.
	mu      sync.Mutex
	outcome hooks.Outcome
	err     error
}

// runObserver hands the engine's account of each hook run to the call it
// belongs to (found in the emission's context).
type runObserver struct{}

var _ hooks.RunObserver = runObserver{}

func (runObserver) HookRan(ctx context.Context, r hooks.HookRun) {
	if cl := callFrom(ctx); cl != nil {
		cl.mu.Lock()
		cl.outcome, cl.err = r.Outcome, r.Err
		cl.mu.Unlock()
	}
}

type callKey struct{}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

func (c *call) emit(ctx context.Context, name string, payload any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("failed to emit %q: failed to marshal payload: %w", name, err)
	}
	_, err = c.s.conn.Call(ctx, protocol.MethodEmit, protocol.EmitParams{Invocation: c.inv, Event: name, Payload: raw})
	if err != nil {
		return fmt.Errorf("failed to emit %q: %w", name, remoteError(err))
	}
	return nil
}

// withDeadline bounds ctx by the host's deadline_ms.
func withDeadline(ctx context.Context, ms int64) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
}

// hookTimeout is the local deadline of a hook: the host's deadline_ms (on
// the context) is what counts, so the local one only has to be longer.
var hookTimeout = 24 * time.Hour

var failOpen = hooks.FailOpen

func (s *server) invokeHook(ctx context.Context, params *protocol.HookInvokeParams) (any, error) {
	s.mu.RLock()
	e, ready := s.hooks[params.Hook], s.ready
	name, settings, stateDir := s.name, s.settings, s.stateDir
	s.mu.RUnlock()
	if !ready {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "hook.invoke before initialize")
	}
	if e == nil {
		return nil, jsonrpc.Errorf(protocol.CodeUnknownHook, "this plugin has no hook %q", params.Hook)
	}
	ctx, cancel := withDeadline(ctx, params.DeadlineMS)
	defer cancel()
	cl := &call{s: s, inv: params.Invocation}
	ctx = context.WithValue(ctx, callKey{}, cl)
	log := zerolog.New(&hostLogWriter{s: s, call: cl})
	ctx = log.WithContext(ctx)
	reg, err := s.registry(e, name, settings, stateDir)
	if err != nil {
		return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "failed to prepare hook: %v", err)
	}
	res, err := e.run(ctx, reg, params.Context)
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return nil, jsonrpc.Errorf(protocol.CodeDeadline, "hook %s passed its deadline", params.Hook)
		case errors.Is(err, context.Canceled):
			return nil, jsonrpc.Errorf(protocol.CodeRequestCancelled, "hook %s was cancelled", params.Hook)
		}
		return nil, err
	}
	e.pool.Put(reg)
	cl.mu.Lock()
	outcome, runErr := cl.outcome, cl.err
	cl.mu.Unlock()
	switch outcome {
	case hooks.OutcomePanic:
		var pe *hooks.PanicError
		if errors.As(runErr, &pe) {
			// The stack stays in the plugin's process: send it to the host log.
			log.Error().Bytes("stack", pe.Stack).Msg(runErr.Error())
		}
		return nil, jsonrpc.Errorf(protocol.CodeHookPanicked, "%s", failureText(runErr, "hook panicked"))
	case hooks.OutcomeTimeout:
		return nil, jsonrpc.Errorf(protocol.CodeDeadline, "%s", failureText(runErr, "hook passed its deadline"))
	case hooks.OutcomeError:
		return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "%s", failureText(runErr, "hook failed"))
	}
	return protocol.HookInvokeResult{Context: res}, nil
}

func failureText(err error, def string) string {
	if err != nil {
		return err.Error()
	}
	return def
}

func (s *server) callTool(ctx context.Context, params *protocol.ToolCallParams) (any, error) {
	s.mu.RLock()
	t, ok := s.tools[params.Tool]
	ready := s.ready
	s.mu.RUnlock()
	if !ready {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "tool.call before initialize")
	}
	if !ok {
		return nil, jsonrpc.Errorf(protocol.CodeUnknownHook, "this plugin has no tool %q", params.Tool)
	}
	ctx, cancel := withDeadline(ctx, params.DeadlineMS)
	defer cancel()
	cl := &call{s: s, inv: params.Invocation}
	ctx = context.WithValue(ctx, callKey{}, cl)
	log := zerolog.New(&hostLogWriter{s: s, call: cl}).With().Str("tool", params.Tool).Logger()
	ctx = log.WithContext(ctx)
	tc := plugins.ToolCall{ToolCall: params.Call(), CorrelationID: params.CorrelationID, Emit: cl.emit}
	out, err := t.Call(ctx, tc)
	if err != nil {
		var pe *hooks.PanicError
		if errors.As(err, &pe) {
			log.Error().Bytes("stack", pe.Stack).Msg(pe.Error())
			return nil, jsonrpc.Errorf(protocol.CodeHookPanicked, "tool %s panicked: %v", params.Tool, pe.Value)
		}
		if ctx.Err() != nil {
			return nil, jsonrpc.Errorf(protocol.CodeDeadline, "tool %s: %v", params.Tool, err)
		}
		return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "%v", err)
	}
	return protocol.ToolCallResult{Content: out}, nil
}
