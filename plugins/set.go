package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process"
)

// ErrUnknownTool is returned by Set.CallTool for a tool no plugin provides.
var ErrUnknownTool = errors.New("unknown tool")

// Set is the loaded plugins of one configuration, in config order. It is
// immutable once Load returned it; a reload builds a new set from the
// previous one. Close it once no registry built from it is in service.
type Set struct {
	plugins  []*loaded
	tools    []PluginTool
	warnings []string
	allow    map[hooks.AgentName][]string
	conc     int
	depth    int

	closeOnce sync.Once
	closeErr  error
}

// loaded is one plugin of a set.
type loaded struct {
	name        string
	kind        Kind
	source      string
	index       int // position in cfg.Plugins
	entry       config.PluginEntry
	dir         string
	builtin     Builtin
	manifest    *Manifest
	settings    hooks.Settings
	overrides   map[string]hooks.Override // as configured
	applied     map[string]hooks.Override // those naming a declared hook
	stateDir    string
	spec        ProcessSpec
	fingerprint string
	warnings    []string

	inst   *shared
	hooks  []hooks.Hook
	tools  []Tool
	reused bool
}

func (p *loaded) path() string { return JoinIndex("plugins", p.index) }

// shared is an instance used by one or more sets; it is closed when the
// last of them lets go.
type shared struct {
	inst Instance
	mu   sync.Mutex
	refs int
}

func newShared(inst Instance) *shared { return &shared{inst: inst, refs: 1} }

func (s *shared) acquire() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

// release drops one reference and closes the instance with the last one.
func (s *shared) release() error {
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if !last {
		return nil
	}
	if c, ok := s.inst.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (s *shared) healthy() bool {
	if h, ok := s.inst.(HealthReporter); ok {
		return h.Healthy()
	}
	return true
}

// find returns the plugin called name, or nil.
func (s *Set) find(name string) *loaded {
	if s == nil {
		return nil
	}
	for _, p := range s.plugins {
		if p.name == name {
			return p
		}
	}
	return nil
}

// PluginTool is a tool together with the plugin that provides it.
type PluginTool struct {
	Plugin string
	Tool
}

// Info describes one loaded plugin, for listings and the admin API.
type Info struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	// Source is the entry as written in config.yaml: "builtin:<name>" or
	// the plugin directory's path.
	Source string `json:"source"`
	// Entry is the index of the entry in config.yaml's plugins list.
	Entry int `json:"entry"`
	// Dir is the plugin directory ("" for a "builtin:" entry).
	Dir string `json:"dir,omitempty"`
	// Builtin is the built-in plugin's registered name (built-ins only).
	Builtin     string   `json:"builtin,omitempty"`
	Version     string   `json:"version,omitempty"`
	Description string   `json:"description,omitempty"`
	StateDir    string   `json:"state_dir"`
	Hooks       []string `json:"hooks,omitempty"`
	Tools       []string `json:"tools,omitempty"`
	// Reused is set when the instance was carried over from the previous
	// set unchanged.
	Reused bool `json:"reused,omitempty"`
	// Process is a process plugin's supervision state (state, restarts,
	// pid) when Plugins was called; nil for other kinds.
	Process *process.Status `json:"process,omitempty"`
}

// Plugins describes the set's plugins in config order.
func (s *Set) Plugins() []Info {
	out := make([]Info, 0, len(s.plugins))
	for _, p := range s.plugins {
		info := Info{
			Name: p.name, Kind: p.kind, Source: p.source, Entry: p.index, Dir: p.dir,
			StateDir: p.stateDir, Reused: p.reused,
		}
		if p.kind == KindBuiltin {
			info.Builtin, info.Description = p.builtin.Name, p.builtin.Description
		}
		if p.manifest != nil {
			info.Version = p.manifest.Version
			if p.manifest.Description != "" {
				info.Description = p.manifest.Description
			}
		}
		for _, h := range p.hooks {
			info.Hooks = append(info.Hooks, h.Name())
		}
		for _, t := range p.tools {
			info.Tools = append(info.Tools, t.Name)
		}
		if p.inst != nil {
			if pp, ok := Process(p.inst.inst); ok {
				st := pp.Status()
				info.Process = &st
			}
		}
		out = append(out, info)
	}
	return out
}

