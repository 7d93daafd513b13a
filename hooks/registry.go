package hooks

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"maunium.net/go/mautrix/id"
)

// DefaultCollectorConcurrency bounds how many collector hooks of one
// emission run at once.
const DefaultCollectorConcurrency = 64

// Override is what config.yaml may change about one hook. Nil fields keep
// the value declared in code.
type Override struct {
	Enabled       *bool
	Priority      *int
	Timeout       *time.Duration
	FailurePolicy *FailurePolicy
}

// Plugin is one plugin's contribution to a registry, in config order.
type Plugin struct {
	// Name is unique among the plugins of a registry.
	Name string
	// Source says where the plugin comes from, for introspection
	// ("builtin:audit", "./plugins/geo").
	Source string
	// Hooks in declaration order.
	Hooks []Hook
	// Settings are exposed to every hook of the plugin.
	Settings Settings
	// StateRoot is the plugin's state directory (created on first use).
	StateRoot string
	// Overrides from config.yaml, by hook name.
	Overrides map[string]Override
}

// Options configure a registry.
type Options struct {
	// Services are the host services bound to hook contexts.
	Services Services
	// CollectorConcurrency bounds concurrent collector hooks per emission
	// (default 64).
	CollectorConcurrency int
	// MaxDepth bounds nested emissions of one causal chain (default 3).
	MaxDepth int
	// Allowlist restricts, per agent, which plugins' hooks run for that
	// agent's contexts. An agent without an entry runs every plugin.
	Allowlist map[AgentName][]string
	// Previous is the registry this one replaces: run statistics of hooks
	// that keep their plugin, name and event carry over.
	Previous *Registry
	// Observer, when set, is told about every hook run.
	Observer RunObserver
}

type pluginInfo struct {
	name      string
	source    string
	settings  Settings
	stateRoot string
	order     int
}

// registered is a hook in service: its effective configuration and stats.
type registered struct {
	plugin   *pluginInfo
	name     string
	event    *eventInfo
	priority int
	timeout  time.Duration
	agents   []AgentName
	rooms    []id.RoomID
	policy   FailurePolicy
	inline   bool // run on the emitting goroutine (Inline)
	fn       any
	decl     int
	stats    *hookStats
}

func (h *registered) filtered() bool { return len(h.agents) > 0 || len(h.rooms) > 0 }

type eventHooks struct {
	hooks    []*registered
	filtered bool // some hook has an agents= or rooms= filter
}

// Registry is an immutable snapshot of every hook in service. A reload
// builds a new registry and swaps it in (see Live); emissions in flight
// finish on the snapshot they started with.
type Registry struct {
	builtin   []*eventHooks // by eventInfo.index
	custom    map[string]*eventHooks
	allow     map[AgentName]map[string]bool
	services  Services
	observer  RunObserver
	conc      int
	maxDepth  int
	plugins   []Plugin
	opts      Options
	warnings  []string
	all       []*registered
	hasCustom bool
}

// LoadError is one problem found while building a registry.
type LoadError struct {
	Plugin string
	Hook   string // "" for plugin-level problems
	Err    error
}

