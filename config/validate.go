package config

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix/crypto/utils"
	"maunium.net/go/mautrix/id"
)

// nameRE is the grammar of agent names, room keys and built-in plugin names.
var nameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

// ReservedAgentName may not be used as an agent name: it is the router's.
const ReservedAgentName = "router"

// Validate checks the configuration after ApplyDefaults and reports every
// problem as an ErrorList sorted by line (nil when the configuration is
// valid). Parse and Load call it. Messages never contain secret values.
func (c *Config) Validate() error {
	return c.validate().asError()
}

type validator struct {
	c    *Config
	errs ErrorList
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, v.c.Errorf(path, format, args...))
}

func (c *Config) validate() ErrorList {
	v := &validator{c: c}
	v.storage()
	v.matrix()
	v.models()
	v.rooms()
	v.agents()
	v.authorization()
	v.plugins()
	v.mcpServers()
	v.engine()
	v.attachments()
	v.usage()
	v.schedules()
	v.http()
	v.toolApproval()
	v.traces()
	v.pluginInstall()
	v.voice()
	sortErrors(v.errs)
	return v.errs
}

func (v *validator) storage() {
	c := v.c
	if c.DataDir == "" {
		v.errorf("data_dir", "must not be empty")
	}
	switch c.Database.Type {
	case DatabaseSQLite:
		if c.Database.URI == "" {
			v.errorf("database.uri", "must not be empty")
		}
	case DatabasePostgres:
		if c.Database.URI == "" {
			v.errorf("database.uri", "is required for postgres")
		}
	default:
		v.errorf("database.type", "must be %q or %q, not %q", DatabaseSQLite, DatabasePostgres, c.Database.Type)
	}
	if c.Database.Standby && c.Database.Type != DatabasePostgres {
		v.errorf("database.standby", "needs type: postgres (a standby takes over a database another machine can reach; SQLite is a file of one machine)")
	}
	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "console", "json")
}

func (v *validator) oneOf(path, val string, allowed ...string) {
	if slices.Contains(allowed, val) {
		return
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(a)
	}
	v.errorf(path, "must be one of %s, not %q", strings.Join(quoted, ", "), val)
}

func (v *validator) matrix() {
	m := v.c.Matrix
	if m.Homeserver == "" {
		v.errorf("matrix.homeserver", "is required (the homeserver's client API URL, e.g. https://matrix.example.org)")
	} else {
		v.httpURL("matrix.homeserver", m.Homeserver)
	}
	if m.ServerName != "" && !id.ValidateServerName(m.ServerName) {
		v.errorf("matrix.server_name", "%q is not a valid server name (e.g. example.org)", m.ServerName)
	}
	methods := 0
	for _, set := range []bool{m.Registration.SharedSecret.IsSet(), m.Registration.Token.IsSet(), m.Registration.AppService.IsSet()} {
		if set {
			methods++
		}
	}
	if methods > 1 {
		v.errorf("matrix.registration", "set at most one of shared_secret, token and appservice")
	}
	v.appService()
	if err := id.ValidateUserLocalpart(m.Router.Username); err != nil {
		v.errorf("matrix.router.username", "%q is not a valid Matrix localpart (allowed: a-z 0-9 . _ = - / +)", m.Router.Username)
	}
	v.account("matrix.router", m.Router.Username, m.Router.Account)
	v.avatar("matrix.router.avatar", m.Router.Avatar)
	v.userIDs("matrix.bot_accounts", m.BotAccounts)
	if m.SyncTimelineLimit < 0 {
		v.errorf("matrix.sync_timeline_limit", "must be positive, not %d", m.SyncTimelineLimit)
	}
	if m.Encryption.ShareKeysWith != "" {
		v.oneOf("matrix.encryption.share_keys_with", m.Encryption.ShareKeysWith, ShareKeysWithAll, ShareKeysWithCrossSigned)
	}
	if m.Encryption.DecryptGraceMS < 0 {
		v.errorf("matrix.encryption.decrypt_grace_ms", "must be positive, not %d", m.Encryption.DecryptGraceMS)
	}
	if rk := m.Encryption.RecoveryKey; rk != "" && utils.DecodeBase58RecoveryKey(rk.Reveal()) == nil {
		v.errorf("matrix.encryption.recovery_key", "is not a recovery key (48 base58 characters in groups of four, as `hookroom e2ee recovery-key` prints)")
	}
	if m.Encryption.Verification != "" {
		v.oneOf("matrix.encryption.verification", m.Encryption.Verification, VerificationAdmins, VerificationOff)
	}
	if sp := m.Space; sp != nil && sp.Alias != "" {
		if _, server, ok := strings.Cut(strings.TrimPrefix(sp.Alias, "#"), ":"); strings.HasPrefix(sp.Alias, "#") && (!ok || server != m.ServerName) {
			v.errorf("matrix.space.alias", "%q must be a localpart or an alias on matrix.server_name (%s)", sp.Alias, m.ServerName)
		}
	}
	if m.Encryption.KeyBackup != nil && m.Encryption.RecoveryKey == "" {
		v.errorf("matrix.encryption.key_backup", "needs matrix.encryption.recovery_key (the key backup is encrypted with it)")
	}
}

