package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/restart"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
	"github.com/hookroom/hookroom/sandbox"
)

// errs are the failures shared with every supervised process.
var errs = restart.NewErrors("process plugin")

// Errors a hook or tool of a process plugin fails with; check with errors.Is.
var (
	// ErrUnavailable ("process plugin unavailable"): the plugin's process
	// is not running right now (it crashed and is waiting for its
	// restart). Calls fail at once.
	ErrUnavailable = errs.Unavailable
	// ErrDisabled: the plugin crashed too often and stays down until the
	// next reload. Wraps ErrUnavailable.
	ErrDisabled = errs.Disabled
	// ErrExited: the process exited while the call was in flight.
	ErrExited = errs.Exited
	// ErrClosed: the plugin was closed.
	ErrClosed = errs.Closed
	// ErrAPIVersion: the plugin speaks another protocol version.
	ErrAPIVersion = errors.New("unsupported plugin api_version")
	// ErrUnknownTool: CallTool named a tool the plugin did not declare.
	ErrUnknownTool = errors.New("unknown tool")
)

// Spec is everything needed to start one process plugin.
type Spec struct {
	// Name is the plugin's name in hookroom's configuration.
	Name string
	// Dir is the plugin directory. A relative program path in Command
	// ("./bin/geo") and arguments starting with "./" or "../" are resolved
	// against it.
	Dir string
	// Command is the program and its arguments. A program without a path
	// separator is looked up in the server's PATH.
	Command []string
	// Env is the process's complete environment, KEY=VALUE (already
	// filtered by the caller: nothing else is inherited).
	Env []string
	// StateDir is the plugin's state directory, created if missing; the
	// process runs in it.
	StateDir string
	// Settings are sent to the plugin in initialize.
	Settings hooks.Settings
	// Overrides are config.yaml's per-hook overrides; RegistryPlugin passes
	// them on to the registry, which applies them.
	Overrides map[string]hooks.Override
	// Supervision tunes restarts and the watchdog (zero: defaults).
	Supervision Supervision
	// Sandbox, when set, confines the process (package sandbox: Landlock
	// on Linux). On a kernel without Landlock the process runs unconfined
	// and a warning says so once per plugin.
	Sandbox *sandbox.Policy
	// Secrets are values the plugin may know (its secret settings, its
	// allowlisted environment variables) or must not learn, and that must
	// never reach hookroom's log through it: they are masked as
	// "[REDACTED]" in the plugin's stderr lines, its log messages and the
	// error messages it answers with. Values shorter than 6 bytes are
	// ignored.
	Secrets []string
	// Trace, when set, receives every protocol line in both directions,
	// each prefixed with "--> " (host to plugin) or "<-- " (plugin to
	// host): a debugging aid, like an LSP trace. Writes are serialized.
	Trace io.Writer
}

// Supervision tunes how a plugin's process is watched. Zero fields take the
// defaults named on each.
type Supervision struct {
	// StartTimeout bounds starting the process and its initialize
	// handshake, on top of Start's context (default 10 s).
	StartTimeout time.Duration
	// RestartDelay is the wait before the first restart after a crash; it
	// doubles with every further crash within CrashWindow (default 100 ms),
	// up to MaxRestartDelay (default 30 s).
	RestartDelay    time.Duration
	MaxRestartDelay time.Duration
	// CrashLimit crashes within CrashWindow disable the plugin until the
	// next reload (defaults 5 and 1 minute). A process killed because it
	// stopped answering counts as a crash.
	CrashLimit  int
	CrashWindow time.Duration
	// PingInterval is how often an idle process is probed with $/ping;
	// a hook that times out triggers a probe at once (default 30 s). A
	// probe unanswered within PingTimeout (default 2 s) kills the process.
	PingInterval time.Duration
	PingTimeout  time.Duration
	// MaxConsecutiveTimeouts calls in a row that pass their deadline kill
	// the process even if it answers pings (default 10).
	MaxConsecutiveTimeouts int
	// StopTimeout bounds each step of stopping the process: the shutdown
	// answer, the exit after stdin closed, the exit after SIGTERM (default
	// 2 s each); then it is killed.
	StopTimeout time.Duration
	// ToolTimeout bounds a tool call whose context has no deadline
	// (default 60 s).
	ToolTimeout time.Duration
	// StderrLinesPerSecond and StderrBurst bound how many stderr lines are
	// logged (defaults 50 and 200); the rest are counted and dropped.
	// Lines are cut at 4 KiB.
	StderrLinesPerSecond int
	StderrBurst          int
	// MaxLineBytes bounds one protocol message from the plugin (default
	// 16 MiB).
	MaxLineBytes int
}

