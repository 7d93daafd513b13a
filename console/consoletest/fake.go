package consoletest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/trace"
)

// Strings that break a page that prints them as HTML.
const (
	ScriptXSS = `<script>alert(1)</script>`
	AttrXSS   = `"><img src=x onerror=alert(1)>`
	// XSS is both.
	XSS = ScriptXSS + AttrXSS
)

// Decision is one call of Approvals.Decide or Schedules.Cancel.
type Decision struct {
	ID      string
	Approve bool
	By      string
}

// Fake holds the data every fake backend serves. Its fields may be changed
// between requests under Lock/Unlock (or with its methods).
type Fake struct {
	mu sync.Mutex

	Overview  console.Overview
	Turns     []trace.Summary // newest first
	Traces    map[int64]*trace.Trace
	HookInfos []hooks.HookInfo
	HookStats []hooks.HookStats
	Usage     console.UsageReport
	Schedules []console.Schedule
	Pending   []console.Approval
	// Cancelled and Decided record the actions taken.
	Cancelled []Decision
	Decided   []Decision
	// ConfigText is config.yaml; Saved records who saved it.
	ConfigText string
	Saved      []string
	Logs       *console.LogBuffer
}

// New returns a Fake with sample data around now: two agents and a router,
// rooms, plugins, turns with traces, hooks with statistics, usage, a
// schedule, an approval, a config and log lines.
func New(now time.Time) *Fake { return build(now, "") }

// NewEvil is New with XSS in everything a person or a plugin can write:
// room and display names, messages, tool arguments, hook changes and
// errors, log lines, schedule texts, reload errors.
func NewEvil(now time.Time) *Fake { return build(now, " "+XSS) }

