package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process"
)

// Instance is a loaded plugin, whatever its tier (built-in Go code or a
// process). The loader asks it for its hooks once, right after it was
// created; the registry built from them stays in service until the next
// reload.
//
// An instance may also implement ToolProvider (it offers tools to agents),
// CommandProvider (it answers chat commands), io.Closer (it holds
// resources such as goroutines or file watchers; Close is called once,
// when no plugin set uses it any more: after a reload that replaced or
// removed it, at shutdown, or when the load that created it failed) and
// HealthReporter.
type Instance interface {
	// Hooks returns the plugin's hooks in declaration order.
	Hooks() []hooks.Hook
}

// ToolProvider is implemented by instances that offer tools to agents.
type ToolProvider interface {
	// Tools returns the plugin's tools. Tool names are unique across all
	// loaded plugins.
	Tools() []Tool
}

// HealthReporter is implemented by instances that can stop working after
// they were loaded (a process plugin disabled after crashing again and
// again). A reload restarts an instance that reports false even when
// nothing about it changed.
type HealthReporter interface {
	Healthy() bool
}

// ToolFunc runs one call of a tool and returns the text the model sees.
type ToolFunc func(ctx context.Context, call ToolCall) (string, error)

// Tool is a function a plugin offers to the agents that may use it.
type Tool struct {
	// Name is unique across all loaded plugins (^[a-zA-Z0-9_-]{1,64}$, the
	// function-name rule of OpenAI-compatible APIs).
	Name string
	// Description tells the model what the tool does.
	Description string
	// Parameters is the JSON schema of the tool's arguments (an object
	// schema; empty means no arguments).
	Parameters json.RawMessage
	// Func runs the tool. It is called concurrently for different calls.
	Func ToolFunc
	// Agents, when not nil, are the only agents the tool is for: the host
	// offers it to them without an agents.<name>.tools entry and to no
	// other agent, whatever its entries select. A built-in whose settings
	// name the agents it serves (memory, knowledge) sets it. Func should
	// still refuse a call from another agent.
	Agents []hooks.AgentName
}

// ForAgent reports whether the tool may be offered to agent: Agents is nil
// or names it.
func (t Tool) ForAgent(agent hooks.AgentName) bool {
	return t.Agents == nil || slices.Contains(t.Agents, agent)
}

// ToolCall is one call of a plugin tool by an agent: the call as the
// tool hooks see it (hooks.ToolCall: the tool, the arguments the model
// passed, the agent, room, thread, requester and session), the turn's
// correlation id and Emit, which emits custom events on behalf of the
// tool's plugin (Set.CallTool fills it). It is process.ToolCall, the one
// tool-call type of built-in and process plugins.
type ToolCall = process.ToolCall

// Call runs the tool. A panic in Func is recovered and returned as an error.
func (t Tool) Call(ctx context.Context, call ToolCall) (out string, err error) {
	if t.Func == nil {
		return "", fmt.Errorf("tool %q has no function", t.Name)
	}
	defer func() {
		if r := recover(); r != nil {
			err = &hooks.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return t.Func(ctx, call)
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// emptySchema is the parameters schema of a tool that takes no arguments.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// checkTool validates a tool's declaration and returns it with its
// parameters normalized.
func checkTool(t Tool) (Tool, error) {
	if !toolNameRE.MatchString(t.Name) {
		return t, fmt.Errorf("tool name %q must match %s", t.Name, toolNameRE)
	}
	if t.Func == nil {
		return t, fmt.Errorf("tool %q has no function", t.Name)
	}
	if len(t.Parameters) == 0 {
		t.Parameters = emptySchema
		return t, nil
	}
	var schema map[string]any
	if err := json.Unmarshal(t.Parameters, &schema); err != nil {
		return t, fmt.Errorf("tool %q: parameters must be a JSON schema object: %w", t.Name, err)
	}
	if typ, ok := schema["type"]; ok && typ != "object" {
		return t, fmt.Errorf("tool %q: parameters schema must have type object, not %v", t.Name, typ)
	}
	return t, nil
}

// CommandProvider is implemented by instances that answer chat commands:
// the host routes a message "!NAME args…" to the command called NAME (after
// its own commands, which a plugin cannot replace).
type CommandProvider interface {
	// Commands returns the plugin's commands. Names are unique across all
	// loaded plugins.
	Commands() []Command
}

// Command is a chat command a plugin answers.
type Command struct {
	// Name is what follows "!" (^[a-z][a-z0-9_-]{0,31}$), e.g. "memory".
	Name string
	// Help is one line for the host's !help: the arguments and what the
	// command does, e.g. "[agent] — what the agents here remember about you".
	Help string
	// Run answers one use of the command; the text it returns (Markdown) is
	// the reply, posted in the thread. An error is reported to the person as
	// a failure (without details the host does not show). It is called
	// concurrently and must honour ctx.
	Run func(ctx context.Context, req CommandRequest) (string, error)
}

// CommandRequest is one use of a plugin command, as the host saw it.
type CommandRequest struct {
	// Room and Thread are where the command was sent (Thread "" at room
	// level).
	Room   id.RoomID
	Thread id.EventID
	// Sender is the person who sent it (the host has authorized them).
	Sender id.UserID
	// Args are the words after the command name.
	Args []string
	// Admin says the sender is one of hookroom's admins.
	Admin bool
	// Encrypted says the room is end-to-end encrypted.
	Encrypted bool
	// Agents are the agents that answer in Room, sorted; empty when the
	// host does not say.
	Agents []hooks.AgentName
}

// PluginCommand is a command together with the plugin that provides it.
type PluginCommand struct {
	Plugin string
	Command
}

var commandNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// checkCommand validates a command's declaration.
func checkCommand(c Command) error {
	if !commandNameRE.MatchString(c.Name) {
		return fmt.Errorf("command name %q must match %s", c.Name, commandNameRE)
	}
	if c.Run == nil {
		return fmt.Errorf("command %q has no function", c.Name)
	}
	return nil
}

// commandsOf returns the commands of inst, nil when it has none.
func commandsOf(inst Instance) []Command {
	if cp, ok := inst.(CommandProvider); ok {
		return cp.Commands()
	}
	return nil
}

// Commands returns every plugin command, in config order, then declaration
// order.
func (s *Set) Commands() []PluginCommand {
	if s == nil {
		return nil
	}
	var out []PluginCommand
	for _, p := range s.plugins {
		if p.inst == nil {
			continue
		}
		for _, c := range commandsOf(p.inst.inst) {
			out = append(out, PluginCommand{Plugin: p.name, Command: c})
		}
	}
	return out
}

// Command returns the plugin command called name (without the "!"; case
// does not matter).
func (s *Set) Command(name string) (PluginCommand, bool) {
	name = strings.ToLower(name)
	for _, c := range s.Commands() {
		if c.Name == name {
			return c, true
		}
	}
	return PluginCommand{}, false
}

// Call runs the command. A panic in Run is recovered and returned as an
// error.
func (c Command) Call(ctx context.Context, req CommandRequest) (out string, err error) {
	if c.Run == nil {
		return "", fmt.Errorf("command %q has no function", c.Name)
	}
	defer func() {
		if r := recover(); r != nil {
			err = &hooks.PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	return c.Run(ctx, req)
}