func (s Supervision) withDefaults() Supervision {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&s.StartTimeout, 10*time.Second)
	def(&s.RestartDelay, 100*time.Millisecond)
	def(&s.MaxRestartDelay, 30*time.Second)
	defInt(&s.CrashLimit, 5)
	def(&s.CrashWindow, time.Minute)
	def(&s.PingInterval, 30*time.Second)
	def(&s.PingTimeout, 2*time.Second)
	defInt(&s.MaxConsecutiveTimeouts, 10)
	def(&s.StopTimeout, 2*time.Second)
	def(&s.ToolTimeout, 60*time.Second)
	defInt(&s.StderrLinesPerSecond, 50)
	defInt(&s.StderrBurst, 200)
	defInt(&s.MaxLineBytes, jsonrpc.DefaultMaxLineBytes)
	return s
}

// ToolDecl is a tool the plugin declared.
type ToolDecl struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object (may be empty).
	Parameters json.RawMessage
}

// Emitter emits custom events on behalf of a tool; every hook context
// (its Emit method) satisfies it.
type Emitter interface {
	Emit(ctx context.Context, event string, payload any) error
}

// ToolCall is one call of a plugin tool by an agent: the call as the
// tool hooks see it (hooks.ToolCall: the tool, the arguments the model
// passed, the agent, room, thread, requester and session) and what the
// plugin needs to serve it. It is the one tool-call type of both tiers:
// plugins.ToolCall is this type, a built-in plugin's tool gets it as it
// is, and a process plugin's tool gets it through tool.call (CallTool
// sends it as protocol.ToolCallParams, the Go SDK reads it back; the
// protocol package converts both ways).
type ToolCall struct {
	hooks.ToolCall
	// CorrelationID ties the call to the turn's hook runs in logs.
	CorrelationID string
	// Emit emits a custom event (observer mode) on behalf of the tool's
	// plugin; nil when the caller offers none (EmitEvent then reports
	// hooks.ErrNoService, a process plugin's host.emit is answered with
	// "service unavailable"). plugins.Set.CallTool fills it.
	Emit func(ctx context.Context, event string, payload any) error
}

// DecodeArguments unmarshals the call's arguments into v; no arguments
// leave v as it is.
func (c ToolCall) DecodeArguments(v any) error {
	if len(c.Arguments) == 0 {
		return nil
	}
	if err := json.Unmarshal(c.Arguments, v); err != nil {
		return fmt.Errorf("failed to decode tool arguments: %w", err)
	}
	return nil
}

// EmitEvent emits the custom event name with payload through c.Emit.
func (c ToolCall) EmitEvent(ctx context.Context, name string, payload any) error {
	if c.Emit == nil {
		return fmt.Errorf("failed to emit %q: %w", name, hooks.ErrNoService)
	}
	return c.Emit(ctx, name, payload)
}

// Plugin is a running process plugin and its supervisor. Its hooks and
// tools are those the process declared when it started; they stay the same
// across restarts (a restarted process that declares something else is
// logged, and calls for hooks it lost fail). All methods are safe for
// concurrent use.
type Plugin struct {
	spec Spec
	sup  Supervision
	log  zerolog.Logger

	decl  protocol.InitializeResult
	hooks []hooks.Hook
	tools []ToolDecl

	// supervisor keeps the running instance in service and restarts it
	// after a crash.
	supervisor *restart.Supervisor[*instance]

	mu      sync.Mutex     // guards spawned
	wg      sync.WaitGroup // every goroutine of the plugin and its instances
	nextInv atomic.Uint64
	// sandboxWarned: the missing-Landlock warning was logged.
	sandboxWarned atomic.Bool
	invMu         sync.Mutex
	invs          map[uint64]*invocation

	stderrLimit *rateLimiter
	spawned     []int // pids, for tests
	// mask replaces spec.Secrets in text the plugin wrote (nil: none).
	mask *strings.Replacer
}

