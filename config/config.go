package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"
)

// Config is a decoded, defaulted and validated config.yaml. Load and Parse
// return it; the running server treats it as immutable (a reload builds a new
// one and compares the two with Diff).
//
// The zero value of every field is a sensible default; ApplyDefaults fills the
// derived ones (data directory, database file, usernames, model references).
type Config struct {
	// DataDir holds the database, persisted credentials and plugin state
	// (<data_dir>/plugins/<name>/). Default "./data"; a relative path is
	// resolved against the directory of the config file.
	DataDir string `yaml:"data_dir"`
	// Database selects the SQL database.
	Database Database `yaml:"database"`
	// Log configures the process log.
	Log Log `yaml:"log"`
	// Matrix is how the server reaches its homeserver and which accounts it uses.
	Matrix Matrix `yaml:"matrix"`
	// Agents maps an agent name (^[a-z0-9_-]+$, "router" is reserved) to its definition.
	Agents map[string]Agent `yaml:"agents"`
	// Rooms maps a room key to a room the agents live in.
	Rooms map[string]Room `yaml:"rooms"`
	// Authorization decides who may talk to the agents.
	Authorization Authorization `yaml:"authorization"`
	// RateLimits bound the messages people send to agents.
	RateLimits RateLimits `yaml:"rate_limits"`
	// Teams are agents that answer together: each has its own account,
	// name and rooms like an agent; its members answer and its leader
	// writes the reply. ApplyDefaults adds an entry under Agents for each.
	Teams map[string]Team `yaml:"teams"`
	// Delegation says which agents may ask which through delegate_to, and
	// how deep such chains go.
	Delegation Delegation `yaml:"delegation"`
	// Models maps a model name (used by agents.*.model and router.model) to a
	// model provider configuration.
	Models map[string]Model `yaml:"models"`
	// Router configures the router's own LLM use.
	Router Router `yaml:"router"`
	// Defaults applies to every agent.
	Defaults Defaults `yaml:"defaults"`
	// Plugins lists the plugins in order; the order breaks priority ties
	// between hooks.
	Plugins []PluginEntry `yaml:"plugins"`
	// Hooks configures the hook engine.
	Hooks HookEngine `yaml:"hooks"`
	// Attachments limits what people's files (images, text files, …) the
	// agents get.
	Attachments Attachments `yaml:"attachments"`
	// Usage sets daily token budgets (token usage is always recorded).
	Usage Usage `yaml:"usage"`
	// Schedules configures scheduled tasks (!schedule, the schedule tool).
	Schedules Schedules `yaml:"schedules"`
	// HTTP is the optional listener for health, readiness, metrics and the
	// admin API. Off unless http.listen is set.
	HTTP HTTP `yaml:"http"`
	// MCPServers maps a server name (^[a-z0-9_-]+$) to an MCP tool server
	// whose tools agents may call as mcp:NAME/TOOL.
	MCPServers map[string]MCPServer `yaml:"mcp_servers"`
	// ToolApproval decides which tool calls wait for a person's approval.
	ToolApproval ToolApproval `yaml:"tool_approval"`
	// Traces configures the recording of turn traces (what each turn did:
	// stages, hook runs, model and tool calls, approvals, delivery).
	Traces Traces `yaml:"traces"`
	// PluginInstall configures hookroom plugin install, update, remove
	// and list: the plugin directory and the limits of an install.
	PluginInstall PluginInstall `yaml:"plugin_install"`
	// Voice transcribes people's voice messages and may speak replies.
	// Off unless voice.transcription.base_url or voice.speech is set.
	Voice Voice `yaml:"voice"`

	// Path is the absolute path of the config file ("" for a Config built in code).
	Path string `yaml:"-"`
	// Dir is the directory relative paths are resolved against: the config
	// file's directory.
	Dir string `yaml:"-"`

	// file is the file name as given to Load/Parse, used in error messages.
	file string
	// lines maps a key path to the line of the key (or of the sequence item).
	lines map[string]int
	// fromEnv holds the key paths of values that came from ${VAR} substitution.
	fromEnv map[string]bool
	// envValues maps each value ${VAR} substitution produced to the text it
	// was written as; Errorf masks them.
	envValues map[string]string
	// masker masks envValues in messages (nil: nothing to mask); built
	// once by Parse, immutable, shared by clones.
	masker *strings.Replacer
}