func build(now time.Time, evil string) *Fake {
	now = now.UTC()
	f := &Fake{Traces: map[int64]*trace.Trace{}, Logs: console.NewLogBuffer(0)}
	f.Overview = console.Overview{
		Ready: false, Reasons: []string{"agent ops: first sync not caught up" + evil}, Version: "v0.9.0-test",
		Accounts: []console.Account{
			{Name: "router", Router: true, UserID: "@router:example.org", DeviceID: "ROUTERDEV", State: "ready", Sync: "running", Rooms: []string{"!lobby:example.org"}},
			{Name: "helper" + evil, UserID: "@helper:example.org", DeviceID: "HELPERDEV", State: "ready", Sync: "running", Model: "gpt-4o-mini", Rooms: []string{"!lobby:example.org", "!dev:example.org"}},
			{Name: "ops", UserID: "@ops:example.org", DeviceID: "OPSDEV", State: "starting", Sync: "backing off: 502" + evil, Model: "claude-haiku", Rooms: []string{"!dev:example.org"}},
		},
		Rooms: []console.Room{
			{ID: "!lobby:example.org", Alias: "#lobby:example.org", Name: "Lobby" + evil, Encrypted: true, Agents: []string{"helper"}},
			{ID: "!dev:example.org", Name: "Dev chat", Agents: []string{"helper", "ops"}, Invited: true},
		},
		Plugins: []console.Plugin{
			{Name: "geo", Kind: "process", State: "running", Restarts: 1, PID: 4242},
			{Name: "audit", Kind: "builtin", State: "loaded"},
		},
		MCPServers: []console.MCPServer{{Name: "filesystem", State: "running", Tools: 11}},
		Reloads: []console.Reload{
			{At: now.Add(-5 * time.Minute), OK: true, Summary: "agents +ops; plugins: restarted geo"},
			{At: now.Add(-50 * time.Minute), OK: false, Errors: []string{"config.yaml:12: unknown field \"modle\"" + evil}},
		},
	}
	for i := int64(1); i <= 3; i++ {
		t := sampleTrace(i, now.Add(-time.Duration(4-i)*time.Minute), evil)
		f.addTrace(t)
	}
	f.HookInfos = []hooks.HookInfo{
		{Event: "message:received", Mode: "observer", Plugin: "audit", Source: "builtin", Hook: "log", Priority: 0, Timeout: time.Second, FailurePolicy: "continue", Position: 1},
		{Event: "message:enrich", Mode: "collector", Plugin: "geo", Source: "plugins/geo", Hook: "weather" + evil, Priority: 10, Timeout: 2 * time.Second, Agents: []hooks.AgentName{"helper"}, FailurePolicy: "continue", Position: 1},
		{Event: "tool:before_call", Mode: "gate", Plugin: "audit", Source: "builtin", Hook: "guard", Priority: 100, Timeout: 500 * time.Millisecond, Rooms: []id.RoomID{"!dev:example.org"}, FailurePolicy: "fail_closed", Position: 1},
	}
	buckets := func(cum ...uint64) []uint64 {
		out := make([]uint64, len(hooks.LatencyBuckets))
		for i := range out {
			out[i] = cum[min(i, len(cum)-1)]
		}
		return out
	}
	f.HookStats = []hooks.HookStats{
		{Event: "message:received", Plugin: "audit", Hook: "log", Invocations: 120, Total: 12 * time.Millisecond, Max: 400 * time.Microsecond, Buckets: buckets(100, 120)},
		{Event: "message:enrich", Plugin: "geo", Hook: "weather" + evil, Invocations: 40, Errors: 2, Timeouts: 1, Total: 4 * time.Second, Max: 2 * time.Second, Buckets: buckets(0, 0, 0, 0, 0, 0, 0, 10, 30, 36, 38, 39, 39, 40)},
	}
	for d := 13; d >= 0; d-- {
		f.Usage.Days = append(f.Usage.Days, console.DayUsage{Day: now.Truncate(24*time.Hour).AddDate(0, 0, -d), Tokens: 1000 + 370*((13-d)%7)*d})
	}
	f.Usage.ByAgent = []console.Tally{{Name: "helper", Tokens: 41000}, {Name: "ops", Tokens: 9800}}
	f.Usage.ByPerson = []console.Tally{{Name: "@alice:example.org", Tokens: 30000}, {Name: "@bob:example.org" + evil, Tokens: 20800}}
	f.Usage.Budgets = []console.Budget{
		{Scope: "agent", Name: "helper", Daily: 50000, UsedToday: 4100, Left: 45900},
		{Scope: "person", Name: "@bob:example.org" + evil, Daily: 5000, UsedToday: 5200, Left: 0},
	}
	f.Schedules = []console.Schedule{
		{ID: "s1", RoomID: "!lobby:example.org", Creator: "@alice:example.org", Spec: "every day at 09:00", Text: "summarise the news" + evil, Next: now.Add(3 * time.Hour), Status: "scheduled"},
	}
	f.Pending = []console.Approval{
		{ID: "a1", Tool: "shell", Arguments: `{"command":"rm -rf /tmp/cache` + strings.ReplaceAll(evil, `"`, `\"`) + `","token":"***"}`, Agent: "ops", RoomID: "!dev:example.org", Requester: "@bob:example.org", Deadline: now.Add(10 * time.Minute)},
	}
	f.ConfigText = "# hookroom configuration" + evil + "\nmatrix:\n  homeserver: https://matrix.example.org\n  password: \"***\"\nagents:\n  helper:\n    model: gpt-4o-mini\n"
	log := zerolog.New(f.Logs).With().Timestamp().Logger()
	log.Info().Str("agent", "helper").Msg("Agent ready")
	log.Debug().Str("room", "!lobby:example.org").Msg("Sync caught up")
	log.Warn().Str("plugin", "geo").Int("restarts", 1).Msg("Process plugin restarted" + evil)
	log.Error().Str("hook", "geo/weather").Err(fmt.Errorf("upstream 503%s", evil)).Msg("Hook failed")
	return f
}

// sampleTrace is a turn of agent helper with a hook of every effect, a
// model request, a tool call, an approval and its delivery.
func sampleTrace(n int64, started time.Time, evil string) *trace.Trace {
	ms := func(x int) time.Duration { return time.Duration(x) * time.Millisecond }
	t := &trace.Trace{
		ID: n, EventID: id.EventID(fmt.Sprintf("$event%d", n)), Agent: "helper", RoomID: "!lobby:example.org",
		Sender: "@alice:example.org", CorrelationID: fmt.Sprintf("corr-%d", n), Started: started, Ended: started.Add(ms(1840)),
		Outcome: trace.OutcomeResponded, Tokens: 812,
		Stages:    []trace.Stage{{Name: trace.StageReceived}, {Name: trace.StageRouted, At: ms(12)}, {Name: trace.StageFirstToken, At: ms(640)}, {Name: trace.StageFirstVisible, At: ms(700)}, {Name: trace.StageFinal, At: ms(1840)}},
		Models:    []trace.ModelCall{{Model: "gpt-4o-mini", At: ms(30), Latency: ms(1100), PromptTokens: 700, CompletionTokens: 112, FinishReason: "stop"}},
		Tools:     []trace.ToolCall{{Name: "weather", Arguments: `{"city":"Berlin` + strings.ReplaceAll(evil, `"`, `\"`) + `"}`, Result: "12°C, rain" + evil, At: ms(400), Duration: ms(90)}},
		Approvals: []trace.Approval{{ID: "a0", Tool: "weather", Decision: "approved", DecidedBy: "@alice:example.org", At: ms(390)}},
		Delivery:  []trace.Delivery{{Kind: trace.DeliveryPlaceholder, EventID: "$reply1", At: ms(20)}, {Kind: trace.DeliveryEdit, EventID: "$edit1", At: ms(700)}, {Kind: trace.DeliveryMessage, EventID: "$final1", At: ms(1840)}},
	}
	effects := []string{trace.EffectUnchanged, trace.EffectChanged, trace.EffectSuppressed, trace.EffectClaimed, trace.EffectDeclined,
		trace.EffectApprovalRequired, trace.EffectFailed, trace.EffectTimedOut, trace.EffectAbandoned}
	for i, e := range effects {
		h := trace.HookRun{Event: "message:enrich", Plugin: "geo", Hook: fmt.Sprintf("h%d", i), Mode: "collector", At: ms(5 + i*3), Duration: ms(i + 1), Effect: e}
		switch e {
		case trace.EffectChanged:
			h.Change = "response_text: 'Hi' → 'Hello'" + evil
		case trace.EffectFailed, trace.EffectTimedOut, trace.EffectAbandoned:
			h.Error = "hook " + e + evil
		}
		t.Hooks = append(t.Hooks, h)
	}
	return t
}