// Instance returns the instance of the plugin called name.
func (s *Set) Instance(name string) (Instance, bool) {
	if p := s.find(name); p != nil && p.inst != nil {
		return p.inst.inst, true
	}
	return nil, false
}

// HookPlugins returns the set's contribution to a hook registry, in config
// order, with config.yaml's overrides (those naming a hook the plugin
// declares; the others are in Warnings).
func (s *Set) HookPlugins() []hooks.Plugin {
	out := make([]hooks.Plugin, 0, len(s.plugins))
	for _, p := range s.plugins {
		out = append(out, hooks.Plugin{
			Name: p.name, Source: p.source, Hooks: slices.Clone(p.hooks),
			Settings: p.settings, StateRoot: p.stateDir, Overrides: maps.Clone(p.applied),
		})
	}
	return out
}

// Registry builds a hook registry from the set, in config order. From
// config.yaml it takes, unless opts sets them: CollectorConcurrency and
// MaxDepth (hooks.collector_concurrency, hooks.max_depth) when zero, and
// Allowlist (agents.<name>.plugins) when nil. Services and Previous always
// come from the caller. Load has already checked that the registry builds,
// so an error here comes from opts. Problems that do not stop the registry
// are in Warnings (with file:line), not in the registry's own Warnings.
func (s *Set) Registry(opts hooks.Options) (*hooks.Registry, error) {
	if opts.CollectorConcurrency == 0 {
		opts.CollectorConcurrency = s.conc
	}
	if opts.MaxDepth == 0 {
		opts.MaxDepth = s.depth
	}
	if opts.Allowlist == nil {
		opts.Allowlist = s.allow
	}
	reg, err := hooks.NewRegistry(s.HookPlugins(), opts)
	if err != nil {
		return nil, fmt.Errorf("failed to build hook registry: %w", err)
	}
	return reg, nil
}

// Warnings returns the problems that do not stop loading, each naming
// config.yaml's file and line: overrides naming no hook of their plugin,
// agents' plugin allowlists naming no loaded plugin, environment variables
// a manifest asks for but config.yaml does not allow.
func (s *Set) Warnings() []string { return slices.Clone(s.warnings) }

// Tools returns every plugin tool, in config order, then declaration order.
func (s *Set) Tools() []PluginTool { return slices.Clone(s.tools) }

// Tool returns the tool called name.
func (s *Set) Tool(name string) (PluginTool, bool) {
	for _, t := range s.tools {
		if t.Name == name {
			return t, true
		}
	}
	return PluginTool{}, false
}

// CallTool runs the tool called name. When call.Emit is nil and reg is not,
// the tool's custom events are emitted on reg on behalf of its plugin.
func (s *Set) CallTool(ctx context.Context, reg *hooks.Registry, name string, call ToolCall) (string, error) {
	t, ok := s.Tool(name)
	if !ok {
		return "", fmt.Errorf("failed to call tool %q: %w", name, ErrUnknownTool)
	}
	if call.Emit == nil && reg != nil {
		call.Emit = EmitFunc(reg, t.Plugin, call)
	}
	return t.Call(ctx, call)
}

// EmitFunc returns a ToolCall.Emit that emits custom events on reg on
// behalf of plugin, with the call's agent, room, thread and requester. The
// events run in observer mode and count towards the recursion limit of the
// causal chain ctx carries.
func EmitFunc(reg *hooks.Registry, plugin string, call ToolCall) func(ctx context.Context, event string, payload any) error {
	return func(ctx context.Context, event string, payload any) error {
		ev, err := hooks.NewCustomEvent(event)
		if err != nil {
			return fmt.Errorf("failed to emit custom event: %w", err)
		}
		raw, err := json.Marshal(payload)
		if err != nil {
			return fmt.Errorf("failed to emit %q: failed to marshal payload: %w", event, err)
		}
		c := &hooks.CustomEventContext{
			Payload: raw, SourcePlugin: plugin, Agent: call.Agent,
			RoomID: call.RoomID, ThreadID: call.ThreadID, SenderID: call.RequesterID,
		}
		c.CorrelationID = call.CorrelationID
		return hooks.Emit(ctx, reg, ev, c)
	}
}