// DatabaseType names an SQL database engine.
type DatabaseType string

// The supported database engines.
const (
	DatabaseSQLite   DatabaseType = "sqlite"
	DatabasePostgres DatabaseType = "postgres"
)

// Database selects the SQL database. The zero value is an SQLite file
// <data_dir>/hookroom.db.
type Database struct {
	// Type is "sqlite" (default) or "postgres".
	Type DatabaseType `yaml:"type"`
	// URI is the SQLite file path (relative paths are resolved against the
	// config directory; default <data_dir>/hookroom.db) or the PostgreSQL
	// connection string (required for postgres). It may hold a password, so
	// it is a Secret.
	URI Secret `yaml:"uri"`
	// Standby, for PostgreSQL only, makes a hookroom that finds another
	// one using the database wait as a hot standby (/readyz: "standby")
	// and take over when that one stops or dies. Default false: it is
	// refused (ErrDatabaseInUse), so that no one starts a second process
	// by mistake.
	Standby bool `yaml:"standby"`
}

// Log configures the process log.
type Log struct {
	// Level is "debug", "info" (default), "warn" or "error".
	Level string `yaml:"level"`
	// Format is "console" (default, human-readable; coloured only on a
	// terminal without NO_COLOR) or "json".
	Format string `yaml:"format"`
}

// Matrix says how to reach the homeserver and which accounts to use.
type Matrix struct {
	// Homeserver is the client-server API base URL, e.g. "https://matrix.example.org". Required.
	Homeserver string `yaml:"homeserver"`
	// ServerName is the server part of user ids and aliases ("example.org").
	// The server needs it to run (hookroom check and run report it missing);
	// configuration tooling may leave it out.
	ServerName string `yaml:"server_name"`
	// Registration is how missing accounts are created. All empty: accounts
	// must already exist (their credentials persisted in the data directory).
	Registration Registration `yaml:"registration"`
	// Router is the router account.
	Router RouterAccount `yaml:"router"`
	// BotAccounts lists other bots' user ids; their membership events and
	// messages are ignored.
	BotAccounts []id.UserID `yaml:"bot_accounts"`
	// SyncTimelineLimit is the timeline limit of the sync filter. Default 1000.
	SyncTimelineLimit int `yaml:"sync_timeline_limit"`
	// Encryption configures end-to-end encryption, which every account
	// supports.
	Encryption Encryption `yaml:"encryption"`
	// Space, when set, makes the router keep a Matrix Space that holds
	// every room hookroom provisions. Off when absent.
	Space *Space `yaml:"space"`
}

// Space is matrix.space: the root Matrix Space of hookroom's rooms.
type Space struct {
	// Name is the space's name, set when it is created. Default "hookroom".
	Name string `yaml:"name"`
	// Alias is the space's alias, a localpart ("hookroom") or a full alias
	// on this homeserver ("#hookroom:example.org"); the space is found by
	// it on restart. Default "hookroom-space".
	Alias string `yaml:"alias"`
}

// DefaultSpaceAlias is matrix.space.alias's default localpart.
const DefaultSpaceAlias = "hookroom-space"

// FullAlias returns the space's alias on server.
func (s Space) FullAlias(server string) id.RoomAlias {
	a := s.Alias
	if a == "" {
		a = DefaultSpaceAlias
	}
	if strings.HasPrefix(a, "#") {
		return id.RoomAlias(a)
	}
	return id.NewRoomAlias(a, server)
}

// DisplayName returns the space's name, "hookroom" by default.
func (s Space) DisplayName() string {
	if s.Name == "" {
		return "hookroom"
	}
	return s.Name
}

// Who may verify hookroom's accounts interactively
// (matrix.encryption.verification).
const (
	// VerificationAdmins accepts verification requests from global users
	// and refuses everyone else's. The default.
	VerificationAdmins = "admins"
	// VerificationOff refuses every verification request.
	VerificationOff = "off"
)

// Which devices receive the keys of encrypted messages
// (matrix.encryption.share_keys_with).
const (
	// ShareKeysWithAll shares with every device of the room's members, as
	// Element does. The default.
	ShareKeysWithAll = "all"
	// ShareKeysWithCrossSigned shares only with devices their owner signed
	// with their cross-signing key.
	ShareKeysWithCrossSigned = "cross_signed"
)