// LargeTrace is a turn with hooks hook runs, for benchmarks.
func LargeTrace(n int64, hookRuns int) *trace.Trace {
	t := sampleTrace(n, time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), "")
	t.Hooks = nil
	for i := range hookRuns {
		t.Hooks = append(t.Hooks, trace.HookRun{
			Event: "message:enrich", Plugin: "geo", Hook: fmt.Sprintf("hook-%d", i), Mode: "collector",
			At: time.Duration(i) * time.Millisecond, Duration: 300 * time.Microsecond, Effect: trace.EffectChanged,
			Change: "+1 item: message_context \"weather in Berlin: 12°C, rain\"",
		})
	}
	return t
}

func summarize(t *trace.Trace) trace.Summary {
	s := trace.Summary{
		ID: t.ID, EventID: t.EventID, Agent: t.Agent, RoomID: t.RoomID, ThreadID: t.ThreadID, Sender: t.Sender,
		CorrelationID: t.CorrelationID, Replayed: t.Replayed, Started: t.Started, Ended: t.Ended, Duration: t.Duration(),
		Outcome: t.Outcome, Detail: t.Detail, Tokens: t.Tokens, Hooks: len(t.Hooks),
	}
	for _, h := range t.Hooks {
		if trace.FailedEffect(h.Effect) {
			s.FailedHooks++
		} else if trace.ChangedEffect(h.Effect) {
			s.ChangedHooks++
		}
	}
	return s
}

func (f *Fake) addTrace(t *trace.Trace) {
	f.Traces[t.ID] = t
	f.Turns = slices.Insert(f.Turns, 0, summarize(t))
}

// AddTurn records a new turn, as the server does when a turn ends: it is
// the newest in the list.
func (f *Fake) AddTurn(t *trace.Trace) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addTrace(t)
}

// SampleTrace is a turn like the ones New records, with id n.
func SampleTrace(n int64, started time.Time) *trace.Trace { return sampleTrace(n, started, "") }

// Lock and Unlock guard the Fake's fields.
func (f *Fake) Lock()   { f.mu.Lock() }
func (f *Fake) Unlock() { f.mu.Unlock() }

// Options returns console options whose every backend is f, with token as
// the admin token.
func (f *Fake) Options(token func() string) console.Options {
	return console.Options{
		Token: token, Logs: f.Logs,
		Status: status{f}, Turns: turns{f}, Hooks: hookSource{f}, Usage: usage{f},
		Schedules: schedules{f}, Approvals: approvals{f}, Config: config{f},
	}
}

type status struct{ f *Fake }

func (s status) Overview(context.Context) console.Overview {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.f.Overview
}

type turns struct{ f *Fake }

func (t turns) List(_ context.Context, fl trace.Filter) ([]trace.Summary, error) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	var out []trace.Summary
	for _, s := range t.f.Turns {
		if (fl.Agent != "" && s.Agent != fl.Agent) || (fl.RoomID != "" && s.RoomID != fl.RoomID) ||
			(fl.Sender != "" && s.Sender != fl.Sender) || (fl.Outcome != "" && s.Outcome != fl.Outcome) ||
			(fl.Before > 0 && s.ID >= fl.Before) {
			continue
		}
		out = append(out, s)
		if fl.Limit > 0 && len(out) == fl.Limit {
			break
		}
	}
	return out, nil
}