// appServiceIDRE is the grammar of matrix.registration.appservice.id.
var appServiceIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// appService checks matrix.registration.appservice: its tokens, and that
// the accounts hookroom creates lie in its namespace.
func (v *validator) appService() {
	const p = "matrix.registration.appservice"
	as := v.c.Matrix.Registration.AppService
	if !as.IsSet() {
		return
	}
	if !as.ASToken.IsSet() {
		v.errorf(JoinKey(p, "as_token"), "is required (the registration file's as_token: hookroom appservice registration generates one)")
	}
	for _, tok := range []struct {
		key string
		val Secret
	}{{"as_token", as.ASToken}, {"hs_token", as.HSToken}} {
		if strings.ContainsFunc(tok.val.Reveal(), func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			v.errorf(JoinKey(p, tok.key), "must not contain spaces or control characters")
		}
	}
	if as.HSToken.IsSet() && as.HSToken == as.ASToken {
		v.errorf(JoinKey(p, "hs_token"), "must differ from as_token (the homeserver would authenticate to hookroom with hookroom's own token)")
	}
	if as.ID != "" && !appServiceIDRE.MatchString(as.ID) {
		v.errorf(JoinKey(p, "id"), "%q must match %s", as.ID, appServiceIDRE)
	}
	if as.UserPrefix == "" {
		return
	}
	if err := id.ValidateUserLocalpart(as.UserPrefix); err != nil {
		v.errorf(JoinKey(p, "user_prefix"), "%q is not the start of a valid Matrix localpart (allowed: a-z 0-9 . _ = - / +)", as.UserPrefix)
		return
	}
	outside := func(path, username string) {
		if !strings.HasPrefix(username, as.UserPrefix) {
			v.errorf(path, "%q does not start with %s.user_prefix %q: the application service can only create accounts in its namespace", username, p, as.UserPrefix)
		}
	}
	if !v.c.Matrix.Router.Account.IsSet() {
		outside("matrix.router.username", v.c.Matrix.Router.Username)
	}
	for _, name := range sortedKeys(v.c.Agents) {
		if a := v.c.Agents[name]; !a.Account.IsSet() {
			outside(JoinKey(JoinKey("agents", name), "username"), a.Username)
		}
	}
}

func (v *validator) httpURL(path, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		v.errorf(path, "is not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		v.errorf(path, "must be an http:// or https:// URL")
	case u.Host == "":
		v.errorf(path, "must include a host")
	case u.User != nil:
		v.errorf(path, "must not contain credentials")
	}
}