func (e *LoadError) Error() string {
	if e.Hook == "" {
		return fmt.Sprintf("plugin %q: %v", e.Plugin, e.Err)
	}
	return fmt.Sprintf("plugin %q, hook %q: %v", e.Plugin, e.Hook, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// NewRegistry builds a registry from plugins in config order. Hooks run by
// ascending priority, then plugin order, then declaration order; config
// overrides win over the values in code. Every problem is reported (joined
// *LoadError values): a duplicate plugin or hook name, an invalid event
// name, a nil handler, a filter that can never match its event, a failure
// policy on a non-gate event. Overrides naming no hook are warnings (see Warnings).
// Invalid options (a negative concurrency or depth) are plain errors. The
// registry copies what it keeps of plugins and opts: later changes to the
// caller's slices and maps do not reach it.
func NewRegistry(plugins []Plugin, opts Options) (*Registry, error) {
	r := &Registry{
		builtin:  make([]*eventHooks, len(builtins)+1),
		custom:   map[string]*eventHooks{},
		services: opts.Services,
		observer: opts.Observer,
		conc:     cmp.Or(opts.CollectorConcurrency, DefaultCollectorConcurrency),
		maxDepth: cmp.Or(opts.MaxDepth, DefaultMaxDepth),
		plugins:  clonePlugins(plugins),
		opts:     opts,
	}
	// The registry owns everything it keeps: the caller may reuse its
	// slices and maps, and Without rebuilds from these copies.
	plugins = r.plugins
	r.opts.Previous = nil
	r.opts.Allowlist = cloneAllowlist(opts.Allowlist)
	var errs []error
	if opts.CollectorConcurrency < 0 {
		errs = append(errs, fmt.Errorf("collector concurrency must be positive, got %d", opts.CollectorConcurrency))
	}
	if opts.MaxDepth < 0 {
		errs = append(errs, fmt.Errorf("max depth must be positive, got %d", opts.MaxDepth))
	}
	if len(opts.Allowlist) > 0 {
		r.allow = make(map[AgentName]map[string]bool, len(opts.Allowlist))
		for agent, names := range opts.Allowlist {
			set := make(map[string]bool, len(names))
			for _, n := range names {
				set[n] = true
			}
			r.allow[agent] = set
		}
	}
	prevStats := map[string]*hookStats{}
	if opts.Previous != nil {
		for _, h := range opts.Previous.all {
			prevStats[statsKey(h.plugin.name, h.name, h.event.name)] = h.stats
		}
	}
	seenPlugins := map[string]bool{}
	for order, p := range plugins {
		perr := func(hook string, err error) { errs = append(errs, &LoadError{Plugin: p.Name, Hook: hook, Err: err}) }
		if p.Name == "" {
			perr("", errors.New("plugin has no name"))
			continue
		}
		if seenPlugins[p.Name] {
			perr("", errors.New("duplicate plugin name"))
			continue
		}
		seenPlugins[p.Name] = true
		info := &pluginInfo{name: p.Name, source: p.Source, settings: p.Settings, stateRoot: p.StateRoot, order: order}
		declared := map[string]bool{}
		for decl, h := range p.Hooks {
			if h.name == "" {
				perr(fmt.Sprintf("#%d", decl+1), errors.New("hook has no name"))
				continue
			}
			if declared[h.name] {
				perr(h.name, errors.New("duplicate hook name in plugin"))
				continue
			}
			declared[h.name] = true
			if h.err != nil {
				perr(h.name, h.err)
				continue
			}
			if h.event == nil || nilHandler(h.fn) {
				perr(h.name, errors.New("nil handler: the hook has no function to run"))
				continue
			}
			reg := &registered{
				plugin: info, name: h.name, event: h.event, priority: h.priority,
				timeout: cmp.Or(h.timeout, h.event.timeout), agents: h.agents, rooms: h.rooms,
				policy: h.policy, inline: h.inline, fn: h.fn, decl: decl,
			}
			if ov, ok := p.Overrides[h.name]; ok {
				if ov.Enabled != nil && !*ov.Enabled {
					continue
				}
				if ov.Priority != nil {
					reg.priority = *ov.Priority
				}
				if ov.Timeout != nil {
					if *ov.Timeout <= 0 {
						perr(h.name, fmt.Errorf("override timeout must be positive, got %v", *ov.Timeout))
						continue
					}
					reg.timeout = *ov.Timeout
				}
				if ov.FailurePolicy != nil {
					reg.policy = *ov.FailurePolicy
				}
			}
			if err := checkHook(reg); err != nil {
				perr(h.name, err)
				continue
			}
			if s := prevStats[statsKey(p.Name, h.name, h.event.name)]; s != nil {
				reg.stats = s
			} else {
				reg.stats = &hookStats{}
			}
			r.add(reg)
		}
		for _, name := range sortedKeys(p.Overrides) {
			if !declared[name] {
				r.warnings = append(r.warnings, fmt.Sprintf("plugin %q: override for hook %q matches no hook the plugin declares", p.Name, name))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.sort()
	return r, nil
}

// clonePlugins copies plugins deeply enough that no later change to the
// caller's slices and maps (Hooks, Overrides, filters, override values)
// reaches the copy. It is called once when a registry is built.
func clonePlugins(plugins []Plugin) []Plugin {
	out := make([]Plugin, len(plugins))
	for i, p := range plugins {
		p.Hooks = slices.Clone(p.Hooks)
		for j := range p.Hooks {
			p.Hooks[j].agents = slices.Clone(p.Hooks[j].agents)
			p.Hooks[j].rooms = slices.Clone(p.Hooks[j].rooms)
		}
		if p.Overrides != nil {
			ovs := make(map[string]Override, len(p.Overrides))
			for name, ov := range p.Overrides {
				ovs[name] = Override{
					Enabled:       clonePtr(ov.Enabled),
					Priority:      clonePtr(ov.Priority),
					Timeout:       clonePtr(ov.Timeout),
					FailurePolicy: clonePtr(ov.FailurePolicy),
				}
			}
			p.Overrides = ovs
		}
		out[i] = p
	}
	return out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneAllowlist(m map[AgentName][]string) map[AgentName][]string {
	if m == nil {
		return nil
	}
	out := make(map[AgentName][]string, len(m))
	for agent, names := range m {
		out[agent] = slices.Clone(names)
	}
	return out
}

// nilHandler reports whether fn, a hook's handler, is nil, also when it is
// a typed nil function behind the interface. It is called once per hook
// when a registry is built, so no emission ever calls a nil function.
func nilHandler(fn any) bool {
	if fn == nil {
		return true
	}
	v := reflect.ValueOf(fn)
	return v.Kind() == reflect.Func && v.IsNil()
}

func statsKey(plugin, hook, event string) string { return plugin + "\x00" + hook + "\x00" + event }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func checkHook(h *registered) error {
	if len(h.agents) > 0 && h.event.scope&scopeAgent == 0 {
		return fmt.Errorf("agents filter can never match: %s contexts name no agent", h.event.name)
	}
	if len(h.rooms) > 0 && h.event.scope&scopeRoom == 0 {
		return fmt.Errorf("rooms filter can never match: %s contexts name no room", h.event.name)
	}
	for _, r := range h.rooms {
		if !strings.HasPrefix(string(r), "!") {
			return fmt.Errorf("rooms filter entry %q is not a room id (want !id:server; aliases are not resolved)", r)
		}
	}
	if h.policy == FailClosed && h.event.mode != Gate {
		return fmt.Errorf("failure policy closed only applies to gate events, not %s (%s)", h.event.name, h.event.mode)
	}
	return nil
}

func (r *Registry) add(h *registered) {
	var eh *eventHooks
	if h.event.index > 0 {
		if eh = r.builtin[h.event.index]; eh == nil {
			eh = &eventHooks{}
			r.builtin[h.event.index] = eh
		}
	} else {
		if eh = r.custom[h.event.name]; eh == nil {
			eh = &eventHooks{}
			r.custom[h.event.name] = eh
		}
		r.hasCustom = true
	}
	eh.hooks = append(eh.hooks, h)
	eh.filtered = eh.filtered || h.filtered()
	r.all = append(r.all, h)
}

func (r *Registry) sort() {
	order := func(a, b *registered) int {
		return cmp.Or(cmp.Compare(a.priority, b.priority), cmp.Compare(a.plugin.order, b.plugin.order), cmp.Compare(a.decl, b.decl))
	}
	for _, eh := range r.builtin {
		if eh != nil {
			slices.SortStableFunc(eh.hooks, order)
		}
	}
	for _, eh := range r.custom {
		slices.SortStableFunc(eh.hooks, order)
	}
	slices.SortStableFunc(r.all, func(a, b *registered) int {
		return cmp.Or(eventOrder(a.event, b.event), order(a, b))
	})
}

func eventOrder(a, b *eventInfo) int {
	ai, bi := a.index, b.index
	if ai == 0 {
		ai = len(builtins) + 1
	}
	if bi == 0 {
		bi = len(builtins) + 1
	}
	return cmp.Or(cmp.Compare(ai, bi), strings.Compare(a.name, b.name))
}

func (r *Registry) lookup(info *eventInfo) *eventHooks {
	if info.index > 0 {
		return r.builtin[info.index]
	}
	if !r.hasCustom {
		return nil
	}
	return r.custom[info.name]
}

// Has reports whether any hook is registered for the event called name.
// Callers use it to skip building a context nobody will see.
func (r *Registry) Has(name string) bool {
	if r == nil {
		return false
	}
	if b, ok := builtinByName[name]; ok {
		eh := r.builtin[b.index]
		return eh != nil && len(eh.hooks) > 0
	}
	eh := r.custom[name]
	return eh != nil && len(eh.hooks) > 0
}

// Subscribed reports whether reg has any hook for ev: Has for a typed
// event, without looking its name up (an index into the registry's table
// for a built-in event), for emitters on hot paths.
func Subscribed[T any](reg *Registry, ev Event[T]) bool {
	if reg == nil || ev.info == nil {
		return false
	}
	eh := reg.lookup(ev.info)
	return eh != nil && len(eh.hooks) > 0
}

// eligible returns the hooks of eh that apply to a context with route rt,
// computed once per emission before any hook runs.
func (r *Registry) eligible(eh *eventHooks, rt route) []*registered {
	var allowed map[string]bool
	if r.allow != nil && rt.agent != "" {
		allowed = r.allow[rt.agent]
	}
	if !eh.filtered && allowed == nil && len(rt.skip) == 0 {
		return eh.hooks
	}
	out := make([]*registered, 0, len(eh.hooks))
	for _, h := range eh.hooks {
		if allowed != nil && !allowed[h.plugin.name] {
			continue
		}
		if len(rt.skip) > 0 && slices.Contains(rt.skip, h.plugin.name) {
			continue
		}
		if len(h.agents) > 0 && !slices.Contains(h.agents, rt.agent) {
			continue
		}
		if len(h.rooms) > 0 && !roomMatch(h.rooms, rt) {
			continue
		}
		out = append(out, h)
	}
	return out
}

func roomMatch(filter []id.RoomID, rt route) bool {
	if rt.room != "" && slices.Contains(filter, rt.room) {
		return true
	}
	for _, r := range rt.rooms {
		if slices.Contains(filter, r) {
			return true
		}
	}
	return false
}

// Warnings returns the non-fatal problems found while building the
// registry (overrides that name no hook), for the caller to log.
func (r *Registry) Warnings() []string { return slices.Clone(r.warnings) }

// Plugins returns the names of the registry's plugins in config order.
func (r *Registry) Plugins() []string {
	names := make([]string, len(r.plugins))
	for i, p := range r.plugins {
		names[i] = p.Name
	}
	return names
}

// Without returns a new registry with every hook of the named plugin
// removed; the receiver is unchanged. Run statistics carry over.
func (r *Registry) Without(plugin string) (*Registry, error) {
	kept := make([]Plugin, 0, len(r.plugins))
	for _, p := range r.plugins {
		if p.Name != plugin {
			kept = append(kept, p)
		}
	}
	opts := r.opts
	opts.Previous = r
	return NewRegistry(kept, opts)
}

// HookInfo describes one hook in service, as introspection shows it.
type HookInfo struct {
	Event         string        `json:"event"`
	Mode          string        `json:"mode"`
	Plugin        string        `json:"plugin"`
	Source        string        `json:"source,omitempty"`
	Hook          string        `json:"hook"`
	Priority      int           `json:"priority"`
	Timeout       time.Duration `json:"timeout_ns"`
	Agents        []AgentName   `json:"agents,omitempty"`
	Rooms         []id.RoomID   `json:"rooms,omitempty"`
	FailurePolicy string        `json:"failure_policy"`
	// Inline: the hook runs on the emitting goroutine (see Inline).
	Inline bool `json:"inline,omitempty"`
	// Position is the hook's 1-based run position among its event's hooks.
	Position int `json:"position"`
}

// Hooks lists every hook in service with its effective configuration,
// grouped by event (built-in events first, in declaration order) and in
// run order within an event.
func (r *Registry) Hooks() []HookInfo {
	out := make([]HookInfo, 0, len(r.all))
	pos := 0
	for i, h := range r.all {
		if i == 0 || r.all[i-1].event.name != h.event.name {
			pos = 0
		}
		pos++
		out = append(out, HookInfo{
			Event: h.event.name, Mode: h.event.mode.String(), Plugin: h.plugin.name, Source: h.plugin.source,
			Hook: h.name, Priority: h.priority, Timeout: h.timeout,
			Agents: slices.Clone(h.agents), Rooms: slices.Clone(h.rooms),
			FailurePolicy: h.policy.String(), Inline: h.inline, Position: pos,
		})
	}
	return out
}

// Live holds the registry in service. Reloads Store a new snapshot;
// emitters Load the current one once per emission.
type Live struct{ p atomic.Pointer[Registry] }

// Load returns the registry in service (nil before the first Store).
func (l *Live) Load() *Registry { return l.p.Load() }

// Store puts r in service.
func (l *Live) Store(r *Registry) { l.p.Store(r) }

// Swap puts r in service and returns the registry it replaced.
func (l *Live) Swap(r *Registry) *Registry { return l.p.Swap(r) }