func (t turns) Get(_ context.Context, n int64) (*trace.Trace, error) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	tr, ok := t.f.Traces[n]
	if !ok {
		return nil, fmt.Errorf("turn %d: %w", n, trace.ErrNotFound)
	}
	return tr, nil
}

func (t turns) Agents(context.Context) ([]hooks.AgentName, error) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	var out []hooks.AgentName
	for _, s := range t.f.Turns {
		if !slices.Contains(out, s.Agent) {
			out = append(out, s.Agent)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (t turns) Outcomes(context.Context) ([]string, error) {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	var out []string
	for _, s := range t.f.Turns {
		if !slices.Contains(out, s.Outcome) {
			out = append(out, s.Outcome)
		}
	}
	slices.Sort(out)
	return out, nil
}

type hookSource struct{ f *Fake }

func (h hookSource) Hooks() []hooks.HookInfo {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return slices.Clone(h.f.HookInfos)
}

func (h hookSource) Stats() []hooks.HookStats {
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	return slices.Clone(h.f.HookStats)
}

type usage struct{ f *Fake }

func (u usage) Usage(_ context.Context, days int) (console.UsageReport, error) {
	u.f.mu.Lock()
	defer u.f.mu.Unlock()
	r := u.f.Usage
	if len(r.Days) > days {
		r.Days = r.Days[len(r.Days)-days:]
	}
	return r, nil
}

type schedules struct{ f *Fake }

func (s schedules) List(context.Context) ([]console.Schedule, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return slices.Clone(s.f.Schedules), nil
}

func (s schedules) Cancel(_ context.Context, sid, by string) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	i := slices.IndexFunc(s.f.Schedules, func(x console.Schedule) bool { return x.ID == sid })
	if i < 0 {
		return fmt.Errorf("no schedule %q", sid)
	}
	s.f.Schedules = slices.Delete(s.f.Schedules, i, i+1)
	s.f.Cancelled = append(s.f.Cancelled, Decision{ID: sid, By: by})
	return nil
}

type approvals struct{ f *Fake }

func (a approvals) Pending(context.Context) ([]console.Approval, error) {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	return slices.Clone(a.f.Pending), nil
}

func (a approvals) Decide(_ context.Context, aid string, approve bool, by string) error {
	a.f.mu.Lock()
	defer a.f.mu.Unlock()
	i := slices.IndexFunc(a.f.Pending, func(x console.Approval) bool { return x.ID == aid })
	if i < 0 {
		return fmt.Errorf("no pending approval %q", aid)
	}
	a.f.Pending = slices.Delete(a.f.Pending, i, i+1)
	a.f.Decided = append(a.f.Decided, Decision{ID: aid, Approve: approve, By: by})
	return nil
}

type config struct{ f *Fake }

func version(text string) string {
	s := sha256.Sum256([]byte(text))
	return hex.EncodeToString(s[:8])
}

func (c config) Load(context.Context) (console.ConfigFile, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	return console.ConfigFile{Path: "/etc/hookroom/config.yaml", Text: c.f.ConfigText, Version: version(c.f.ConfigText)}, nil
}

// check is the fake validation: a line "invalid: …" is an error.
func check(text string) []string {
	var errs []string
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "invalid:") {
			errs = append(errs, fmt.Sprintf("config.yaml:%d: unknown field \"invalid\"", i+1))
		}
	}
	return errs
}

// diff is a naive line diff, enough for a preview.
func diff(a, b string) string {
	if a == b {
		return ""
	}
	var out strings.Builder
	out.WriteString("--- config.yaml\n+++ config.yaml (edited)\n@@ @@\n")
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out.WriteString("-" + l + "\n")
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out.WriteString("+" + l + "\n")
		}
	}
	return out.String()
}

func (c config) Preview(_ context.Context, text, ver string) (console.ConfigPreview, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	return console.ConfigPreview{Diff: diff(c.f.ConfigText, text), Errors: check(text), Stale: ver != version(c.f.ConfigText)}, nil
}

func (c config) Save(_ context.Context, text, ver, who string) (console.ConfigSaved, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	if ver != version(c.f.ConfigText) {
		return console.ConfigSaved{Stale: true}, nil
	}
	if errs := check(text); len(errs) > 0 {
		return console.ConfigSaved{Errors: errs}, nil
	}
	c.f.ConfigText = text
	c.f.Saved = append(c.f.Saved, who)
	return console.ConfigSaved{Saved: true, ReloadOK: true, Summary: "agents: changed helper"}, nil
}
