package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// Plugin is a Go plugin that runs the same way built in (Builtin) or as a
// process plugin (Serve). Its hooks are ordinary hooks.Handle declarations
// and its tools ordinary plugins.Tool values.
type Plugin struct {
	// Name is the plugin's own name (^[a-z0-9_-]+$): the built-in's
	// registered name, and what a process declares. hookroom's
	// configuration may give a process plugin another name; hooks see that
	// one in c.PluginName().
	Name string
	// Version is the plugin's version, free-form.
	Version string
	// Description says what the plugin does, for listings.
	Description string
	// Hooks in declaration order.
	Hooks []hooks.Hook
	// Tools the plugin offers to agents.
	Tools []plugins.Tool
	// Procs is how many processors (GOMAXPROCS) the plugin's process uses
	// when it runs as a process plugin. 0 means 1, unless the process's
	// environment sets GOMAXPROCS: hook calls are short and mostly wait
	// for I/O, and a single processor saves them the cross-thread wake-ups
	// (about 15 µs per call measured on 2 shared cores). Hooks still run
	// concurrently as goroutines.
	Procs int
	// Setup, when set, is called once per instance before any hook or tool
	// runs, with the plugin's settings, state directory and logger; an
	// error fails loading the plugin (built in) or starting it (process).
	// It must not block.
	Setup func(ctx context.Context, env plugins.Env) error
}

// Builtin returns p as a built-in plugin, ready for plugins.RegisterBuiltin
// (typically from an init function).
func (p Plugin) Builtin() plugins.Builtin {
	return plugins.Builtin{
		Name:        p.Name,
		Description: p.Description,
		New: func(ctx context.Context, env plugins.Env) (plugins.Instance, error) {
			if env.Logger == nil {
				nop := zerolog.Nop()
				env.Logger = &nop
			}
			if p.Setup != nil {
				if err := p.Setup(ctx, env); err != nil {
					return nil, err
				}
			}
			return instance{hooks: slices.Clone(p.Hooks), tools: slices.Clone(p.Tools)}, nil
		},
	}
}

type instance struct {
	hooks []hooks.Hook
	tools []plugins.Tool
}

func (i instance) Hooks() []hooks.Hook   { return i.hooks }
func (i instance) Tools() []plugins.Tool { return i.tools }

var (
	_ plugins.Instance     = instance{}
	_ plugins.ToolProvider = instance{}
)

// emitter is what every hook context's embedded hooks.Base provides.
type emitter interface {
	Emit(ctx context.Context, name string, payload any) error
}

// Emit emits the custom event name with payload from a hook, in both
// modes: built in it is c.Emit; in a process it asks the host (host.emit),
// whose registry holds every plugin's hooks. c.Emit does the same in both
// modes; Emit also works with a context that is not a hook's (a tool's).
func Emit(ctx context.Context, c hooks.Context, name string, payload any) error {
	if call := callFrom(ctx); call != nil {
		return call.emit(ctx, name, payload)
	}
	e, ok := c.(emitter)
	if !ok {
		return fmt.Errorf("failed to emit %q: %w", name, hooks.ErrNoService)
	}
	return e.Emit(ctx, name, payload)
}

// declare describes p's hooks and tools for the initialize answer, in
// declaration order, with the effective priority, timeout, filters and
// failure policy of each hook.
func (p Plugin) declare(name string) ([]protocol.HookDecl, []protocol.ToolDecl, error) {
	reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: name, Hooks: p.Hooks}}, hooks.Options{})
	if err != nil {
		return nil, nil, err
	}
	infos := map[string]hooks.HookInfo{}
	for _, info := range reg.Hooks() {
		infos[info.Hook] = info
	}
	decls := make([]protocol.HookDecl, 0, len(p.Hooks))
	for _, h := range p.Hooks {
		info := infos[h.Name()]
		prio := info.Priority
		d := protocol.HookDecl{
			Event: info.Event, Name: info.Hook, Priority: &prio,
			TimeoutMS: int(info.Timeout.Milliseconds()), FailurePolicy: info.FailurePolicy,
		}
		for _, a := range info.Agents {
			d.Agents = append(d.Agents, string(a))
		}
		for _, r := range info.Rooms {
			d.Rooms = append(d.Rooms, string(r))
		}
		decls = append(decls, d)
	}
	tools := make([]protocol.ToolDecl, 0, len(p.Tools))
	for _, t := range p.Tools {
		tools = append(tools, protocol.ToolDecl{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return decls, tools, nil
}

// settingsFrom decodes the settings object of initialize.
func settingsFrom(raw json.RawMessage) (hooks.Settings, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return hooks.Settings{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return hooks.Settings{}, fmt.Errorf("settings must be a JSON object: %w", err)
	}
	return hooks.NewSettings(m)
}