// Encryption configures end-to-end encryption.
type Encryption struct {
	// ShareKeysWith picks the devices that can read hookroom's messages in
	// encrypted rooms: "all" (default) or "cross_signed".
	ShareKeysWith string `yaml:"share_keys_with"`
	// DecryptGraceMS is how long a message whose keys have not arrived is
	// waited for before hookroom tells the room it cannot read it.
	// Default 30000.
	DecryptGraceMS int `yaml:"decrypt_grace_ms"`
	// RecoveryKey is the recovery key (Element's format, as `hookroom e2ee
	// recovery-key` prints it) of every account's secret storage. When set,
	// the accounts back up their room keys on the homeserver and a fresh
	// database restores them from there. Empty: no key backup.
	RecoveryKey Secret `yaml:"recovery_key"`
	// KeyBackup, with RecoveryKey, uploads the accounts' room keys to the
	// backup (default true); false only restores from an existing backup.
	KeyBackup *bool `yaml:"key_backup"`
	// Verification says who may verify the accounts interactively
	// (Element's "Verify user", emoji): "admins" (default: global users)
	// or "off".
	Verification string `yaml:"verification"`
}

// VerificationMode returns Verification with its default.
func (e Encryption) VerificationMode() string {
	if e.Verification == "" {
		return VerificationAdmins
	}
	return e.Verification
}

// BackupUpload reports whether the accounts upload their room keys to the
// key backup (matrix.encryption.key_backup, default true).
func (e Encryption) BackupUpload() bool { return e.KeyBackup == nil || *e.KeyBackup }

// DecryptGrace returns DecryptGraceMS as a duration, 0 for the default.
func (e Encryption) DecryptGrace() time.Duration {
	return time.Duration(e.DecryptGraceMS) * time.Millisecond
}

// Registration creates missing accounts. At most one of the three may be
// set.
type Registration struct {
	// SharedSecret is the homeserver's registration shared secret
	// (/_synapse/admin/v1/register; Synapse and Dendrite).
	SharedSecret Secret `yaml:"shared_secret"`
	// Token is a registration token (m.login.registration_token).
	Token Secret `yaml:"token"`
	// AppService registers and logs in the accounts through an
	// application service registered with the homeserver: no password and
	// no shared secret. `hookroom appservice registration` writes the
	// registration file.
	AppService AppService `yaml:"appservice"`
}

// DefaultAppServiceID is matrix.registration.appservice.id's default.
const DefaultAppServiceID = "hookroom"

// AppService is the application service hookroom's accounts belong to
// (matrix.registration.appservice). The zero value means none. hookroom
// receives no transactions from the homeserver: every account still syncs
// on its own, as encryption needs.
type AppService struct {
	// ID is the registration's id, unique among the homeserver's
	// application services. Default "hookroom".
	ID string `yaml:"id"`
	// ASToken is the token hookroom authenticates with as the application
	// service (the registration's as_token). Required in this mode.
	ASToken Secret `yaml:"as_token"`
	// HSToken is the registration's hs_token, which the homeserver would
	// send to hookroom. hookroom receives no transactions and never checks
	// it; it is kept here only so that generating the registration again
	// gives the same file. Optional.
	HSToken Secret `yaml:"hs_token"`
	// UserPrefix, when set, makes the registration's user namespace every
	// localpart starting with it (@<prefix>.*:server), so that agents can
	// be added without changing the homeserver's configuration; the router
	// and every agent hookroom creates must then start with it. Empty: the
	// namespace lists the router and the agents by name.
	UserPrefix string `yaml:"user_prefix"`
}

// IsSet reports whether any field of the application service is set.
func (a AppService) IsSet() bool { return a != AppService{} }

// RouterAccount is the Matrix account of the router.
type RouterAccount struct {
	// Username is the router's localpart. Default "router".
	Username string `yaml:"username"`
	// DisplayName is the router's display name. Default "Router".
	DisplayName string `yaml:"display_name"`
	// Avatar is the router's profile picture: an mxc:// URI, or an image
	// file (relative paths against the config directory) that hookroom
	// uploads once. Empty leaves the profile picture alone.
	Avatar string `yaml:"avatar"`
	// Account is an existing account to use instead of creating one.
	Account Account `yaml:"account"`
}

