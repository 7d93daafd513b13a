package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/mcp"
	"github.com/hookroom/hookroom/plugins"
)

// SourceBuiltin is the source of the built-in tools in qualified tool names
// ("builtin/current_time").
const SourceBuiltin = "builtin"

// SourceMCPPrefix starts the source of an MCP server's tools
// ("mcp:github/create_issue"): mcp_servers in config.yaml.
const SourceMCPPrefix = mcp.SourcePrefix

// ToolInfo describes one tool an agent may call.
type ToolInfo struct {
	// Name is the tool's name as the model sees it; unique among an agent's
	// tools.
	Name string `json:"name"`
	// Source is "builtin", the name of the plugin offering the tool, or
	// "mcp:SERVER" for an MCP server's tool.
	Source      string `json:"source"`
	Description string `json:"description"`
	// Parameters is the JSON Schema of an MCP tool's arguments (plugins'
	// tools carry theirs themselves).
	Parameters json.RawMessage `json:"-"`
}

// Qualified returns the tool's qualified name, SOURCE/NAME.
func (t ToolInfo) Qualified() string { return t.Source + "/" + t.Name }

// AgentTools lists the effective tools of one agent.
type AgentTools struct {
	Agent hooks.AgentName `json:"agent"`
	Tools []ToolInfo      `json:"tools"`
}

// Tools returns every agent's effective tools (agents by name, tools in the
// order their agents.<name>.tools entries select them).
func (b *Bot) Tools() []AgentTools {
	w := b.w()
	tools := w.effectiveTools(&b.log)
	names := make([]string, 0, len(w.cfg.Agents))
	for name := range w.cfg.Agents {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]AgentTools, 0, len(names))
	for _, name := range names {
		a := hooks.AgentName(name)
		out = append(out, AgentTools{Agent: a, Tools: slices.Clone(tools[a])})
	}
	return out
}

// toolCatalog lists every tool an agent could be given: the built-ins,
// the plugins' tools in config order, then the MCP servers' tools (by
// server name) as they list them now.
func toolCatalog(set *plugins.Set, servers *mcp.Set) []ToolInfo {
	var cat []ToolInfo
	for _, s := range agents.BuiltinTools() {
		cat = append(cat, ToolInfo{Name: s.Name, Source: SourceBuiltin, Description: s.Description})
	}
	if set != nil {
		for _, t := range set.Tools() {
			cat = append(cat, ToolInfo{Name: t.Name, Source: t.Plugin, Description: t.Description})
		}
	}
	for _, t := range servers.Tools() {
		cat = append(cat, ToolInfo{Name: t.Name, Source: t.Source(), Description: t.Description, Parameters: t.Parameters})
	}
	return cat
}

// resolveTools turns each agent's agents.<name>.tools entries into its
// effective tools. An entry is matched (path.Match) against the tools'
// names, or, when it holds a "/", against their qualified names
// SOURCE/NAME. Problems are a config.ErrorList with the entries' file:line:
// an exact name that is no tool, a pattern whose source part matches no
// source (builtin, an enabled plugin, mcp:SERVER of an enabled MCP
// server), a pattern without a source that matches nothing, and two
// selected tools with the same name. A SOURCE/GLOB pattern whose source
// exists but offers no matching tool is only a warning: a provider's tool
// list may change (a plugin under development, an MCP server's
// tools/list_changed); for an MCP server that is true of exact names too
// (the server may be down right now). The map holds every agent's tools
// even when there are problems (without the problematic selections).
func resolveTools(cfg *config.Config, set *plugins.Set, servers *mcp.Set) (map[hooks.AgentName][]ToolInfo, []string, error) {
	cat := toolCatalog(set, servers)
	sources := []string{SourceBuiltin}
	if set != nil {
		for _, p := range set.Plugins() {
			sources = append(sources, p.Name)
		}
	}
	for _, name := range servers.Names() {
		sources = append(sources, SourceMCPPrefix+name)
	}
	var errs config.ErrorList
	var warnings []string
	out := make(map[hooks.AgentName][]ToolInfo, len(cfg.Agents))
	for agent, a := range cfg.Agents {
		var picked []ToolInfo
		from := map[string]int{} // tool name → entry that selected it
		for i, entry := range a.Tools {
			p := config.AgentToolPath(agent, i)
			matched, problem, warn := matchTools(entry, cat, sources)
			if problem != "" {
				errs = append(errs, cfg.Errorf(p, "%s", problem))
				continue
			}
			if warn != "" {
				warnings = append(warnings, cfg.Errorf(p, "%s", warn).Error())
			}
			for _, t := range matched {
				if j, dup := from[t.Name]; dup {
					prev := picked[slices.IndexFunc(picked, func(x ToolInfo) bool { return x.Name == t.Name })]
					if prev.Source != t.Source {
						errs = append(errs, cfg.Errorf(p, "tool %q is offered by both %s and %s (selected by entries %d and %d); the model can tell them apart only by name: select one by SOURCE/NAME", t.Name, prev.Source, t.Source, j, i))
					}
					continue
				}
				from[t.Name] = i
				picked = append(picked, t)
			}
		}
		out[hooks.AgentName(agent)] = withServedTools(picked, set, hooks.AgentName(agent))
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *config.Error) int { return a.Line - b.Line })
		return out, warnings, errs
	}
	slices.Sort(warnings)
	return out, warnings, nil
}

