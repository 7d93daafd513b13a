package bot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio"
)

// ReloadReport says what a reload changed.
type ReloadReport struct {
	Config  config.Changes
	Plugins []string // "added audit_log", "restarted geo", …
	// MCP says what happened to the MCP servers: "started files",
	// "restarted github", "stopped old".
	MCP []string
	// NeedsRestart lists changes that only take effect after a restart.
	NeedsRestart []string
	Took         time.Duration
}

// Summary is a one-line human-readable account of the report, each change
// named once: "agents +ops -old ~code; plugins: added audit_log, restarted
// geo; models; needs a restart: matrix". Plugins are described by what
// happened to their instances when the reload built a plugin set, by the
// configuration's diff otherwise; sections that only take effect after a
// restart appear under "needs a restart" alone.
func (r ReloadReport) Summary() string {
	c := r.Config
	var parts []string
	list := func(name string, added, removed, changed []string) {
		if s := config.ListChanges(name, added, removed, changed); s != "" {
			parts = append(parts, s)
		}
	}
	list("agents", c.AgentsAdded, c.AgentsRemoved, c.AgentsChanged)
	list("rooms", c.RoomsAdded, c.RoomsRemoved, c.RoomsChanged)
	if len(r.Plugins) > 0 {
		parts = append(parts, "plugins: "+strings.Join(r.Plugins, ", "))
	} else {
		list("plugins", c.PluginsAdded, c.PluginsRemoved, c.PluginsChanged)
		if c.PluginOrder {
			parts = append(parts, "plugin order")
		}
	}
	if len(r.MCP) > 0 {
		parts = append(parts, "mcp_servers: "+strings.Join(r.MCP, ", "))
	} else {
		list("mcp_servers", c.MCPServersAdded, c.MCPServersRemoved, c.MCPServersChanged)
	}
	for _, f := range []struct {
		set  bool
		name string
	}{
		{c.Models, "models"}, {c.Router, "router"}, {c.RouterProfile, "router profile"}, {c.Authorization, "authorization"}, {c.RateLimits, "rate_limits"}, {c.Voice, "voice"},
		{c.Defaults, "defaults"}, {c.Hooks, "hooks"}, {c.Attachments, "attachments"},
		{c.Usage, "usage"}, {c.Schedules, "schedules"}, {c.ToolApproval, "tool_approval"},
		{c.Traces, "traces"},
	} {
		if f.set {
			parts = append(parts, f.name)
		}
	}
	if len(r.NeedsRestart) > 0 {
		parts = append(parts, "needs a restart: "+strings.Join(r.NeedsRestart, ", "))
	}
	if len(parts) == 0 {
		return "nothing changed"
	}
	return strings.Join(parts, "; ")
}

