package config

import (
	"path/filepath"
	"strings"
	"time"
)

// Defaults of fields whose zero value means "use the default".
const (
	DefaultDataDir              = "./data"
	DefaultDatabaseFile         = "hookroom.db"
	DefaultLogLevel             = "info"
	DefaultLogFormat            = "console"
	DefaultRouterUsername       = "router"
	DefaultRouterDisplayName    = "Router"
	DefaultSyncTimelineLimit    = 1000
	DefaultCollectorConcurrency = 64
	DefaultMaxDepth             = 3
	DefaultAttachmentMaxSize    = 20 * MiB
	DefaultAttachmentMaxText    = 256 * KiB
	DefaultAttachmentsPerTurn   = 4
	DefaultScheduleTimezone     = "UTC"
	DefaultMissedGrace          = Duration(time.Hour)
	DefaultTraceRetention       = Duration(14 * 24 * time.Hour)
	DefaultSessionTTL           = Duration(12 * time.Hour)
	// DefaultModelName is the model agents and the router use when they name
	// none and more than one model is configured.
	DefaultModelName = "default"
)

// ApplyDefaults fills every field left at its zero value with its default and
// resolves relative paths against Dir (the working directory when Dir is
// empty). Parse and Load call it; call it yourself on a Config built in code
// before Validate. It is idempotent.
func (c *Config) ApplyDefaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	c.DataDir = c.ResolvePath(c.DataDir)

	if c.Database.Type == "" {
		c.Database.Type = DatabaseSQLite
	}
	if c.Database.Type == DatabaseSQLite {
		uri := string(c.Database.URI)
		switch {
		case uri == "":
			c.Database.URI = Secret(filepath.Join(c.DataDir, DefaultDatabaseFile))
		case uri != ":memory:" && !strings.HasPrefix(uri, "file:"):
			c.Database.URI = Secret(c.ResolvePath(uri))
		}
	}

	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}

	if as := &c.Matrix.Registration.AppService; as.IsSet() && as.ID == "" {
		as.ID = DefaultAppServiceID
	}
	if c.Matrix.Router.Username == "" && c.Matrix.Router.Account.UserID != "" {
		c.Matrix.Router.Username = c.Matrix.Router.Account.UserID.Localpart()
	}
	if c.Matrix.Router.Username == "" {
		c.Matrix.Router.Username = DefaultRouterUsername
	}
	if c.Matrix.Router.DisplayName == "" {
		c.Matrix.Router.DisplayName = DefaultRouterDisplayName
	}
	// Empty and absent lists and maps mean the same; keep one form so that
	// Diff does not see a change between them.
	c.Matrix.BotAccounts = nilIfEmpty(c.Matrix.BotAccounts)
	c.Authorization.GlobalUsers = nilIfEmpty(c.Authorization.GlobalUsers)
	c.Authorization.InviteUsers = nilIfEmpty(c.Authorization.InviteUsers)
	if len(c.Authorization.RoomPermissions) == 0 {
		c.Authorization.RoomPermissions = nil
	}
	if c.Matrix.SyncTimelineLimit == 0 {
		c.Matrix.SyncTimelineLimit = DefaultSyncTimelineLimit
	}

	for name, m := range c.Models {
		if m.Provider == "" {
			m.Provider = ProviderOpenAI
		}
		c.Models[name] = m
	}
	defaultModel := c.defaultModel()
	c.applyTeams()
	for name, a := range c.Agents {
		if a.Username == "" && a.Account.UserID != "" {
			a.Username = a.Account.UserID.Localpart()
		}
		if a.Username == "" {
			a.Username = name
		}
		if a.DisplayName == "" {
			a.DisplayName = name
		}
		if a.Model == "" {
			a.Model = defaultModel
		}
		// An empty list and no list mean the same for rooms and tools (not
		// for plugins, where an empty allowlist means none).
		a.Rooms = nilIfEmpty(a.Rooms)
		a.Tools = nilIfEmpty(a.Tools)
		c.Agents[name] = a
	}
	if c.Router.Model == "" {
		c.Router.Model = defaultModel
	}

	for key, r := range c.Rooms {
		if r.Alias == "" && r.ID == "" {
			r.Alias = key
		}
		c.Rooms[key] = r
	}

	if c.Defaults.Streaming == nil {
		t := true
		c.Defaults.Streaming = &t
	}
	if c.Defaults.AdHocTeams == "" {
		c.Defaults.AdHocTeams = AdHocCollaborate
	}
	if c.Defaults.ModelCommand == "" {
		c.Defaults.ModelCommand = ModelCommandEveryone
	}
	if c.Defaults.ThreadMode == "" {
		c.Defaults.ThreadMode = ThreadModeThread
	}

	for i := range c.Plugins {
		p := &c.Plugins[i]
		if p.Path != "" {
			p.AbsPath = c.ResolvePath(p.Path)
		}
		for _, list := range [][]string{p.Sandbox.ReadOnly, p.Sandbox.ReadWrite} {
			for j, path := range list {
				if path != "" {
					list[j] = c.ResolvePath(path)
				}
			}
		}
		if len(p.Settings) == 0 {
			p.Settings = nil
		}
		if len(p.Hooks) == 0 {
			p.Hooks = nil
		}
	}

	c.applyMCPDefaults()

	if c.Hooks.CollectorConcurrency == 0 {
		c.Hooks.CollectorConcurrency = DefaultCollectorConcurrency
	}
	if c.Hooks.MaxDepth == 0 {
		c.Hooks.MaxDepth = DefaultMaxDepth
	}

	if c.Attachments.MaxSize == 0 {
		c.Attachments.MaxSize = DefaultAttachmentMaxSize
	}
	if c.Attachments.MaxTextSize == 0 {
		c.Attachments.MaxTextSize = DefaultAttachmentMaxText
	}
	if c.Attachments.MaxPerTurn == 0 {
		c.Attachments.MaxPerTurn = DefaultAttachmentsPerTurn
	}
	if c.Schedules.Timezone == "" {
		c.Schedules.Timezone = DefaultScheduleTimezone
	}
	if c.Schedules.MissedGrace == 0 {
		c.Schedules.MissedGrace = DefaultMissedGrace
	}
	if c.HTTP.SessionTTL == 0 {
		c.HTTP.SessionTTL = DefaultSessionTTL
	}
	// A retention written as 0 stays 0, and Validate refuses it: 0 would
	// read as "keep nothing" (or forever); only a missing key means the
	// default.
	if c.Traces.Retention == 0 && !c.written("traces.retention") {
		c.Traces.Retention = DefaultTraceRetention
	}
	c.applyPluginInstallDefaults()
	c.ToolApproval.Rules = nilIfEmpty(c.ToolApproval.Rules)
	for i, r := range c.ToolApproval.Rules {
		r.Tools, r.Agents, r.Rooms = nilIfEmpty(r.Tools), nilIfEmpty(r.Agents), nilIfEmpty(r.Rooms)
		c.ToolApproval.Rules[i] = r
	}
}

// defaultModel is the model used where none is named: the one called
// "default", else the only one configured, else none.
func (c *Config) defaultModel() string {
	if _, ok := c.Models[DefaultModelName]; ok {
		return DefaultModelName
	}
	if len(c.Models) == 1 {
		for name := range c.Models {
			return name
		}
	}
	return ""
}

func nilIfEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

// written reports whether the key at path was written in the file.
func (c *Config) written(path string) bool {
	_, ok := c.lines[path]
	return ok
}