// Start starts the plugin's process, sends initialize and reads its
// declaration. When it returns without error the process runs and Hooks and
// Tools are known. ctx bounds the start only (and provides the logger); the
// process runs until Close. A process that exits or fails the handshake is
// reported with its exit status and the last lines of its stderr.
func Start(ctx context.Context, spec Spec) (*Plugin, error) {
	if spec.Name == "" {
		return nil, errors.New("failed to start process plugin: no name")
	}
	if len(spec.Command) == 0 {
		return nil, fmt.Errorf("failed to start process plugin %q: empty command", spec.Name)
	}
	if spec.StateDir == "" {
		return nil, fmt.Errorf("failed to start process plugin %q: no state directory", spec.Name)
	}
	var err error
	if spec.Dir != "" {
		if spec.Dir, err = filepath.Abs(spec.Dir); err != nil {
			return nil, fmt.Errorf("failed to start process plugin %q: %w", spec.Name, err)
		}
	}
	if spec.StateDir, err = filepath.Abs(spec.StateDir); err != nil {
		return nil, fmt.Errorf("failed to start process plugin %q: %w", spec.Name, err)
	}
	if err := os.MkdirAll(spec.StateDir, 0o750); err != nil {
		return nil, fmt.Errorf("failed to start process plugin %q: failed to create state directory: %w", spec.Name, err)
	}
	sup := spec.Supervision.withDefaults()
	p := &Plugin{
		spec: spec,
		sup:  sup,
		log:  zerolog.Ctx(ctx).With().Str("plugin", spec.Name).Logger(),
		invs: map[uint64]*invocation{},
	}
	p.supervisor = restart.NewSupervisor[*instance](restart.Config{
		Kind: "process plugin", Name: spec.Name, Serves: "its hooks and tools",
		Policy: restart.Policy{
			Delay: sup.RestartDelay, MaxDelay: sup.MaxRestartDelay, Limit: sup.CrashLimit, Window: sup.CrashWindow,
		},
		Errors: errs, Log: p.log,
	}, starter{p})
	p.stderrLimit = newRateLimiter(sup.StderrLinesPerSecond, sup.StderrBurst)
	p.mask = secretMasker(spec.Secrets)
	inst, decl, err := p.spawn(ctx)
	if err != nil {
		p.wg.Wait()
		return nil, err
	}
	if err := p.declare(decl); err != nil {
		p.stopInstance(inst)
		p.wg.Wait()
		return nil, fmt.Errorf("failed to start process plugin %q: invalid declaration: %w", spec.Name, err)
	}
	_ = p.supervisor.Serve(inst) // not closed yet: nobody else has p
	p.watch(inst)
	ev := p.log.Info().Int("pid", inst.pid).Str("version", decl.Version).Int("hooks", len(p.hooks)).Int("tools", len(p.tools))
	if decl.Name != "" && decl.Name != spec.Name {
		ev = ev.Str("declared_name", decl.Name)
	}
	ev.Msg("process plugin started")
	return p, nil
}