func (v *validator) userIDs(path string, users []id.UserID) {
	for i, u := range users {
		if _, _, err := u.ParseAndValidateRelaxed(); err != nil {
			v.errorf(JoinIndex(path, i), "%q is not a valid Matrix user id (e.g. @alice:example.org)", u)
		}
	}
}

func (v *validator) models() {
	for _, name := range sortedKeys(v.c.Models) {
		m := v.c.Models[name]
		p := JoinKey("models", name)
		switch m.Provider {
		case ProviderOpenAI, ProviderAnthropic:
			if m.Model == "" {
				v.errorf(JoinKey(p, "model"), "is required for provider %q (the provider's model id)", m.Provider)
			}
		case ProviderEcho:
		default:
			v.errorf(JoinKey(p, "provider"), "must be %q, %q or %q, not %q", ProviderOpenAI, ProviderAnthropic, ProviderEcho, m.Provider)
		}
		switch {
		case m.MaxTokens < 0:
			v.errorf(JoinKey(p, "max_tokens"), "must not be negative")
		case m.MaxTokens > 0 && m.ContextWindow > 0 && m.MaxTokens >= m.ContextWindow:
			v.errorf(JoinKey(p, "max_tokens"), "must be smaller than context_window (%d): the reply must leave room for the prompt", m.ContextWindow)
		}
		if m.BaseURL != "" {
			v.httpURL(JoinKey(p, "base_url"), m.BaseURL)
		}
		if m.ContextWindow < 0 {
			v.errorf(JoinKey(p, "context_window"), "must not be negative")
		}
	}
	if r := v.c.Router.Model; r != "" {
		if _, ok := v.c.Models[r]; !ok {
			v.errorf("router.model", "unknown model %q%s", r, v.knownModels())
		}
	}
	v.oneOf("defaults.thread_mode", string(v.c.Defaults.ThreadMode), string(ThreadModeThread), string(ThreadModeRoom))
	v.oneOf("defaults.ad_hoc_teams", v.c.Defaults.AdHocTeams, AdHocCollaborate, AdHocCoordinate, AdHocOff)
	v.oneOf("defaults.model_command", string(v.c.Defaults.ModelCommand), string(ModelCommandEveryone), string(ModelCommandAdmins), string(ModelCommandOff))
}

func (v *validator) knownModels() string {
	if len(v.c.Models) == 0 {
		return " (no models are configured)"
	}
	return " (configured: " + strings.Join(sortedKeys(v.c.Models), ", ") + ")"
}

func (v *validator) rooms() {
	ids := make(map[id.RoomID]string)
	aliases := make(map[string]string)
	for _, key := range sortedKeys(v.c.Rooms) {
		r := v.c.Rooms[key]
		p := JoinKey("rooms", key)
		if !nameRE.MatchString(key) {
			v.errorf(p, "room key %q must match %s", key, nameRE)
		}
		if r.ID != "" {
			if !strings.HasPrefix(string(r.ID), "!") || len(r.ID) < 2 {
				v.errorf(JoinKey(p, "id"), "%q is not a room id (it starts with !)", r.ID)
			} else if other, dup := ids[r.ID]; dup {
				v.errorf(JoinKey(p, "id"), "room id also used by rooms.%s", other)
			} else {
				ids[r.ID] = key
			}
		}
		v.userIDs(JoinKey(p, "invite"), r.Invite)
		if r.ThreadMode != "" {
			v.oneOf(JoinKey(p, "thread_mode"), string(r.ThreadMode), string(ThreadModeThread), string(ThreadModeRoom))
		}
		if r.Alias != "" {
			if !validAlias(r.Alias) {
				v.errorf(JoinKey(p, "alias"), "%q is not a room alias (#name:server) or alias localpart (name)", r.Alias)
			} else if other, dup := aliases[r.Alias]; dup {
				v.errorf(JoinKey(p, "alias"), "alias also used by rooms.%s", other)
			} else {
				aliases[r.Alias] = key
			}
		}
	}
}

