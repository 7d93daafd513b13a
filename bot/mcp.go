package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/mcp"
)

// loadMCP builds the MCP server set of cfg, reusing the unchanged servers
// of prev (none when force is set). An inspecting bot (hookroom check,
// hooks, tools) starts each server once, briefly, to list its tools.
func (b *Bot) loadMCP(ctx context.Context, cfg *config.Config, prev *mcp.Set, force bool) (*mcp.Set, error) {
	set, err := mcp.Load(ctx, cfg, prev, mcp.Options{Inspect: b.opts.Inspect, Force: force})
	if err != nil {
		return nil, fmt.Errorf("failed to load MCP servers: %w", err)
	}
	return set, nil
}

// mcpTool adapts an MCP server's tool to the agents' tool interface. The
// tool loop runs it through tool:before_call and tool:after_call like any
// other tool.
type mcpTool struct {
	set  *mcp.Set
	tool mcp.Tool
}

var _ agents.Tool = mcpTool{}

func (t mcpTool) Spec() agents.ToolSpec {
	return agents.ToolSpec{Name: t.tool.Name, Description: t.tool.Description, Parameters: t.tool.Parameters}
}

func (t mcpTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return t.set.CallTool(ctx, t.tool.Server, t.tool.Name, args)
}

// toolCache holds the agents' tools resolved again after an MCP server's
// tool list changed.
type toolCache struct {
	version uint64
	tools   map[hooks.AgentName][]ToolInfo
}

// mcpToolState is the part of a world that follows the MCP servers' tool
// lists between reloads.
type mcpToolState struct {
	// version is the MCP set's Version when tools were resolved.
	version uint64
	cache   atomic.Pointer[toolCache]
}

// effectiveTools returns each agent's tools now: those resolved at load,
// or, once an MCP server's tool list changed (a restart, tools/list_changed),
// resolved again against the current lists. Problems of a new resolution
// (two servers now offering the same name) are logged; the tools without
// the problem stay selected.
func (w *world) effectiveTools(log *zerolog.Logger) map[hooks.AgentName][]ToolInfo {
	if w.mcp == nil {
		return w.tools
	}
	v := w.mcp.Version()
	if v == w.mcpTools.version {
		return w.tools
	}
	if c := w.mcpTools.cache.Load(); c != nil && c.version == v {
		return c.tools
	}
	tools, warnings, err := resolveTools(w.cfg, w.plugins, w.mcp)
	for _, msg := range warnings {
		log.Warn().Msg(msg)
	}
	if err != nil {
		logErrors(log, zerolog.WarnLevel, err, "an MCP server's tools changed; these tool selections are skipped until the next reload")
	}
	w.mcpTools.cache.Store(&toolCache{version: v, tools: tools})
	return tools
}