// declare checks the plugin's declaration and builds its hooks and tools.
func (p *Plugin) declare(d *protocol.InitializeResult) error {
	var errs []error
	p.decl = *d
	for i, h := range d.Hooks {
		if h.Name == "" {
			errs = append(errs, fmt.Errorf("hook #%d (%s) has no name", i+1, h.Event))
			continue
		}
		opts := []hooks.Option{}
		if h.Priority != nil {
			opts = append(opts, hooks.Priority(*h.Priority))
		}
		if h.TimeoutMS < 0 {
			errs = append(errs, fmt.Errorf("hook %q: timeout_ms must be positive, got %d", h.Name, h.TimeoutMS))
			continue
		}
		if h.TimeoutMS > 0 {
			opts = append(opts, hooks.Timeout(time.Duration(h.TimeoutMS)*time.Millisecond))
		}
		if len(h.Agents) > 0 {
			names := make([]hooks.AgentName, len(h.Agents))
			for i, a := range h.Agents {
				names[i] = hooks.AgentName(a)
			}
			opts = append(opts, hooks.Agents(names...))
		}
		if len(h.Rooms) > 0 {
			rooms := make([]id.RoomID, len(h.Rooms))
			for i, r := range h.Rooms {
				rooms[i] = id.RoomID(r)
			}
			opts = append(opts, hooks.Rooms(rooms...))
		}
		if h.FailurePolicy != "" {
			fp, err := hooks.ParseFailurePolicy(h.FailurePolicy)
			if err != nil {
				errs = append(errs, fmt.Errorf("hook %q: %w", h.Name, err))
				continue
			}
			opts = append(opts, hooks.WithFailurePolicy(fp))
		}
		p.hooks = append(p.hooks, hooks.HandleAny(h.Event, h.Name, p.hookHandler(h.Event, h.Name), opts...))
	}
	seen := map[string]bool{}
	for i, t := range d.Tools {
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("tool #%d has no name", i+1))
			continue
		case seen[t.Name]:
			errs = append(errs, fmt.Errorf("tool %q declared twice", t.Name))
			continue
		case len(t.Parameters) > 0 && !json.Valid(t.Parameters):
			errs = append(errs, fmt.Errorf("tool %q: parameters are not valid JSON", t.Name))
			continue
		}
		seen[t.Name] = true
		p.tools = append(p.tools, ToolDecl{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return errors.Join(errs...)
}

// Name returns the plugin's name.
func (p *Plugin) Name() string { return p.spec.Name }

// Version returns the version the plugin declared.
func (p *Plugin) Version() string { return p.decl.Version }

// Hooks returns the declared hooks in declaration order, built with
// hooks.HandleAny: each invokes the hook in the process within the hook's
// deadline. Their names, priorities, timeouts, filters and failure
// policies are the plugin's declaration; config overrides are applied by the
// registry (see RegistryPlugin).
func (p *Plugin) Hooks() []hooks.Hook { return slices.Clone(p.hooks) }

// Tools returns the declared tools.
func (p *Plugin) Tools() []ToolDecl { return slices.Clone(p.tools) }

// RegistryPlugin returns the plugin's contribution to a hooks registry:
// its name, source, hooks, settings, state directory and overrides.
func (p *Plugin) RegistryPlugin(source string) hooks.Plugin {
	return hooks.Plugin{
		Name: p.spec.Name, Source: source, Hooks: p.Hooks(), Settings: p.spec.Settings,
		StateRoot: p.spec.StateDir, Overrides: p.spec.Overrides,
	}
}

// Healthy reports whether the process is running, or restarting after a
// crash; false once the plugin was disabled for crashing repeatedly or
// closed.
func (p *Plugin) Healthy() bool {
	return p.supervisor.State().Healthy()
}

// State names of Status.State.
const (
	StateRunning    = "running"    // the process runs and answers calls
	StateRestarting = "restarting" // it crashed; a restart is scheduled
	StateDisabled   = "disabled"   // it crashed too often; calls fail until a reload
	StateClosed     = "closed"     // Close was called
)

var stateNames = map[restart.State]string{
	restart.Running: StateRunning, restart.Restarting: StateRestarting, restart.Disabled: StateDisabled, restart.Closed: StateClosed,
}

// Status is a process plugin's supervision state, for metrics and the admin
// API.
type Status struct {
	// State is one of StateRunning, StateRestarting, StateDisabled and
	// StateClosed.
	State string `json:"state"`
	// Restarts counts the restarts after a crash since the plugin started.
	Restarts int `json:"restarts"`
	// PID is the running process's id (0 when none runs).
	PID int `json:"pid,omitempty"`
}

// Status reports the plugin's supervision state.
func (p *Plugin) Status() Status {
	state, restarts, inst := p.supervisor.Snapshot()
	st := Status{State: stateNames[state], Restarts: restarts}
	if inst != nil {
		st.PID = inst.pid
	}
	return st
}

// live returns the running instance, or why there is none.
func (p *Plugin) live() (*instance, error) { return p.supervisor.Current() }

// hookInvokeParams is protocol.HookInvokeParams with the context marshalled
// straight from the hook's copy.
type hookInvokeParams struct {
	Invocation uint64        `json:"invocation"`
	Hook       string        `json:"hook"`
	Event      string        `json:"event"`
	Context    hooks.Context `json:"context"`
	DeadlineMS int64         `json:"deadline_ms"`
}

func (p *Plugin) hookHandler(event, name string) hooks.AnyHandler {
	what := "hook " + name
	return func(ctx context.Context, c hooks.Context) error {
		inst, err := p.live()
		if err != nil {
			return err
		}
		inv := p.register(ctx, c, nil)
		defer p.unregister(inv)
		params := hookInvokeParams{Invocation: inv.id, Hook: name, Event: event, Context: c, DeadlineMS: deadlineMS(ctx)}
		raw, err := inst.conn.Call(ctx, protocol.MethodHookInvoke, params)
		if err != nil {
			return p.callError(ctx, inst, what, err)
		}
		inst.answered()
		res, err := protocol.DecodeHookInvokeResult(raw)
		if err != nil {
			return fmt.Errorf("process plugin %q: %s: failed to decode result: %w", p.spec.Name, what, err)
		}
		if err := protocol.Apply(c, res.Context); err != nil {
			return fmt.Errorf("process plugin %q: %s: %w", p.spec.Name, what, err)
		}
		return nil
	}
}

// CallTool runs the declared tool name in the process and returns its
// output. Without a deadline on ctx the call is bounded by
// Supervision.ToolTimeout. While it runs, the tool may call host.emit
// (served by call.Emit) and host.log.
func (p *Plugin) CallTool(ctx context.Context, name string, call ToolCall) (string, error) {
	if !slices.ContainsFunc(p.tools, func(t ToolDecl) bool { return t.Name == name }) {
		return "", fmt.Errorf("process plugin %q: %w %q", p.spec.Name, ErrUnknownTool, name)
	}
	inst, err := p.live()
	if err != nil {
		return "", err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.sup.ToolTimeout)
		defer cancel()
	}
	inv := p.register(ctx, nil, &call)
	defer p.unregister(inv)
	tc := call.ToolCall
	tc.Tool = name
	if len(tc.Arguments) == 0 {
		tc.Arguments = json.RawMessage("{}")
	}
	params := protocol.NewToolCallParams(inv.id, tc, call.CorrelationID, deadlineMS(ctx))
	raw, err := inst.conn.Call(ctx, protocol.MethodToolCall, params)
	if err != nil {
		return "", p.callError(ctx, inst, "tool "+name, err)
	}
	inst.answered()
	var res protocol.ToolCallResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", fmt.Errorf("process plugin %q: tool %s: failed to decode result: %w", p.spec.Name, name, err)
	}
	return res.Content, nil
}