// Changes describes how s differs from prev, for config:reloaded and the
// reply to a reload request: "added x", "restarted y" (a new instance
// replaced the old one), "reconfigured z" (same instance, other hook
// overrides), "removed w", and "reordered plugins". A nil prev counts as
// empty.
func (s *Set) Changes(prev *Set) []string {
	var out []string
	for _, p := range s.plugins {
		old := prev.find(p.name)
		switch {
		case old == nil:
			out = append(out, "added "+p.name)
		case old.inst != p.inst:
			out = append(out, "restarted "+p.name)
		case !reflect.DeepEqual(old.overrides, p.overrides):
			out = append(out, "reconfigured "+p.name)
		}
	}
	if prev != nil {
		var before, after []string
		for _, p := range prev.plugins {
			if s.find(p.name) == nil {
				out = append(out, "removed "+p.name)
			} else {
				before = append(before, p.name)
			}
		}
		for _, p := range s.plugins {
			if prev.find(p.name) != nil {
				after = append(after, p.name)
			}
		}
		if !slices.Equal(before, after) {
			out = append(out, "reordered plugins")
		}
	}
	return out
}

// Close releases the set's instances; an instance no other set uses is
// closed (process plugins stop). Close is idempotent and returns the
// errors of the instances it closed.
func (s *Set) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, p := range s.plugins {
			if p.inst == nil {
				continue
			}
			if err := p.inst.release(); err != nil {
				errs = append(errs, fmt.Errorf("failed to close plugin %q: %w", p.name, err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// overrideWarnings splits each plugin's overrides into those naming a
// declared hook (applied) and warnings for the others.
func (s *Set) overrideWarnings(cfg *config.Config) {
	for _, p := range s.plugins {
		s.warnings = append(s.warnings, p.warnings...)
		declared := map[string]bool{}
		var names []string
		for _, h := range p.hooks {
			declared[h.Name()] = true
			names = append(names, h.Name())
		}
		p.applied = map[string]hooks.Override{}
		keys := slices.Sorted(maps.Keys(p.overrides))
		for _, name := range keys {
			if declared[name] {
				p.applied[name] = p.overrides[name]
				continue
			}
			have := "it declares no hooks"
			if len(names) > 0 {
				have = "its hooks: " + strings.Join(names, ", ")
			}
			s.warnings = append(s.warnings, cfg.Errorf(JoinKey(JoinKey(p.path(), "hooks"), name),
				"plugin %q declares no hook %q; the override is ignored (%s)", p.name, name, have).Error())
		}
	}
}

// allowlist builds the per-agent plugin allowlist from config.yaml and
// warns about names that match no loaded plugin.
func (s *Set) allowlist(cfg *config.Config) {
	for _, agent := range cfg.AgentNames() {
		a := cfg.Agents[agent]
		if a.Plugins == nil {
			continue
		}
		if s.allow == nil {
			s.allow = map[hooks.AgentName][]string{}
		}
		s.allow[hooks.AgentName(agent)] = append([]string{}, a.Plugins...)
		for j, name := range a.Plugins {
			if s.find(name) == nil {
				s.warnings = append(s.warnings, cfg.Errorf(JoinIndex(JoinKey(JoinKey("agents", agent), "plugins"), j),
					"agent %q allows plugin %q, which is not loaded", agent, name).Error())
			}
		}
	}
}

// mapRegistryErrors points the registry's load errors at config.yaml.
func (s *Set) mapRegistryErrors(cfg *config.Config, err error) config.ErrorList {
	var out config.ErrorList
	for _, e := range splitErrors(err) {
		var le *hooks.LoadError
		if !errors.As(e, &le) {
			out = append(out, cfg.Errorf("hooks", "%v", e))
			continue
		}
		p := s.find(le.Plugin)
		if p == nil {
			out = append(out, cfg.Errorf("plugins", "%v", le))
			continue
		}
		path := p.path()
		if _, ok := p.overrides[le.Hook]; ok && le.Hook != "" {
			path = JoinKey(JoinKey(path, "hooks"), le.Hook)
		}
		if le.Hook == "" {
			out = append(out, cfg.Errorf(path, "plugin %q: %v", le.Plugin, le.Err))
		} else {
			out = append(out, cfg.Errorf(path, "plugin %q: hook %q: %v", le.Plugin, le.Hook, le.Err))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Line < out[j].Line })
	return out
}