// withServedTools applies the plugin tools that name the agents they serve
// (plugins.Tool.Agents: memory, knowledge): they go to those agents without
// a tools: entry, and to no other agent, whatever its entries select.
func withServedTools(picked []ToolInfo, set *plugins.Set, agent hooks.AgentName) []ToolInfo {
	if set == nil {
		return picked
	}
	for _, t := range set.Tools() {
		if t.Agents == nil {
			continue
		}
		i := slices.IndexFunc(picked, func(x ToolInfo) bool { return x.Name == t.Name && x.Source == t.Plugin })
		switch {
		case !t.ForAgent(agent) && i >= 0:
			picked = slices.Delete(picked, i, i+1)
		case t.ForAgent(agent) && i < 0:
			picked = append(picked, ToolInfo{Name: t.Name, Source: t.Plugin, Description: t.Description})
		}
	}
	return picked
}

// matchTools returns the tools entry selects, or a problem (an error) or a
// warning when it selects none.
func matchTools(entry string, cat []ToolInfo, sources []string) (matched []ToolInfo, problem, warning string) {
	srcPat, toolPat, qualified := strings.Cut(entry, "/")
	for _, t := range cat {
		var ok bool
		if qualified {
			ok, _ = path.Match(entry, t.Qualified())
		} else {
			ok, _ = path.Match(entry, t.Name)
		}
		if ok {
			matched = append(matched, t)
		}
	}
	if len(matched) > 0 {
		return matched, "", ""
	}
	if !qualified {
		if !config.IsToolPattern(entry) {
			return nil, fmt.Sprintf("unknown tool %q: %s", entry, knownTools(cat)), ""
		}
		return nil, fmt.Sprintf("%q matches no tool: %s", entry, knownTools(cat)), ""
	}
	var srcMatched bool
	for _, s := range sources {
		if ok, _ := path.Match(srcPat, s); ok {
			srcMatched = true
			break
		}
	}
	switch {
	case !srcMatched && strings.HasPrefix(srcPat, SourceMCPPrefix):
		return nil, fmt.Sprintf("%q: no MCP server matches %q (mcp_servers lists them; a disabled one offers no tools); tool sources: %s", entry, srcPat, strings.Join(sources, ", ")), ""
	case !srcMatched:
		return nil, fmt.Sprintf("%q: no tool source matches %q; tool sources are %s (builtin and the enabled plugins)", entry, srcPat, strings.Join(sources, ", ")), ""
	case strings.HasPrefix(srcPat, SourceMCPPrefix):
		return nil, "", fmt.Sprintf("%q selects no tool right now (the MCP server offers none that match, or has not listed its tools yet); %s", entry, knownTools(cat))
	case !config.IsToolPattern(toolPat):
		return nil, fmt.Sprintf("unknown tool %q: %s", entry, knownTools(cat)), ""
	}
	return nil, "", fmt.Sprintf("%q selects no tool right now (its source offers none that match); %s", entry, knownTools(cat))
}

// knownTools describes the catalog for an error message.
func knownTools(cat []ToolInfo) string {
	var builtin, plugin, fromMCP []string
	for _, t := range cat {
		switch {
		case t.Source == SourceBuiltin:
			builtin = append(builtin, t.Name)
		case strings.HasPrefix(t.Source, SourceMCPPrefix):
			fromMCP = append(fromMCP, t.Qualified())
		default:
			plugin = append(plugin, t.Qualified())
		}
	}
	s := "built-in tools are " + strings.Join(builtin, ", ")
	if len(plugin) == 0 {
		s += "; no enabled plugin offers tools"
	} else {
		s += "; plugin tools are " + strings.Join(plugin, ", ")
	}
	if len(fromMCP) > 0 {
		s += "; MCP tools are " + strings.Join(fromMCP, ", ")
	}
	return s
}

// applyTools resolves the tools of w's configuration into w, logging the
// warnings.
func applyTools(ctx context.Context, w *world) error {
	version := w.mcp.Version()
	tools, warnings, err := resolveTools(w.cfg, w.plugins, w.mcp)
	for _, msg := range warnings {
		zerolog.Ctx(ctx).Warn().Msg(msg)
	}
	if err != nil {
		return err
	}
	w.tools = tools
	w.mcpTools.version = version
	return nil
}

// toolsFor builds the tools an agent of w may call, for a turn in w.
func (b *Bot) toolsFor(w *world, agent hooks.AgentName) *agents.Toolset {
	var tools []agents.Tool
	for _, info := range w.effectiveTools(&b.log)[agent] {
		switch {
		case strings.HasPrefix(info.Source, SourceMCPPrefix):
			tools = append(tools, mcpTool{set: w.mcp, tool: mcp.Tool{
				Server: strings.TrimPrefix(info.Source, SourceMCPPrefix), Name: info.Name,
				Description: info.Description, Parameters: info.Parameters,
			}})
		case info.Source == SourceBuiltin && info.Name == agents.ToolCurrentTime:
			tools = append(tools, agents.CurrentTime{})
		case info.Source == SourceBuiltin && info.Name == agents.ToolRoomInfo:
			tools = append(tools, agents.RoomInfoTool(b.roomInfo))
		case info.Source == SourceBuiltin && info.Name == agents.ToolSchedule:
			tools = append(tools, agents.ScheduleTool(func(ctx context.Context, a agents.ScheduleArgs) (string, error) {
				return b.scheduleTool(ctx, w, a)
			}))
		case w.plugins != nil:
			if t, ok := w.plugins.Tool(info.Name); ok {
				tools = append(tools, pluginTool{b: b, set: w.plugins, tool: t})
			}
		}
	}
	tools = b.withDelegation(w, agent, tools)
	if len(tools) == 0 {
		return nil
	}
	ts, err := agents.NewToolset(tools...)
	if err != nil {
		b.log.Error().Err(err).Str("agent", string(agent)).Msg("failed to build the agent's tools")
		return nil
	}
	return ts
}