func deadlineMS(ctx context.Context) int64 {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	ms := (time.Until(dl) + time.Millisecond - 1) / time.Millisecond
	return max(int64(ms), 1)
}

// callError turns a failed call into the error the hook or tool returns,
// and feeds the watchdog.
func (p *Plugin) callError(ctx context.Context, inst *instance, what string, err error) error {
	var re *jsonrpc.Error
	switch {
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		if errors.Is(err, context.DeadlineExceeded) {
			inst.timedOut()
		}
		return fmt.Errorf("process plugin %q did not answer %s in time: %w", p.spec.Name, what, err)
	case errors.As(err, &re):
		inst.answered()
		if p.mask != nil {
			// The message is the plugin's own text (an exception's).
			err = &jsonrpc.Error{Code: re.Code, Message: p.redact(re.Message)}
		}
		return fmt.Errorf("process plugin %q: %s failed: %w", p.spec.Name, what, err)
	case errors.Is(err, jsonrpc.ErrClosed):
		// The process died under the call: say how, if it is known in time.
		select {
		case <-inst.exited:
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		return fmt.Errorf("process plugin %q: %s: %w: %s", p.spec.Name, what, ErrExited, inst.exitDescription())
	case errors.Is(err, context.DeadlineExceeded):
		inst.timedOut()
		return fmt.Errorf("process plugin %q did not take %s in time (not reading its stdin?): %w", p.spec.Name, what, err)
	}
	return fmt.Errorf("process plugin %q: %s: %w", p.spec.Name, what, err)
}

// Close stops the process: a shutdown request, then closing its stdin,
// then SIGTERM, then SIGKILL, each step bounded by StopTimeout. Calls in
// flight fail; later calls fail with ErrClosed. Close waits for every
// goroutine of the plugin and is idempotent.
func (p *Plugin) Close() error {
	p.supervisor.Close()
	p.wg.Wait()
	return nil
}

// starter starts and stops the plugin's instances for its supervisor.
type starter struct{ p *Plugin }

// Restart starts a new process after a crash. A process that declares
// other hooks or tools than at start is logged; the start's declaration
// stays in service.
func (s starter) Restart(ctx context.Context) (*instance, error) {
	inst, decl, err := s.p.spawn(ctx)
	if err != nil {
		return nil, err
	}
	if !sameDeclaration(&s.p.decl, decl) {
		s.p.log.Warn().Msg("restarted process plugin declares other hooks or tools than at start; the start's declaration stays in service until the next reload")
	}
	return inst, nil
}

// Restarted starts watching a restarted instance in service.
func (s starter) Restarted(inst *instance) {
	s.p.watch(inst)
	s.p.log.Info().Int("pid", inst.pid).Msg("process plugin restarted")
}

// Stop stops inst (see Plugin.stopInstance).
func (s starter) Stop(inst *instance) { s.p.stopInstance(inst) }

func sameDeclaration(a, b *protocol.InitializeResult) bool {
	ja, _ := json.Marshal(struct {
		H []protocol.HookDecl
		T []protocol.ToolDecl
	}{a.Hooks, a.Tools})
	jb, _ := json.Marshal(struct {
		H []protocol.HookDecl
		T []protocol.ToolDecl
	}{b.Hooks, b.Tools})
	return string(ja) == string(jb)
}

// describeCommand is the command line for logs, shortened.
func (p *Plugin) describeCommand() string {
	s := strings.Join(p.spec.Command, " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
