package sdk

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// runner decodes the host's context JSON into the event's typed context,
// runs the registry's single hook on it and returns the designated fields.
type runner func(ctx context.Context, reg *hooks.Registry, raw json.RawMessage) (json.RawMessage, error)

func typed[T any, P hooks.ContextOf[T]](ev hooks.Event[T]) runner {
	return func(ctx context.Context, reg *hooks.Registry, raw json.RawMessage) (json.RawMessage, error) {
		c := P(new(T))
		if err := json.Unmarshal(raw, c); err != nil {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "failed to decode the %s context: %v", ev.Name(), err)
		}
		if err := hooks.Emit(ctx, reg, ev, c); err != nil {
			return nil, err
		}
		return protocol.Result(c)
	}
}

// runners has one runner per built-in event.
var runners = map[string]runner{
	hooks.MessageReceived.Name():               typed(hooks.MessageReceived),
	hooks.MessageClaim.Name():                  typed(hooks.MessageClaim),
	hooks.MessageEnrich.Name():                 typed(hooks.MessageEnrich),
	hooks.SystemEnrich.Name():                  typed(hooks.SystemEnrich),
	hooks.MessageBeforeResponse.Name():         typed(hooks.MessageBeforeResponse),
	hooks.MessageFinalResponseTransform.Name(): typed(hooks.MessageFinalResponseTransform),
	hooks.MessageAfterResponse.Name():          typed(hooks.MessageAfterResponse),
	hooks.MessageCancelled.Name():              typed(hooks.MessageCancelled),
	hooks.AgentStarted.Name():                  typed(hooks.AgentStarted),
	hooks.AgentStopped.Name():                  typed(hooks.AgentStopped),
	hooks.BotReady.Name():                      typed(hooks.BotReady),
	hooks.SessionStarted.Name():                typed(hooks.SessionStarted),
	hooks.CompactionBefore.Name():              typed(hooks.CompactionBefore),
	hooks.CompactionAfter.Name():               typed(hooks.CompactionAfter),
	hooks.ScheduleFired.Name():                 typed(hooks.ScheduleFired),
	hooks.ReactionReceived.Name():              typed(hooks.ReactionReceived),
	hooks.RoomMemberJoined.Name():              typed(hooks.RoomMemberJoined),
	hooks.RoomMemberLeft.Name():                typed(hooks.RoomMemberLeft),
	hooks.ConfigReloaded.Name():                typed(hooks.ConfigReloaded),
	hooks.ToolBeforeCall.Name():                typed(hooks.ToolBeforeCall),
	hooks.ToolAfterCall.Name():                 typed(hooks.ToolAfterCall),
	hooks.ToolApprovalRequested.Name():         typed(hooks.ToolApprovalRequested),
	hooks.ToolApprovalResolved.Name():          typed(hooks.ToolApprovalResolved),
	hooks.PluginBeforeInstall.Name():           typed(hooks.PluginBeforeInstall),
	hooks.ModelResolve.Name():                  typed(hooks.ModelResolve),
	hooks.ModelRequest.Name():                  typed(hooks.ModelRequest),
	hooks.ModelResponse.Name():                 typed(hooks.ModelResponse),
	hooks.ToolResult.Name():                    typed(hooks.ToolResult),
	hooks.UsageBudgetReached.Name():            typed(hooks.UsageBudgetReached),
	hooks.SubagentSpawned.Name():               typed(hooks.SubagentSpawned),
	hooks.SubagentEnded.Name():                 typed(hooks.SubagentEnded),
	hooks.MemoryExtracted.Name():               typed(hooks.MemoryExtracted),
}

// runnerFor returns the runner of a built-in or custom event.
func runnerFor(event string) (runner, error) {
	if r, ok := runners[event]; ok {
		return r, nil
	}
	ev, err := hooks.NewCustomEvent(event)
	if err != nil {
		return nil, fmt.Errorf("no runner for event %q: %w", event, err)
	}
	return typed(ev), nil
}