// validAlias accepts "#local:server" or a bare localpart.
func validAlias(a string) bool {
	if a == "" || strings.ContainsAny(a, " \t\r\n") {
		return false
	}
	if rest, full := strings.CutPrefix(a, "#"); full {
		local, server, ok := strings.Cut(rest, ":")
		return ok && local != "" && id.ValidateServerName(server)
	}
	return !strings.ContainsAny(a, "#:")
}

// roomRef reports whether ref names a room: a key of rooms, a room id or a
// full alias.
func (v *validator) roomRef(ref string) bool {
	if _, ok := v.c.Rooms[ref]; ok {
		return true
	}
	switch {
	case strings.HasPrefix(ref, "!"):
		return len(ref) > 1
	case strings.HasPrefix(ref, "#"):
		return validAlias(ref)
	}
	return false
}

func (v *validator) agents() {
	c := v.c
	usernames := map[string]string{c.Matrix.Router.Username: "matrix.router.username"}
	for _, name := range sortedKeys(c.Teams) {
		if a, ok := c.Agents[name]; ok && !a.team {
			v.errorf(JoinKey("teams", name), "team name %q is also an agent's name: teams and agents share one namespace", name)
		}
	}
	for _, name := range sortedKeys(c.Agents) {
		a := c.Agents[name]
		p := JoinKey("agents", name)
		if a.team {
			p = JoinKey("teams", name)
		}
		badName := true
		switch {
		case !nameRE.MatchString(name):
			v.errorf(p, "agent name %q must match %s", name, nameRE)
		case name == ReservedAgentName:
			v.errorf(p, "agent name %q is reserved for the router", name)
		default:
			badName = false
		}
		// A username defaulted from a bad agent name is reported once, above.
		if !badName || a.Username != name {
			v.username(JoinKey(p, "username"), a.Username, p, usernames)
		}
		v.account(p, a.Username, a.Account)
		v.avatar(JoinKey(p, "avatar"), a.Avatar)
		switch {
		case a.Model == "" && len(c.Models) == 0:
			v.errorf(p, "has no model: configure one under models")
		case a.Model == "":
			v.errorf(p, "has no model: set model or define a model named %q", DefaultModelName)
		default:
			if _, ok := c.Models[a.Model]; !ok {
				v.errorf(JoinKey(p, "model"), "unknown model %q%s", a.Model, v.knownModels())
			}
		}
		for i, r := range a.Rooms {
			if !v.roomRef(r) {
				v.errorf(JoinIndex(JoinKey(p, "rooms"), i), "unknown room %q: not a key of rooms, a room id (!…) or an alias (#…:server)", r)
			}
		}
		v.names(JoinKey(p, "rooms"), a.Rooms)
		v.names(JoinKey(p, "tools"), a.Tools)
		for i, t := range a.Tools {
			if t != "" {
				if msg := toolPatternProblem(t); msg != "" {
					v.errorf(AgentToolPath(name, i), "%s", msg)
				}
			}
		}
		v.names(JoinKey(p, "plugins"), a.Plugins)
		if a.DailyTokenBudget != nil {
			v.tokenBudget(JoinKey(p, "daily_token_budget"), *a.DailyTokenBudget)
		}
	}
}