// Account is an existing Matrix account hookroom uses instead of creating
// one: for homeservers without registration, or behind Matrix
// Authentication Service (OIDC), where hookroom cannot log in with a
// password and gets an access token instead. Every value may come from
// ${VAR}. The zero value means none: hookroom creates the account with
// matrix.registration (or finds its credentials in the database).
type Account struct {
	// UserID is the account's full user id ("@assistant:example.org"),
	// on matrix.server_name. Required when the account is configured; the
	// username defaults to its localpart.
	UserID id.UserID `yaml:"user_id"`
	// AccessToken is a token of a login (a device) of the account, for
	// example one Matrix Authentication Service issued. Checked with
	// whoami at every start; never used to create anything.
	AccessToken Secret `yaml:"access_token"`
	// DeviceID is the token's device, for homeservers whose whoami does not
	// say it. Only with access_token.
	DeviceID id.DeviceID `yaml:"device_id"`
	// Password logs the account in (m.login.password) when there is no
	// access token, or the token is rejected, or the database was lost.
	// With an access_token too, the token is used and the password is the
	// fallback.
	Password Secret `yaml:"password"`
}

// IsSet reports whether any field of the account is set.
func (a Account) IsSet() bool { return a != Account{} }

// Agent is one LLM-backed chat agent with its own Matrix account.
type Agent struct {
	// DisplayName is the account's display name. Default: the agent name.
	DisplayName string `yaml:"display_name"`
	// Username is the account's localpart. Default: the localpart of
	// account.user_id, else the agent name.
	Username string `yaml:"username"`
	// Avatar is the account's profile picture: an mxc:// URI, or an image
	// file (relative paths against the config directory) that hookroom
	// uploads once. Empty leaves the profile picture alone.
	Avatar string `yaml:"avatar"`
	// Account is an existing account to use instead of creating one.
	Account Account `yaml:"account"`
	// Role is a one-line description (shown to the router and in !help).
	Role string `yaml:"role"`
	// Instructions are added to the agent's system prompt.
	Instructions string `yaml:"instructions"`
	// Model names an entry of models. Default: the model named "default",
	// else the only model configured.
	Model string `yaml:"model"`
	// Rooms lists room keys (of rooms), room ids ("!…") or aliases ("#…:server")
	// the agent joins and answers in.
	Rooms []string `yaml:"rooms"`
	// Tools selects the tools the agent may call: tool names, globs over
	// them ("web_*") or over qualified names SOURCE/TOOL, where SOURCE is
	// "builtin", a plugin's name or "mcp:SERVER" ("my_plugin/*"). Validate
	// checks the syntax; whether they name tools is checked where the
	// plugins are known (hookroom check, start-up, reload).
	Tools []string `yaml:"tools"`
	// Plugins is an allowlist of plugin names whose hooks run for this agent:
	// nil (key absent) means every plugin, an empty list means none.
	Plugins []string `yaml:"plugins"`
	// DailyTokenBudget bounds the tokens this agent's turns may use per UTC
	// day, over every room and person; 0 is unlimited. Absent (nil): the
	// agent gets usage.daily_tokens_per_agent.
	DailyTokenBudget *int `yaml:"daily_token_budget"`
	// Delegate lists the agents this agent may ask through the
	// delegate_to tool (agent names or "*"), besides delegation.rules.
	Delegate []string `yaml:"delegate"`

	// team is set for the entry ApplyDefaults makes for a team of teams:
	// a team answers like an agent (its own account, rooms, mentions), its
	// members and leader write the answer.
	team bool
}

// IsTeam reports whether the agent is a team (config.yaml's teams:).
func (a Agent) IsTeam() bool { return a.team }

// DailyTokens returns the agent's daily token budget: DailyTokenBudget, or
// else u's daily_tokens_per_agent (0: unlimited).
func (a Agent) DailyTokens(u Usage) int {
	if a.DailyTokenBudget != nil {
		return *a.DailyTokenBudget
	}
	return u.DailyTokensPerAgent
}

