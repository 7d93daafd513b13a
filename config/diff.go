package config

import (
	"reflect"
	"slices"
	"strings"
)

// Changes is what differs between two configurations, as Diff reports it.
// Hot reload uses it to decide what to restart. Every list is sorted.
type Changes struct {
	// AgentsAdded, AgentsRemoved and AgentsChanged hold agent names. An agent
	// is changed when any field of its entry differs (not when only the model
	// it names changed: see Models).
	AgentsAdded, AgentsRemoved, AgentsChanged []string
	// RoomsAdded, RoomsRemoved and RoomsChanged hold room keys.
	RoomsAdded, RoomsRemoved, RoomsChanged []string
	// PluginsAdded, PluginsRemoved and PluginsChanged hold plugin identities
	// (PluginEntry.Identity). A plugin is changed when its entry differs
	// (settings, hook overrides, enabled).
	PluginsAdded, PluginsRemoved, PluginsChanged []string
	// MCPServersAdded, MCPServersRemoved and MCPServersChanged hold the
	// names of mcp_servers entries.
	MCPServersAdded, MCPServersRemoved, MCPServersChanged []string
	// PluginOrder is set when plugins present in both lists appear in a
	// different order (which changes hook order on priority ties).
	PluginOrder bool

	// Matrix is set when anything under matrix changed, except the
	// router's profile (see RouterProfile).
	Matrix bool
	// RouterProfile is set when matrix.router.display_name or
	// matrix.router.avatar changed; a reload applies it.
	RouterProfile bool
	// Models is set when any model was added, removed or changed.
	Models bool
	// Authorization is set when anything under authorization changed;
	// RateLimits when rate_limits did.
	Authorization bool
	RateLimits    bool
	// Voice is set when voice: changed.
	Voice bool
	// Router is set when router (the router's model) changed.
	Router bool
	// Defaults is set when anything under defaults changed.
	Defaults bool
	// Hooks is set when the hook engine settings changed.
	Hooks bool
	// Storage is set when data_dir or database changed (these need a restart).
	Storage bool
	// Log is set when log changed.
	Log bool
	// Attachments is set when the attachment limits changed.
	Attachments bool
	// Usage is set when the token budgets of the usage section changed.
	Usage bool
	// Schedules is set when the schedules section changed.
	Schedules bool
	// HTTPListen is set when http.listen changed (this needs a restart).
	HTTPListen bool
	// AdminToken is set when http.admin_token changed (it reloads live).
	AdminToken bool
	// ToolApproval is set when the tool_approval section changed.
	ToolApproval bool
	// SessionTTL is set when http.session_ttl changed (it takes a
	// restart).
	SessionTTL bool
	// PublicURL is set when http.public_url changed (it takes a restart).
	PublicURL bool
	// Traces is set when the traces section changed (it applies live).
	Traces bool
}

// Diff compares two configurations. A nil old configuration counts as empty
// (everything in new is added), and likewise for a nil new one.
func Diff(old, new *Config) Changes {
	if old == nil {
		old = &Config{}
	}
	if new == nil {
		new = &Config{}
	}
	var ch Changes
	ch.AgentsAdded, ch.AgentsRemoved, ch.AgentsChanged = diffMaps(old.Agents, new.Agents)
	ch.RoomsAdded, ch.RoomsRemoved, ch.RoomsChanged = diffMaps(old.Rooms, new.Rooms)
	ch.PluginsAdded, ch.PluginsRemoved, ch.PluginsChanged, ch.PluginOrder = diffPlugins(old.Plugins, new.Plugins)
	ch.MCPServersAdded, ch.MCPServersRemoved, ch.MCPServersChanged = diffMaps(old.MCPServers, new.MCPServers)

	a, r, c := diffMaps(old.Models, new.Models)
	ch.Models = len(a)+len(r)+len(c) > 0
	om, nm := old.Matrix, new.Matrix
	ch.RouterProfile = om.Router.DisplayName != nm.Router.DisplayName || om.Router.Avatar != nm.Router.Avatar
	om.Router.DisplayName, om.Router.Avatar = "", ""
	nm.Router.DisplayName, nm.Router.Avatar = "", ""
	ch.Matrix = !reflect.DeepEqual(om, nm)
	ch.Authorization = !reflect.DeepEqual(old.Authorization, new.Authorization)
	ch.RateLimits = !reflect.DeepEqual(old.RateLimits, new.RateLimits)
	ch.Voice = !reflect.DeepEqual(old.Voice, new.Voice)
	ch.Router = old.Router != new.Router
	ch.Defaults = old.Defaults.StreamingEnabled() != new.Defaults.StreamingEnabled() ||
		old.Defaults.ThreadMode != new.Defaults.ThreadMode
	ch.Hooks = old.Hooks != new.Hooks
	ch.Storage = old.DataDir != new.DataDir || old.Database != new.Database
	ch.Log = old.Log != new.Log
	ch.Attachments = old.Attachments != new.Attachments
	ch.Usage = !reflect.DeepEqual(old.Usage, new.Usage)
	ch.Schedules = old.Schedules != new.Schedules
	ch.HTTPListen = old.HTTP.Address() != new.HTTP.Address()
	ch.AdminToken = old.HTTP.AdminToken != new.HTTP.AdminToken
	ch.ToolApproval = !reflect.DeepEqual(old.ToolApproval, new.ToolApproval)
	ch.SessionTTL = old.HTTP.SessionTTL != new.HTTP.SessionTTL
	ch.PublicURL = old.HTTP.PublicURL != new.HTTP.PublicURL
	ch.Traces = old.Traces.IsEnabled() != new.Traces.IsEnabled() || old.Traces.Retention != new.Traces.Retention
	return ch
}