// account checks the existing account configured under owner (the router's
// matrix.router or agents.<name>), whose localpart is username.
func (v *validator) account(owner, username string, a Account) {
	if !a.IsSet() {
		return
	}
	p := JoinKey(owner, "account")
	if a.UserID == "" {
		v.errorf(JoinKey(p, "user_id"), "is required with an existing account (the full user id, e.g. @%s:example.org)", username)
	} else if _, _, err := a.UserID.ParseAndValidateRelaxed(); err != nil {
		v.errorf(JoinKey(p, "user_id"), "%q is not a valid Matrix user id (e.g. @alice:example.org)", a.UserID)
	} else {
		server := v.c.Matrix.ServerName
		if server != "" && a.UserID.Homeserver() != server {
			v.errorf(JoinKey(p, "user_id"), "%s is not on matrix.server_name %s", a.UserID, server)
		}
		if a.UserID.Localpart() != username {
			v.errorf(JoinKey(owner, "username"), "%q does not match account.user_id %s (leave username out)", username, a.UserID)
		}
	}
	if !a.AccessToken.IsSet() && !a.Password.IsSet() {
		v.errorf(p, "set access_token or password (or both: the token is used, the password logs in again when the token stops working)")
	}
	if a.DeviceID != "" && !a.AccessToken.IsSet() {
		v.errorf(JoinKey(p, "device_id"), "only applies with access_token (a password login gets its own device)")
	}
}

// avatar checks a profile picture: an mxc:// URI or a file path.
func (v *validator) avatar(path, avatar string) {
	if avatar == "" {
		return
	}
	if IsMXC(avatar) {
		if _, err := id.ParseContentURI(avatar); err != nil {
			v.errorf(path, "%q is not a valid mxc:// URI (mxc://server/media_id)", avatar)
		}
		return
	}
	if strings.Contains(avatar, "://") {
		v.errorf(path, "must be an mxc:// URI or an image file path, not %q", avatar)
	}
}

// username checks an agent's localpart and that no other account uses it.
func (v *validator) username(path, username, owner string, used map[string]string) {
	if err := id.ValidateUserLocalpart(username); err != nil {
		v.errorf(path, "%q is not a valid Matrix localpart (allowed: a-z 0-9 . _ = - / +)", username)
	} else if other, dup := used[username]; dup {
		v.errorf(path, "username %q is also used by %s", username, other)
	} else {
		used[username] = owner
	}
}

// names checks a list of names for empty and duplicate entries.
func (v *validator) names(path string, list []string) {
	seen := make(map[string]int)
	for i, n := range list {
		ip := JoinIndex(path, i)
		if n == "" {
			v.errorf(ip, "must not be empty")
		} else if first, dup := seen[n]; dup {
			v.errorf(ip, "%q is listed twice (also %s)", n, JoinIndex(path, first))
		} else {
			seen[n] = i
		}
	}
}

// toolNameRE is the grammar of a tool's name as the model sees it (the
// function-name rule of OpenAI-compatible APIs).
var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// IsToolPattern reports whether an agents.<name>.tools entry is a pattern
// (it holds a glob character or names a source: "source/tool") rather than
// one tool's name.
func IsToolPattern(entry string) bool {
	return strings.ContainsAny(entry, "*?[/\\")
}

// toolPatternProblem checks the syntax of an agents.<name>.tools entry:
// a tool name, a glob over tool names ("web_*"), or a glob over qualified
// names "source/tool" where source is "builtin", a plugin name or
// "mcp:SERVER" ("mcp:github/*", "my_plugin/*"). Whether it names existing
// tools is checked where the plugins are known (bot).
func toolPatternProblem(entry string) string {
	if !IsToolPattern(entry) {
		if !toolNameRE.MatchString(entry) {
			return fmt.Sprintf("%q is not a tool name (1 to 64 characters of a-z A-Z 0-9 _ -) nor a pattern such as plugin_name/* or mcp:server/*", entry)
		}
		return ""
	}
	if _, err := path.Match(entry, ""); err != nil {
		return fmt.Sprintf("%q is not a valid glob pattern (path.Match syntax: * ? [a-z])", entry)
	}
	if strings.Contains(entry, "\\") {
		return fmt.Sprintf("%q: backslash escapes are not allowed in tool patterns", entry)
	}
	if src, tool, qualified := strings.Cut(entry, "/"); qualified {
		if src == "" || tool == "" || strings.Contains(tool, "/") {
			return fmt.Sprintf("%q: a qualified pattern is SOURCE/TOOL (builtin/current_time, my_plugin/*, mcp:github/*)", entry)
		}
	}
	return ""
}