// Room is a room the agents live in, by key.
type Room struct {
	// Alias is a full alias ("#lobby:example.org") or its localpart ("lobby").
	// Default: the room key, unless ID is set.
	Alias string `yaml:"alias"`
	// ID is the room id ("!…"), for rooms that already exist.
	ID id.RoomID `yaml:"id"`
	// Name is the room name used when the room is created.
	Name string `yaml:"name"`
	// Topic is the room topic used when the room is created.
	Topic string `yaml:"topic"`
	// Invite lists people the router invites into the room at start-up
	// and on reload (those already in the room are left alone).
	Invite []id.UserID `yaml:"invite"`
	// Encryption turns on end-to-end encryption when hookroom creates the
	// room. Default true, as Element does for private rooms. Rooms that
	// exist already are left as they are (encryption cannot be turned off).
	Encryption *bool `yaml:"encryption"`
	// ThreadMode is where the agents reply in this room: "thread" or
	// "room"; empty means defaults.thread_mode.
	ThreadMode ThreadMode `yaml:"thread_mode"`
}

// Encrypted reports whether the room is created with encryption.
func (r Room) Encrypted() bool { return r.Encryption == nil || *r.Encryption }

// FullAlias returns the room's alias with the server part: Alias itself when
// it is already a full alias, otherwise #Alias:serverName. It returns "" when
// the room has no alias, or only a localpart and serverName is "".
func (r Room) FullAlias(serverName string) id.RoomAlias {
	switch {
	case strings.HasPrefix(r.Alias, "#"):
		return id.RoomAlias(r.Alias)
	case r.Alias == "" || serverName == "":
		return ""
	default:
		return id.NewRoomAlias(r.Alias, serverName)
	}
}

// Authorization decides who may talk to the agents.
type Authorization struct {
	// GlobalUsers may talk to agents in every room and in direct messages
	// and run admin commands: user ids, or user patterns ("@*:example.org",
	// "@ops-*:example.org"; the matching rules are in docs/operations.md).
	GlobalUsers []id.UserID `yaml:"global_users"`
	// RoomPermissions maps a room key, room id or alias to the users allowed there.
	RoomPermissions map[string][]id.UserID `yaml:"room_permissions"`
	// DefaultRoomAccess lets everyone talk to agents in rooms that have no
	// room_permissions entry. Default false.
	DefaultRoomAccess bool `yaml:"default_room_access"`
	// InviteUsers may invite the router and every agent into rooms of their
	// own (direct messages, ad-hoc rooms), besides the global users: user
	// ids, or "@*:server" for every user of a server. The accounts join and
	// remember the room; the inviter may then talk to the agents there.
	// Empty (the default): only global users' invites are accepted.
	InviteUsers []UserPattern `yaml:"invite_users"`
	// Aliases maps a pattern of puppet accounts (a bridge's users) to the
	// user they stand for: every rule is then about that person.
	Aliases map[string]id.UserID `yaml:"aliases"`
	// DM is the DM policy of agents that set none: allowlist (the
	// default), open or pairing.
	DM string `yaml:"dm"`
	// Agents holds per-agent rules: who each agent answers (reply_to) and
	// its DM policy.
	Agents map[string]AgentAuthorization `yaml:"agents"`
	// Pairing tunes the one-time codes of DM policy pairing.
	Pairing Pairing `yaml:"pairing"`
}

// AgentAuthorization are one agent's rules.
type AgentAuthorization struct {
	// ReplyTo, when set, is the complete list of who the agent answers
	// (besides global users): user patterns, "*", "room:REF" (anyone
	// writing in that room) or "members:REF" (anyone joined to that room).
	ReplyTo []string `yaml:"reply_to"`
	// DM is the agent's DM policy (allowlist, open, pairing); empty: the
	// authorization's dm.
	DM string `yaml:"dm"`
}

// Pairing tunes pairing codes.
type Pairing struct {
	// CodeTTL is how long a code stays valid. Default 1h.
	CodeTTL Duration `yaml:"code_ttl"`
	// MaxPendingCodes bounds the codes waiting for an administrator. Default 100.
	MaxPendingCodes int `yaml:"max_pending_codes"`
}

// RateLimits bound how many messages people send to agents, separately
// from token budgets. The zero value limits nothing.
type RateLimits struct {
	// PerPerson bounds one person's messages to agents, everywhere.
	PerPerson Rate `yaml:"per_person"`
	// PerRoom bounds the messages to agents in one room, over everyone.
	PerRoom Rate `yaml:"per_room"`
	// Agents adds limits for single agents, by agent name.
	Agents map[string]AgentRateLimits `yaml:"agents"`
	// MaxBuckets bounds the buckets kept in memory per limit. Default 10000.
	MaxBuckets int `yaml:"max_buckets"`
}

