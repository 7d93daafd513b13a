package console

import (
	"context"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/trace"
)

// The console reads the running server through one small interface per
// page, all in Options. A nil interface shows "not available" on its page.
// Every method is called on the goroutine of the request that needs it, with
// that request's context, so it must be safe for concurrent use and should
// return quickly (a page waits for it).

// Operator is the name the console gives for a decision an operator made in
// it (an approval, a cancelled schedule, a saved configuration).
const Operator = "console (operator)"

// Status answers the overview page.
type Status interface {
	// Overview is called for every view of the overview page.
	Overview(ctx context.Context) Overview
}

// Overview is the state of the running server.
type Overview struct {
	// Ready is set when the server is ready; Reasons say why not.
	Ready   bool
	Reasons []string
	Version string
	// Accounts are the router and every agent.
	Accounts   []Account
	Rooms      []Room
	Plugins    []Plugin
	MCPServers []MCPServer
	// Reloads are the last reloads, newest first.
	Reloads []Reload
}

// Account is one managed Matrix account.
type Account struct {
	// Name is the agent's name ("router" for the router).
	Name     string
	Router   bool
	UserID   string
	DeviceID string
	// State is "starting" until the account's first sync caught up, then
	// "ready".
	State string
	// Sync says how the account's sync loop is doing ("running",
	// "backing off: …").
	Sync  string
	Model string
	Rooms []string
}

// Room is one room hookroom is in.
type Room struct {
	ID        string
	Alias     string
	Name      string
	Encrypted bool
	// Agents are the agents in the room.
	Agents []string
	// Invited is set for a room an agent was invited to (not configured).
	Invited bool
}

// Plugin is one loaded plugin.
type Plugin struct {
	Name string
	// Kind is "builtin" or "process".
	Kind     string
	State    string
	Restarts int
	PID      int
}

// MCPServer is one configured MCP server.
type MCPServer struct {
	Name     string
	State    string
	Restarts int
	// Tools counts the tools it offers.
	Tools int
}

// Reload is one reload of config.yaml or of a plugin.
type Reload struct {
	At      time.Time
	OK      bool
	Summary string
	Errors  []string
}

// Turns answers the conversations page and the turn inspector. A
// *trace.Store is one.
type Turns interface {
	// List returns the summaries of the turns f selects, newest first, at
	// most f.Limit. It is called for every view of the conversations page
	// and for every live refresh of its list (every second while the page
	// is open).
	List(ctx context.Context, f trace.Filter) ([]trace.Summary, error)
	// Get returns one turn's trace, or an error wrapping trace.ErrNotFound
	// (the inspector answers 404).
	Get(ctx context.Context, id int64) (*trace.Trace, error)
	// Agents and Outcomes are the choices of the conversation page's
	// filter.
	Agents(ctx context.Context) ([]hooks.AgentName, error)
	Outcomes(ctx context.Context) ([]string, error)
}

// Hooks answers the hooks page, which refreshes every 2 seconds.
type Hooks interface {
	// Hooks lists every hook in service (hooks.Registry.Hooks).
	Hooks() []hooks.HookInfo
	// Stats returns their run statistics (hooks.Registry.Stats).
	Stats() []hooks.HookStats
}

// Usage answers the usage page.
type Usage interface {
	// Usage returns the token usage of the last days days (today
	// included).
	Usage(ctx context.Context, days int) (UsageReport, error)
}

// UsageReport is the token usage of a period.
type UsageReport struct {
	// Days are the period's days, oldest first, each with its total.
	Days []DayUsage
	// ByAgent and ByPerson are the totals over the period, largest first.
	ByAgent  []Tally
	ByPerson []Tally
	Budgets  []Budget
}

// DayUsage is the tokens used on one day (UTC).
type DayUsage struct {
	Day    time.Time
	Tokens int
}

// Tally is the tokens a named agent or person used.
type Tally struct {
	Name   string
	Tokens int
}

// Budget is a daily token budget and what is left of it today.
type Budget struct {
	// Scope is "agent" or "person".
	Scope     string
	Name      string
	Daily     int
	UsedToday int
	Left      int
}

// Schedules answers the schedules page.
type Schedules interface {
	List(ctx context.Context) ([]Schedule, error)
	// Cancel cancels the schedule id; by is who did (Operator).
	Cancel(ctx context.Context, id, by string) error
}

// Schedule is one scheduled task.
type Schedule struct {
	ID      string
	RoomID  string
	Creator string
	// Spec is when it runs ("every day at 09:00", a cron expression, a
	// time).
	Spec string
	// Text is what the task asks.
	Text   string
	Next   time.Time
	Status string
}

// Approvals answers the approvals page.
type Approvals interface {
	// Pending lists the tool calls waiting for a person's approval.
	Pending(ctx context.Context) ([]Approval, error)
	// Decide approves or denies the call id; by is who decided (Operator).
	Decide(ctx context.Context, id string, approve bool, by string) error
}

// Approval is one tool call waiting for approval.
type Approval struct {
	ID   string
	Tool string
	// Arguments are the call's arguments, secrets masked.
	Arguments string
	Agent     string
	RoomID    string
	Requester string
	Deadline  time.Time
}

// Config answers the configuration page. The console holds no file logic:
// it shows Load's text, and hands what the operator edited to Preview and
// Save.
type Config interface {
	// Load reads config.yaml.
	Load(ctx context.Context) (ConfigFile, error)
	// Preview validates text as config.yaml would be and says what would
	// change against the file of version; it writes nothing.
	Preview(ctx context.Context, text, version string) (ConfigPreview, error)
	// Save validates text and, when it is valid and the file is still at
	// version, writes it atomically and reloads; who is who saved
	// (Operator).
	Save(ctx context.Context, text, version, who string) (ConfigSaved, error)
}

// ConfigFile is config.yaml as the editor shows it.
type ConfigFile struct {
	Path string
	// Text is the file with its secrets masked.
	Text string
	// Version identifies the file's content (a hash); Save refuses an edit
	// of another version.
	Version string
}

// ConfigPreview is what a save would do.
type ConfigPreview struct {
	// Diff is a unified diff from the file to the edit.
	Diff string
	// Errors are the validation errors ("config.yaml:12: …").
	Errors []string
	// Stale is set when the file changed since the version the edit
	// started from.
	Stale bool
}

// ConfigSaved is what a save did.
type ConfigSaved struct {
	Errors []string
	Stale  bool
	// Saved is set when the file was written; ReloadOK when the reload
	// that followed put it in service, Summary saying what changed.
	Saved        bool
	ReloadOK     bool
	Summary      string
	ReloadErrors []string
}
