package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime/debug"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process"
)

// Instance is a loaded plugin, whatever its tier (built-in Go code or a
// process). The loader asks it for its hooks once, right after it was
// created; the registry built from them stays in service until the next
// reload.
//
// An instance may also implement ToolProvider (it offers tools to agents),
// io.Closer (it holds resources; Close is called once when no plugin set
// uses it any more) and HealthReporter.
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