// AgentRateLimits are the limits on the messages to one agent.
type AgentRateLimits struct {
	PerPerson Rate `yaml:"per_person"`
	PerRoom   Rate `yaml:"per_room"`
}

// Rate is a token bucket: PerMinute messages a minute on average, up to
// Burst at once (default: PerMinute rounded up). PerMinute 0: no limit.
type Rate struct {
	PerMinute float64 `yaml:"per_minute"`
	Burst     int     `yaml:"burst"`
}

// UserPattern names Matrix users: one user id ("@alice:example.org"), or
// every user of one server ("@*:example.org").
type UserPattern string

// serverWildcard starts a UserPattern that names a whole server.
const serverWildcard = "@*:"

// Matches reports whether user is named by p.
func (p UserPattern) Matches(user id.UserID) bool {
	if server, ok := strings.CutPrefix(string(p), serverWildcard); ok {
		return user.Homeserver() == server && user.Localpart() != ""
	}
	return id.UserID(p) == user
}

// valid reports whether p is a user id or a server pattern. A "*" is a
// wildcard only as the whole localpart: "@bob*:example.org" is refused
// rather than taken for a user of that name.
func (p UserPattern) valid() bool {
	if server, ok := strings.CutPrefix(string(p), serverWildcard); ok {
		return id.ValidateServerName(server)
	}
	_, _, err := id.UserID(p).ParseAndValidateRelaxed()
	return err == nil && !strings.Contains(string(p), "*")
}

// MayInvite reports whether user's invites are accepted: a global user or
// a user that invite_users names. It is asked for every invite and, in
// rooms an account joined on an invite, for every message of the inviter.
func (a Authorization) MayInvite(user id.UserID) bool {
	if slices.Contains(a.GlobalUsers, user) {
		return true
	}
	return slices.ContainsFunc(a.InviteUsers, func(p UserPattern) bool { return p.Matches(user) })
}

// Provider names a model provider.
type Provider string

// The supported model providers.
const (
	// ProviderOpenAI is any OpenAI-compatible chat completions API.
	ProviderOpenAI Provider = "openai"
	// ProviderAnthropic is Anthropic's Messages API (Claude), spoken
	// natively: streaming, tool use, prompt caching.
	ProviderAnthropic Provider = "anthropic"
	// ProviderEcho answers by echoing, for offline demos and tests.
	ProviderEcho Provider = "echo"
)

// Model is one model a provider serves.
type Model struct {
	// Provider is "openai" (default; any OpenAI-compatible API),
	// "anthropic" (Anthropic's Messages API) or "echo".
	Provider Provider `yaml:"provider"`
	// BaseURL is the API base URL; empty means the provider's default
	// (openai: https://api.openai.com/v1; anthropic:
	// https://api.anthropic.com).
	BaseURL string `yaml:"base_url"`
	// APIKey authenticates to the API; may be empty for local servers.
	APIKey Secret `yaml:"api_key"`
	// Model is the provider's model id ("gpt-4o-mini",
	// "claude-sonnet-4-5"). Required for openai and anthropic.
	Model string `yaml:"model"`
	// MaxTokens bounds the length of each reply, in tokens. 0 leaves it to
	// the server for openai; anthropic requires a bound and defaults to
	// 8192.
	MaxTokens int `yaml:"max_tokens"`
	// ContextWindow is the model's context size in tokens; 0 means unknown.
	ContextWindow int `yaml:"context_window"`
	// Vision says that the model accepts images (OpenAI-compatible
	// image_url content parts). Default false: images sent to an agent on
	// this model reach it as a text placeholder, and the person is told.
	Vision bool `yaml:"vision"`
}

// Router configures the router's LLM use (picking a responder when several
// agents could answer).
type Router struct {
	// Model names an entry of models. Default as for agents.
	Model string `yaml:"model"`
}

// ThreadMode says where agents reply.
type ThreadMode string

// The thread modes.
const (
	// ThreadModeThread replies in a thread rooted at the message (default).
	ThreadModeThread ThreadMode = "thread"
	// ThreadModeRoom replies in the main timeline.
	ThreadModeRoom ThreadMode = "room"
)