// reload reads config.yaml again and applies it while hookroom runs: it
// builds the new plugin set and hook registry (reusing unchanged plugin
// processes; force restarts them all), starts the accounts of new agents
// and stops removed ones, provisions rooms, swaps the configuration and the
// registry in one step each, then fires config:reloaded. A configuration
// that does not load or validate changes nothing: the error names
// file:line and the running configuration stays in service. Turns in
// flight finish on the registry they started with.
func (b *Bot) reload(ctx context.Context, force bool) (ReloadReport, error) {
	b.reloadMu.Lock()
	defer b.reloadMu.Unlock()
	if b.db.Standby() {
		// It would log in new agents' accounts while the active hookroom
		// runs them; it reads config.yaml when it takes over instead.
		return ReloadReport{}, errors.New("failed to reload: this hookroom is a standby; it reads config.yaml when it takes over")
	}
	start := time.Now()
	old := b.w()
	cfg, err := config.Load(ctx, old.cfg.Path, b.opts.ConfigOptions...)
	if err != nil {
		return ReloadReport{}, fmt.Errorf("failed to reload: %w", err)
	}
	rep := ReloadReport{Config: config.Diff(old.cfg, cfg)}
	if rep.Config.Matrix {
		// The router's profile and the root space are applied all the
		// same; the rest of matrix takes a restart.
		wanted := cfg.Matrix
		cfg.Matrix = old.cfg.Matrix
		cfg.Matrix.Router.DisplayName, cfg.Matrix.Router.Avatar = wanted.Router.DisplayName, wanted.Router.Avatar
		cfg.Matrix.Space = wanted.Space
		if !reflect.DeepEqual(cfg.Matrix, wanted) {
			rep.NeedsRestart = append(rep.NeedsRestart, "matrix")
		}
	}
	if rep.Config.Storage {
		rep.NeedsRestart = append(rep.NeedsRestart, "data_dir/database")
		cfg.DataDir, cfg.Database = old.cfg.DataDir, old.cfg.Database
	}
	if rep.Config.Log {
		rep.NeedsRestart = append(rep.NeedsRestart, "log")
	}
	if rep.Config.SessionTTL {
		rep.NeedsRestart = append(rep.NeedsRestart, "http.session_ttl")
	}
	if rep.Config.PublicURL {
		rep.NeedsRestart = append(rep.NeedsRestart, "http.public_url")
	}
	if rep.Config.HTTPListen {
		rep.NeedsRestart = append(rep.NeedsRestart, "http.listen")
		cfg.HTTP.Listen = old.cfg.HTTP.Listen
	}

	next := &world{
		cfg: cfg, agents: map[hooks.AgentName]*matrixio.Account{}, accounts: maps.Clone(old.accounts),
		rooms: map[string]id.RoomID{}, joined: map[hooks.AgentName][]id.RoomID{},
		models: old.models, specs: old.specs, plugins: old.plugins, mcp: old.mcp,
	}
	if rep.Config.Models {
		if next.models, next.specs, err = buildModels(cfg); err != nil {
			return rep, fmt.Errorf("failed to reload: %w", err)
		}
	}

	// Plugins and the registry: built and validated before anything changes.
	var reg *hooks.Registry
	if b.opts.Registry == nil {
		set, r, err := b.loadPlugins(ctx, cfg, old.plugins, force)
		if err != nil {
			return rep, fmt.Errorf("failed to reload: %w", err)
		}
		next.plugins, reg = set, r
		rep.Plugins = set.Changes(old.plugins)
	}
	// MCP servers: unchanged ones carried over running, the others started
	// (a server that does not start is a warning, not a failed reload).
	if next.mcp, err = b.loadMCP(ctx, cfg, old.mcp, force); err != nil {
		b.discard(next, old)
		return rep, fmt.Errorf("failed to reload: %w", err)
	}
	rep.MCP = next.mcp.Changes(old.mcp)
	if err := applyTools(ctx, next); err != nil {
		b.discard(next, old)
		return rep, fmt.Errorf("failed to reload: %w", err)
	}

	// Accounts and rooms.
	agentsChanged := len(rep.Config.AgentsAdded)+len(rep.Config.AgentsRemoved)+len(rep.Config.AgentsChanged) > 0
	roomsChanged := len(rep.Config.RoomsAdded)+len(rep.Config.RoomsRemoved)+len(rep.Config.RoomsChanged) > 0
	if agentsChanged || roomsChanged {
		next.accounts = map[id.UserID]entity{}
		if err := b.startAccounts(ctx, next, old); err != nil {
			b.discard(next, old)
			return rep, fmt.Errorf("failed to reload: %w", err)
		}
		if err := b.provisionRooms(ctx, next); err != nil {
			b.discard(next, old)
			return rep, fmt.Errorf("failed to reload: %w", err)
		}
	} else {
		next.agents, next.accounts, next.rooms, next.joined = old.agents, old.accounts, old.rooms, old.joined
		// The rooms were not provisioned again; a changed root space is
		// brought up to date on its own (provisioning does it otherwise).
		if !reflect.DeepEqual(old.cfg.Matrix.Space, next.cfg.Matrix.Space) {
			b.syncSpace(ctx, next)
		}
	}

	if err := b.buildPolicy(ctx, next, old); err != nil {
		b.discard(next, old)
		return rep, fmt.Errorf("failed to reload: %w", err)
	}

	if rep.Config.RouterProfile && b.router != nil {
		if err := b.setRouterProfile(ctx, cfg); err != nil {
			b.discard(next, old)
			return rep, fmt.Errorf("failed to reload: %w", err)
		}
	}

	// Swap: from here on new events see the new configuration and hooks.
	next.reg = old.reg
	if reg != nil {
		next.reg = reg
	}
	b.state.Store(next) // configuration, accounts and hooks in one step
	rep.Took = time.Since(start)
	for user, e := range old.accounts {
		if _, kept := next.accounts[user]; !kept {
			b.emitLifecycleFor(ctx, old, hooks.AgentStopped, e, "removed from config.yaml")
			b.syncs.remove(user)
			e.account.SetPresence(ctx, event.PresenceOffline)
		}
	}
	for user, e := range next.accounts {
		if _, had := old.accounts[user]; !had {
			b.emitLifecycleFor(ctx, next, hooks.AgentStarted, e, "")
			b.syncs.add(b, e)
			e.account.SetPresence(ctx, event.PresenceOnline)
		}
	}
	if old.plugins != nil && old.plugins != next.plugins {
		_ = old.plugins.Close() // stops only what the new set does not use
	}
	if old.mcp != next.mcp {
		_ = old.mcp.Close() // likewise
	}
	b.emitReloaded(ctx, rep)
	zerolog.Ctx(ctx).Info().Str("changes", rep.Summary()).Str("took", logDuration(rep.Took)).Msg("configuration reloaded")
	return rep, nil
}

// reloadAndLog reloads as the file watcher does and logs a failure, one
// line per configuration problem (Reload logs a success itself).
func (b *Bot) reloadAndLog(ctx context.Context) {
	if _, err := b.Reload(ctx, false); err != nil {
		logErrors(zerolog.Ctx(ctx), zerolog.ErrorLevel, err, "configuration not reloaded; the running one stays in service")
	}
}

// discard closes what a failed reload started and the old world does not use.
func (b *Bot) discard(next, old *world) {
	if next.plugins != nil && next.plugins != old.plugins {
		_ = next.plugins.Close()
	}
	if next.mcp != old.mcp {
		_ = next.mcp.Close()
	}
}

func (b *Bot) emitReloaded(ctx context.Context, rep ReloadReport) {
	reg := b.w().reg
	if !reg.Has(hooks.ConfigReloaded.Name()) {
		return
	}
	names := func(s []string) []hooks.AgentName {
		out := make([]hooks.AgentName, len(s))
		for i, n := range s {
			out[i] = hooks.AgentName(n)
		}
		return out
	}
	c := &hooks.ConfigReloadedContext{
		AddedAgents: names(rep.Config.AgentsAdded), ChangedAgents: names(rep.Config.AgentsChanged),
		RemovedAgents: names(rep.Config.AgentsRemoved), PluginChanges: slices.Clone(rep.Plugins),
	}
	turn.Emit(context.WithoutCancel(ctx), reg, hooks.ConfigReloaded, c)
}
