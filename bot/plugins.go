package bot

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
)

// loadPlugins builds the plugin set of cfg (reusing the unchanged plugins
// of prev, or none when force is set) and a hook registry from it.
func (b *Bot) loadPlugins(ctx context.Context, cfg *config.Config, prev *plugins.Set, force bool) (*plugins.Set, *hooks.Registry, error) {
	l := plugins.Loader{
		AllowEnv:      func(e config.PluginEntry) []string { return e.Env },
		ForceRestart:  force,
		DB:            b.db.Database,
		RoomEncrypted: b.roomEncrypted,
		Inspect:       b.opts.Inspect,
	}
	set, err := l.Load(ctx, cfg, prev)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to load plugins: %w", err)
	}
	for _, w := range set.Warnings() {
		zerolog.Ctx(ctx).Warn().Msg(w)
	}
	reg, err := set.Registry(b.registryOptions())
	if err != nil {
		_ = set.Close()
		return nil, nil, err
	}
	return set, reg, nil
}

// registryOptions are the host services; the engine settings and the
// allowlists come from the plugin set's configuration.
func (b *Bot) registryOptions() hooks.Options {
	var prev *hooks.Registry // none while New builds the first
	if w := b.w(); w != nil {
		prev = w.reg
	}
	return hooks.Options{Services: b.services.bind(), Previous: prev, Observer: traceObserver{}}
}

// pluginTool adapts a plugin's tool to the agents' tool interface.
type pluginTool struct {
	b    *Bot
	set  *plugins.Set
	tool plugins.PluginTool
}

var _ agents.Tool = pluginTool{}

func (t pluginTool) Spec() agents.ToolSpec {
	return agents.ToolSpec{Name: t.tool.Name, Description: t.tool.Description, Parameters: t.tool.Parameters}
}

// pluginToolCall is the ToolCall a plugin tool gets: the arguments and the
// turn's agent, room, thread, requester, session and correlation id, from
// the tool call's context.
func pluginToolCall(ctx context.Context, args json.RawMessage) plugins.ToolCall {
	call, _ := agents.ToolCallFrom(ctx)
	call.Arguments = args
	corr, _ := agents.ToolCorrelationID(ctx)
	return plugins.ToolCall{ToolCall: call, CorrelationID: corr}
}

func (t pluginTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return t.set.CallTool(ctx, t.b.w().reg, t.tool.Name, pluginToolCall(ctx, args))
}

// roomEncrypted tells built-in plugins whether room is end-to-end
// encrypted, as an account of hookroom that is in the room knows it. A
// room no account of hookroom is in is reported as encrypted, with an
// error: a wrong "not encrypted" would send its text to an outside
// service (an embeddings endpoint).
func (b *Bot) roomEncrypted(ctx context.Context, room id.RoomID) (bool, error) {
	w := b.w()
	if w == nil || b.router == nil {
		return true, fmt.Errorf("failed to tell whether %s is encrypted: hookroom is not connected yet", room)
	}
	acct := b.router
	if !b.routerIn(w, room) {
		names := b.agentsOf(w, room)
		if len(names) == 0 {
			return true, fmt.Errorf("failed to tell whether %s is encrypted: no account of hookroom is in it", room)
		}
		acct = w.agents[names[0]]
	}
	return acct.IsEncrypted(ctx, room)
}