// Defaults apply to every agent.
type Defaults struct {
	// Streaming sends a placeholder and edits it while the model streams.
	// Default true (nil means true).
	Streaming *bool `yaml:"streaming"`
	// ThreadMode is "thread" (default) or "room".
	ThreadMode ThreadMode `yaml:"thread_mode"`
	// AdHocTeams says how a message that mentions several agents is
	// answered: "collaborate" (default: every mentioned agent answers, the
	// first synthesises), "coordinate" (the first plans, asks the others
	// and synthesises) or "off" (the first mentioned answers alone).
	AdHocTeams string `yaml:"ad_hoc_teams"`
	// ModelCommand says who may choose a conversation's or a room's model
	// with !model: "everyone" (default: whoever may talk to the agents
	// there), "admins" (global_users) or "off".
	ModelCommand ModelCommand `yaml:"model_command"`
	// ConfigCommand turns on !config: global users may show, and change
	// from chat, an allow-listed set of settings of a room's agents
	// (model, instructions, tools). Each change waits for a ✅ of the
	// person who proposed it, then is written to config.yaml (comments
	// kept), validated and reloaded like a file edit. Default false.
	ConfigCommand bool `yaml:"config_command"`
}

// ModelCommand is defaults.model_command.
type ModelCommand string

// The values of defaults.model_command.
const (
	ModelCommandEveryone ModelCommand = "everyone"
	ModelCommandAdmins   ModelCommand = "admins"
	ModelCommandOff      ModelCommand = "off"
)

// StreamingEnabled reports whether replies stream (nil Streaming means yes).
func (d Defaults) StreamingEnabled() bool { return d.Streaming == nil || *d.Streaming }

// HookEngine configures the hook engine.
type HookEngine struct {
	// CollectorConcurrency bounds the hooks a collector emission runs at once. Default 64.
	CollectorConcurrency int `yaml:"collector_concurrency"`
	// MaxDepth bounds nested emissions along one causal chain. Default 3.
	MaxDepth int `yaml:"max_depth"`
}

// Attachments limits what people's attachments the agents get. Zero values
// mean the defaults.
type Attachments struct {
	// MaxSize is the largest attachment hookroom downloads at all: images
	// for models with vision, and files plugins fetch. Default 20MiB.
	MaxSize ByteSize `yaml:"max_size"`
	// MaxTextSize is the largest text file given to the model as text.
	// Default 256KiB.
	MaxTextSize ByteSize `yaml:"max_text_size"`
	// MaxPerTurn is how many attachments of one message the model gets;
	// the others are only named. Default 4.
	MaxPerTurn int `yaml:"max_per_turn"`
}

// Usage sets daily token budgets. Days are UTC days: a budget used up
// today is available again at 00:00 UTC. A turn may start while anything
// is left and then go beyond; the next one is refused (the person is told,
// no model is called). The zero value sets no budget.
type Usage struct {
	// DailyTokensPerUser bounds the tokens (input and output) one person's
	// turns may use per UTC day, over every agent and room. 0: unlimited.
	DailyTokensPerUser int `yaml:"daily_tokens_per_user"`
	// DailyTokensPerAgent bounds the tokens each agent's turns may use per
	// UTC day, over every room and person, unless the agent sets
	// daily_token_budget. 0: unlimited.
	DailyTokensPerAgent int `yaml:"daily_tokens_per_agent"`
	// AlertAt are the shares of a daily budget at which usage:budget_reached
	// fires, once each per budget and day, for the turn that crosses it.
	// Default [0.8, 1].
	AlertAt []float64 `yaml:"alert_at"`
}

// DefaultAlertAt are usage.alert_at's default shares.
var DefaultAlertAt = []float64{0.8, 1}

// Alerts returns AlertAt, or its default.
func (u Usage) Alerts() []float64 {
	if len(u.AlertAt) == 0 {
		return DefaultAlertAt
	}
	return u.AlertAt
}

// Schedules configures scheduled tasks. The zero value reads wall-clock
// times in UTC and fires tasks up to an hour late.
type Schedules struct {
	// Timezone is the IANA time zone ("Europe/Berlin") in which the
	// wall-clock times of new schedules are read: "at 9:00", "every weekday
	// at 9:00", cron expressions. A task keeps the zone it was created in.
	// Default "UTC" (never the server's local zone, which changes with the
	// machine).
	Timezone string `yaml:"timezone"`
	// MissedGrace is how late a task may still fire, after hookroom was
	// down or the homeserver unreachable: a task due longer ago than that
	// is reported as missed in its thread instead. Default 1h.
	MissedGrace Duration `yaml:"missed_grace"`
}