func diffMaps[V any](old, new map[string]V) (added, removed, changed []string) {
	for k, nv := range new {
		ov, ok := old[k]
		switch {
		case !ok:
			added = append(added, k)
		case !reflect.DeepEqual(ov, nv):
			changed = append(changed, k)
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			removed = append(removed, k)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}

func diffPlugins(old, new []PluginEntry) (added, removed, changed []string, reordered bool) {
	index := func(list []PluginEntry) map[string]PluginEntry {
		m := make(map[string]PluginEntry, len(list))
		for _, p := range list {
			m[p.Identity()] = p
		}
		return m
	}
	om, nm := index(old), index(new)
	added, removed, changed = diffMaps(om, nm)

	var oldOrder, newOrder []string
	for _, p := range old {
		if _, ok := nm[p.Identity()]; ok {
			oldOrder = append(oldOrder, p.Identity())
		}
	}
	for _, p := range new {
		if _, ok := om[p.Identity()]; ok {
			newOrder = append(newOrder, p.Identity())
		}
	}
	return added, removed, changed, !slices.Equal(oldOrder, newOrder)
}

// IsEmpty reports whether the two configurations were equivalent.
func (ch Changes) IsEmpty() bool {
	return reflect.DeepEqual(ch, Changes{})
}

// ListChanges renders the changes to one section's named entries the way
// Changes.String does: "name +added -removed ~changed", or "" when there
// are none.
func ListChanges(name string, added, removed, changed []string) string {
	var items []string
	for _, a := range added {
		items = append(items, "+"+a)
	}
	for _, r := range removed {
		items = append(items, "-"+r)
	}
	for _, c := range changed {
		items = append(items, "~"+c)
	}
	if len(items) == 0 {
		return ""
	}
	return name + " " + strings.Join(items, " ")
}

// String summarises the changes for a log line, e.g.
// "agents +ops -old ~code; plugins ~builtin:audit; models".
func (ch Changes) String() string {
	var parts []string
	list := func(name string, added, removed, changed []string) {
		if s := ListChanges(name, added, removed, changed); s != "" {
			parts = append(parts, s)
		}
	}
	list("agents", ch.AgentsAdded, ch.AgentsRemoved, ch.AgentsChanged)
	list("rooms", ch.RoomsAdded, ch.RoomsRemoved, ch.RoomsChanged)
	list("plugins", ch.PluginsAdded, ch.PluginsRemoved, ch.PluginsChanged)
	list("mcp_servers", ch.MCPServersAdded, ch.MCPServersRemoved, ch.MCPServersChanged)
	for _, f := range []struct {
		set  bool
		name string
	}{
		{ch.PluginOrder, "plugin order"}, {ch.Matrix, "matrix"}, {ch.RouterProfile, "router profile"}, {ch.Models, "models"},
		{ch.Authorization, "authorization"}, {ch.RateLimits, "rate_limits"}, {ch.Voice, "voice"}, {ch.Router, "router"}, {ch.Defaults, "defaults"},
		{ch.Hooks, "hooks"}, {ch.Storage, "storage"}, {ch.Log, "log"}, {ch.Attachments, "attachments"},
		{ch.Usage, "usage"}, {ch.Schedules, "schedules"},
		{ch.HTTPListen, "http.listen"}, {ch.AdminToken, "http.admin_token"}, {ch.ToolApproval, "tool_approval"},
		{ch.SessionTTL, "http.session_ttl"}, {ch.PublicURL, "http.public_url"}, {ch.Traces, "traces"},
	} {
		if f.set {
			parts = append(parts, f.name)
		}
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, "; ")
}