func (v *validator) authorization() {
	a := v.c.Authorization
	// Patterns ("@*:example.org") are the authorization policy's: the bot
	// checks them precisely (package policy, through WithValidator), as
	// it checks aliases, dm, agents and pairing.
	for i, u := range a.GlobalUsers {
		if s := string(u); strings.HasPrefix(s, "@") && strings.Contains(s, "*") {
			continue
		}
		if _, _, err := u.ParseAndValidateRelaxed(); err != nil {
			v.errorf(JoinIndex("authorization.global_users", i), "%q is not a valid Matrix user id or pattern (e.g. @alice:example.org, @*:example.org)", u)
		}
	}
	for _, key := range sortedKeys(a.RoomPermissions) {
		p := JoinKey("authorization.room_permissions", key)
		if !v.roomRef(key) {
			v.errorf(p, "unknown room %q: not a key of rooms, a room id (!…) or an alias (#…:server)", key)
		}
		v.userIDs(p, a.RoomPermissions[key])
	}
	for i, pat := range a.InviteUsers {
		if !pat.valid() {
			v.errorf(JoinIndex("authorization.invite_users", i),
				"%q is neither a Matrix user id (@alice:example.org) nor a server pattern (@*:example.org)", pat)
		}
	}
}

func (v *validator) plugins() {
	seen := make(map[string]int)
	for i, e := range v.c.Plugins {
		p := JoinIndex("plugins", i)
		switch {
		case e.Path != "" && e.Builtin != "":
			v.errorf(p, "set either path or builtin, not both")
		case e.Path == "" && e.Builtin == "":
			v.errorf(p, "set path (a plugin directory) or builtin (a compiled-in plugin)")
		case e.Builtin != "" && !nameRE.MatchString(e.Builtin):
			v.errorf(JoinKey(p, "builtin"), "built-in plugin name %q must match %s", e.Builtin, nameRE)
		default:
			if first, dup := seen[e.Identity()]; dup {
				v.errorf(p, "the same plugin is listed twice (also plugins[%d])", first)
			} else {
				seen[e.Identity()] = i
			}
		}
		for _, hook := range sortedKeys(e.Hooks) {
			h := e.Hooks[hook]
			hp := JoinKey(JoinKey(p, "hooks"), hook)
			if hook == "" {
				v.errorf(hp, "hook name must not be empty")
			}
			if h.TimeoutMS != nil && *h.TimeoutMS <= 0 {
				v.errorf(JoinKey(hp, "timeout_ms"), "must be positive, not %d", *h.TimeoutMS)
			}
			if h.FailurePolicy != nil && *h.FailurePolicy != FailOpen && *h.FailurePolicy != FailClosed {
				v.errorf(JoinKey(hp, "failure_policy"), "must be %q or %q, not %q", FailOpen, FailClosed, *h.FailurePolicy)
			}
		}
		for j, name := range e.Env {
			if !envNameRE.MatchString(name) {
				v.errorf(JoinIndex(JoinKey(p, "env"), j), "%q is not an environment variable name", name)
			}
		}
		sb := JoinKey(p, "sandbox")
		if e.Builtin != "" && (e.Sandbox.Enabled != nil || len(e.Sandbox.ReadOnly)+len(e.Sandbox.ReadWrite) > 0) {
			v.errorf(sb, "built-in plugins run inside hookroom and have no sandbox; sandbox applies to process plugins")
		}
		for _, l := range []struct {
			key   string
			paths []string
		}{{"read_only", e.Sandbox.ReadOnly}, {"read_write", e.Sandbox.ReadWrite}} {
			for j, path := range l.paths {
				if path == "" {
					v.errorf(JoinIndex(JoinKey(sb, l.key), j), "must not be empty")
				}
			}
		}
	}
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (v *validator) engine() {
	h := v.c.Hooks
	if h.CollectorConcurrency < 1 {
		v.errorf("hooks.collector_concurrency", "must be at least 1, not %d", h.CollectorConcurrency)
	}
	if h.MaxDepth < 1 {
		v.errorf("hooks.max_depth", "must be at least 1, not %d", h.MaxDepth)
	}
}

func (v *validator) attachments() {
	a := v.c.Attachments
	if a.MaxSize < 1 {
		v.errorf("attachments.max_size", "must be positive, not %d", a.MaxSize)
	}
	if a.MaxTextSize < 1 {
		v.errorf("attachments.max_text_size", "must be positive, not %d", a.MaxTextSize)
	} else if a.MaxSize >= 1 && a.MaxTextSize > a.MaxSize {
		v.errorf("attachments.max_text_size", "must not be larger than max_size (%s)", a.MaxSize)
	}
	if a.MaxPerTurn < 1 {
		v.errorf("attachments.max_per_turn", "must be at least 1, not %d", a.MaxPerTurn)
	}
}

func (v *validator) usage() {
	v.tokenBudget("usage.daily_tokens_per_user", v.c.Usage.DailyTokensPerUser)
	v.tokenBudget("usage.daily_tokens_per_agent", v.c.Usage.DailyTokensPerAgent)
	for i, share := range v.c.Usage.AlertAt {
		if !(share > 0 && share <= 1) {
			v.errorf(JoinIndex("usage.alert_at", i), "must be a share of the budget above 0 and at most 1, not %v", share)
		}
	}
}

// tokenBudget checks a daily token budget: a number of tokens, 0 for none.
func (v *validator) tokenBudget(path string, n int) {
	if n < 0 {
		v.errorf(path, "must be a number of tokens, or 0 for unlimited, not %d", n)
	}
}

func (v *validator) schedules() {
	s := v.c.Schedules
	if _, err := time.LoadLocation(s.Timezone); err != nil || strings.EqualFold(s.Timezone, "local") || s.Timezone == "" {
		v.errorf("schedules.timezone", "must be an IANA time zone name like Europe/Berlin, America/New_York or UTC, not %q", s.Timezone)
	}
	if s.MissedGrace < 0 {
		v.errorf("schedules.missed_grace", "must not be negative, not %s", time.Duration(s.MissedGrace))
	}
}

func (v *validator) http() {
	h := v.c.HTTP
	if h.Listen != "" {
		host, port, err := net.SplitHostPort(h.Address())
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			v.errorf("http.listen", "%q is not an address (e.g. \":8080\" for 127.0.0.1:8080, or \"0.0.0.0:8080\")", h.Listen)
		case perr != nil || n < 0 || n > 65535:
			v.errorf("http.listen", "%q has no valid port (0-65535)", h.Listen)
		case host != "" && host != "localhost" && net.ParseIP(host) == nil:
			v.errorf("http.listen", "%q: the host must be an IP address or localhost", h.Listen)
		}
	}
	if h.AdminToken.IsSet() && len(h.AdminToken.Reveal()) < MinAdminTokenLength {
		v.errorf("http.admin_token", "is too short: use at least %d characters (e.g. from openssl rand -hex 32)", MinAdminTokenLength)
	}
	if h.AdminToken.IsSet() && h.Listen == "" {
		v.errorf("http.admin_token", "has no effect without http.listen")
	}
	if h.PublicURL != "" {
		if u, err := url.Parse(h.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.errorf("http.public_url", "%q is not an http:// or https:// URL", h.PublicURL)
		}
	}
	if h.SessionTTL < 0 {
		v.errorf("http.session_ttl", "must be positive, not %s (default %s)", h.SessionTTL, DefaultSessionTTL)
	}
}

func (v *validator) traces() {
	if r := v.c.Traces.Retention; r <= 0 {
		v.errorf("traces.retention", "must be positive, not %s (default %s, 14 days; leave the key out for the default)", r, DefaultTraceRetention)
	}
}