// Location returns the time zone of Timezone (UTC when unset or unknown;
// Validate rejects unknown zones).
func (s Schedules) Location() *time.Location {
	if s.Timezone == "" {
		return time.UTC
	}
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// HTTP configures the one HTTP listener: /healthz, /readyz, /metrics and,
// with an admin token, the admin API under /api/v1/. The zero value is off.
type HTTP struct {
	// Listen is the address to listen on: "host:port", or a port alone
	// (":8080" or "8080"), which listens on 127.0.0.1 only. Empty: no
	// listener. Changing it takes a restart.
	Listen string `yaml:"listen"`
	// AdminToken is the bearer token of the admin API (at least 16
	// characters; use ${VAR}). Unset: the admin API is off (404). It
	// reloads live.
	AdminToken Secret `yaml:"admin_token"`
	// SessionTTL is how long a sign-in to the operator console (served at
	// / on the listener when AdminToken is set) lasts. Default 12h.
	// Changing it takes a restart.
	SessionTTL Duration `yaml:"session_ttl"`
	// PublicURL is the URL operators reach the listener at, when a proxy
	// in front of it terminates TLS (https://hookroom.example.org): the
	// console's cookies are then marked Secure although the listener
	// speaks plain HTTP. Changing it takes a restart.
	PublicURL string `yaml:"public_url"`
}

// Traces configures turn traces. The zero value records them and keeps
// them for 14 days.
type Traces struct {
	// Enabled false stops recording traces (those recorded are kept until
	// they expire). nil means enabled.
	Enabled *bool `yaml:"enabled"`
	// Retention is how long a trace is kept. Default 336h (14 days); a
	// value written must be positive.
	Retention Duration `yaml:"retention"`
}

// IsEnabled reports whether traces are recorded (Enabled nil or true).
func (t Traces) IsEnabled() bool { return t.Enabled == nil || *t.Enabled }

// MinAdminTokenLength is the shortest admin token accepted.
const MinAdminTokenLength = 16

// Address returns the address to listen on ("127.0.0.1:8080" for ":8080"
// or "8080"), or "" when the listener is off.
func (h HTTP) Address() string {
	l := strings.TrimSpace(h.Listen)
	if l == "" {
		return ""
	}
	if !strings.Contains(l, ":") {
		return "127.0.0.1:" + l
	}
	if strings.HasPrefix(l, ":") {
		return "127.0.0.1" + l
	}
	return l
}

// AgentNames returns the agent names, sorted.
func (c *Config) AgentNames() []string { return sortedKeys(c.Agents) }

// RoomKeys returns the room keys, sorted.
func (c *Config) RoomKeys() []string { return sortedKeys(c.Rooms) }

// IsMXC reports whether an avatar value is an mxc:// URI rather than a file.
func IsMXC(avatar string) bool { return strings.HasPrefix(avatar, "mxc://") }

// ResolvePath resolves p against the config directory: an absolute p is
// returned cleaned, a relative one joined to Dir. Use it for plugin paths.
func (c *Config) ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	dir := c.Dir
	if dir == "" {
		if abs, err := filepath.Abs("."); err == nil {
			dir = abs
		}
	}
	return filepath.Join(dir, p)
}

// PluginStateDir returns <data_dir>/plugins/<name>/, the state root of the
// plugin with that name.
func (c *Config) PluginStateDir(name string) string {
	return filepath.Join(c.DataDir, "plugins", name)
}

// Line returns the line where the key at path (e.g. "agents.code.model") was
// written, or the line of its nearest written ancestor, or 0. Other packages
// use it to point their own configuration errors at the file.
func (c *Config) Line(path string) int {
	for path != "" {
		if l, ok := c.lines[path]; ok {
			return l
		}
		path = parentPath(path)
	}
	return 0
}

// Errorf builds an *Error for the key at path, with the file and line of this
// configuration. Other packages use it for problems they find in their part
// of the configuration (an unknown hook name in an override, a plugin whose
// manifest is missing). Never pass secret values as arguments.
func (c *Config) Errorf(path, format string, args ...any) *Error {
	return &Error{File: c.fileName(), Line: c.Line(path), Path: path, Msg: maskEnv(fmt.Sprintf(format, args...), c.masker)}
}

func (c *Config) fileName() string {
	if c.file != "" {
		return c.file
	}
	return c.Path
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
