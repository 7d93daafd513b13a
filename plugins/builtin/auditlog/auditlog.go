package auditlog

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
)

// Name is the plugin's registered name.
const Name = "audit_log"

// Priority of the audit hooks: after other plugins' hooks of the same event.
const Priority = 1000

// Defaults of the settings.
const (
	DefaultFile         = "audit.jsonl"
	DefaultMaxSizeMB    = 10
	DefaultMaxFiles     = 5
	DefaultMaxTextChars = 2000
)

// DefaultEvents are the events logged when the events setting is absent.
var DefaultEvents = []string{
	hooks.MessageReceived.Name(), hooks.MessageAfterResponse.Name(), hooks.MessageCancelled.Name(),
	hooks.ToolAfterCall.Name(), hooks.ConfigReloaded.Name(),
}

// optionalEvents are the built-in events logged when the events setting
// names them: memory:extracted (the memories the memory plugin is about to
// store, after the hooks before this one; their texts only with
// include_text, as they are what people said about themselves).
var optionalEvents = []string{hooks.MemoryExtracted.Name()}

func init() {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name:        Name,
		Description: "Writes turns, tool calls and reloads as JSON lines to a size-rotated file in its state directory",
		New:         New,
	})
}

type settings struct {
	File                 string   `json:"file"`
	MaxSizeMB            float64  `json:"max_size_mb"`
	MaxFiles             int      `json:"max_files"`
	IncludeText          bool     `json:"include_text"`
	IncludeToolArguments *bool    `json:"include_tool_arguments"`
	IncludeToolResults   bool     `json:"include_tool_results"`
	MaxTextChars         int      `json:"max_text_chars"`
	Events               []string `json:"events"`
}

// Log is a loaded audit log.
type Log struct {
	w           *writer
	events      []string
	includeText bool
	includeArgs bool
	includeRes  bool
	maxText     int
	now         func() time.Time
}

var (
	_ plugins.Instance           = (*Log)(nil)
	_ interface{ Close() error } = (*Log)(nil)
)

// New builds the audit log of env: settings are validated here, the file
// is opened on the first record.
func New(_ context.Context, env plugins.Env) (plugins.Instance, error) {
	var s settings
	if err := plugins.DecodeSettings(env.Settings, &s); err != nil {
		return nil, err
	}
	if s.File == "" {
		s.File = DefaultFile
	}
	if s.File != filepath.Base(s.File) || s.File == "." || s.File == ".." || strings.ContainsAny(s.File, `/\`) {
		return nil, plugins.SettingsErrorf("file", "%q must be a file name (the file lives in the plugin's state directory)", s.File)
	}
	switch {
	case s.MaxSizeMB == 0:
		s.MaxSizeMB = DefaultMaxSizeMB
	case s.MaxSizeMB < 0:
		return nil, plugins.SettingsErrorf("max_size_mb", "must be positive, not %v", s.MaxSizeMB)
	}
	switch {
	case s.MaxFiles == 0:
		s.MaxFiles = DefaultMaxFiles
	case s.MaxFiles < 0:
		return nil, plugins.SettingsErrorf("max_files", "must be positive, not %d", s.MaxFiles)
	}
	switch {
	case s.MaxTextChars == 0:
		s.MaxTextChars = DefaultMaxTextChars
	case s.MaxTextChars < 0:
		return nil, plugins.SettingsErrorf("max_text_chars", "must be positive, not %d", s.MaxTextChars)
	}
	if s.Events == nil {
		s.Events = DefaultEvents
	}
	for i, ev := range s.Events {
		if slices.Contains(s.Events[:i], ev) {
			return nil, plugins.SettingsErrorf(plugins.JoinIndex("events", i), "%s is listed twice", ev)
		}
		if slices.Contains(DefaultEvents, ev) || slices.Contains(optionalEvents, ev) {
			continue
		}
		if err := hooks.ValidateEventName(ev); err != nil {
			return nil, plugins.SettingsErrorf(plugins.JoinIndex("events", i), "%v", err)
		}
		if slices.Contains(hooks.BuiltinEvents(), ev) {
			return nil, plugins.SettingsErrorf(plugins.JoinIndex("events", i),
				"%s is not logged (supported: %s, and custom events)", ev, strings.Join(append(slices.Clone(DefaultEvents), optionalEvents...), ", "))
		}
	}
	if env.StateDir == "" {
		return nil, fmt.Errorf("failed to start audit log: no state directory")
	}
	maxBytes := int64(s.MaxSizeMB * (1 << 20))
	return &Log{
		w:           openWriter(filepath.Join(env.StateDir, s.File), max(maxBytes, 1), s.MaxFiles),
		events:      slices.Clone(s.Events),
		includeText: s.IncludeText,
		includeArgs: s.IncludeToolArguments == nil || *s.IncludeToolArguments,
		includeRes:  s.IncludeToolResults,
		maxText:     s.MaxTextChars,
		now:         time.Now,
	}, nil
}

// Close releases the log file.
func (l *Log) Close() error { return l.w.release() }

// Hooks returns one observer hook per logged event.
func (l *Log) Hooks() []hooks.Hook {
	prio := hooks.Priority(Priority)
	var hs []hooks.Hook
	for _, ev := range l.events {
		name := "log_" + strings.NewReplacer(":", "_", ".", "_", "-", "_").Replace(ev)
		switch ev {
		case hooks.MessageReceived.Name():
			hs = append(hs, hooks.Handle(hooks.MessageReceived, name, l.received, prio))
		case hooks.MessageAfterResponse.Name():
			hs = append(hs, hooks.Handle(hooks.MessageAfterResponse, name, l.afterResponse, prio))
		case hooks.MessageCancelled.Name():
			hs = append(hs, hooks.Handle(hooks.MessageCancelled, name, l.cancelled, prio))
		case hooks.ToolAfterCall.Name():
			hs = append(hs, hooks.Handle(hooks.ToolAfterCall, name, l.toolCall, prio))
		case hooks.ConfigReloaded.Name():
			hs = append(hs, hooks.Handle(hooks.ConfigReloaded, name, l.reloaded, prio))
		case hooks.MemoryExtracted.Name():
			hs = append(hs, hooks.Handle(hooks.MemoryExtracted, name, l.memoryExtracted, prio))
		default:
			hs = append(hs, hooks.HandleAny(ev, name, l.custom, prio))
		}
	}
	return hs
}

// Record is one line of the audit log.
type Record struct {
	Time          string          `json:"time"`
	Event         string          `json:"event"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Agent         hooks.AgentName `json:"agent,omitempty"`
	RoomID        id.RoomID       `json:"room_id,omitempty"`
	ThreadID      id.EventID      `json:"thread_id,omitempty"`
	EventID       id.EventID      `json:"event_id,omitempty"`
	Sender        id.UserID       `json:"sender,omitempty"`
	Requester     id.UserID       `json:"requester,omitempty"`
	SourceKind    string          `json:"source_kind,omitempty"`
	Suppressed    bool            `json:"suppressed,omitempty"`

	ResponseEventID id.EventID `json:"response_event_id,omitempty"`
	Delivery        string     `json:"delivery,omitempty"`
	Kind            string     `json:"kind,omitempty"`
	Chars           *int       `json:"chars,omitempty"`
	Text            string     `json:"text,omitempty"`

	// Usage is the turn's token usage (after_response and cancelled; left
	// out when no model was called).
	Usage *hooks.TokenUsage `json:"usage,omitempty"`

	Reason         string     `json:"reason,omitempty"`
	Detail         string     `json:"detail,omitempty"`
	VisibleEventID id.EventID `json:"visible_event_id,omitempty"`

	Tool        string          `json:"tool,omitempty"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	Blocked     bool            `json:"blocked,omitempty"`
	Error       string          `json:"error,omitempty"`
	DurationMS  *float64        `json:"duration_ms,omitempty"`
	ResultChars *int            `json:"result_chars,omitempty"`
	Result      string          `json:"result,omitempty"`

	AddedAgents   []hooks.AgentName `json:"added_agents,omitempty"`
	ChangedAgents []hooks.AgentName `json:"changed_agents,omitempty"`
	RemovedAgents []hooks.AgentName `json:"removed_agents,omitempty"`
	PluginChanges []string          `json:"plugin_changes,omitempty"`

	// Memories counts the memories of memory:extracted; MemoryTexts are
	// them as "scope: text" (with include_text).
	Memories    *int     `json:"memories,omitempty"`
	MemoryTexts []string `json:"memory_texts,omitempty"`

	SourcePlugin string          `json:"source_plugin,omitempty"`
	Payload      json.RawMessage `json:"payload,omitempty"`
}

func (l *Log) write(r *Record) error {
	r.Time = l.now().UTC().Format(time.RFC3339Nano)
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("failed to encode audit record: %w", err)
	}
	return l.w.write(append(line, '\n'))
}

func (l *Log) envelope(r *Record, e *hooks.Envelope) {
	r.Agent, r.RoomID, r.ThreadID, r.EventID = e.AgentName, e.RoomID, e.ResolvedThreadID, e.SourceEventID
	r.Sender, r.SourceKind = e.SenderID, string(e.SourceKind)
	if e.RequesterID != e.SenderID {
		r.Requester = e.RequesterID
	}
}

func (l *Log) text(r *Record, s string) {
	n := len([]rune(s))
	r.Chars = &n
	if l.includeText {
		r.Text = clip(s, l.maxText)
	}
}

func (l *Log) received(_ context.Context, c *hooks.MessageReceivedContext) error {
	r := &Record{Event: c.EventName(), CorrelationID: c.CorrelationID, Suppressed: c.Suppress}
	l.envelope(r, &c.Envelope)
	l.text(r, c.Envelope.Body)
	return l.write(r)
}

func (l *Log) afterResponse(_ context.Context, c *hooks.AfterResponseContext) error {
	res := &c.Result
	r := &Record{
		Event: c.EventName(), CorrelationID: c.CorrelationID,
		ResponseEventID: res.EventID, Delivery: string(res.DeliveryKind), Kind: string(res.Kind),
		Usage: tokens(res.Usage),
	}
	l.envelope(r, &res.Envelope)
	l.text(r, res.Text)
	return l.write(r)
}

// tokens is u for a record, nil when no model was called.
func tokens(u hooks.TokenUsage) *hooks.TokenUsage {
	if u == (hooks.TokenUsage{}) {
		return nil
	}
	return &u
}

func (l *Log) cancelled(_ context.Context, c *hooks.CancelledContext) error {
	info := &c.Info
	r := &Record{
		Event: c.EventName(), CorrelationID: c.CorrelationID,
		Reason: string(info.Reason), Detail: clip(info.Detail, l.maxText),
		VisibleEventID: info.VisibleEventID, Kind: string(info.Kind), Usage: tokens(info.Usage),
	}
	l.envelope(r, &info.Envelope)
	return l.write(r)
}

func (l *Log) toolCall(_ context.Context, c *hooks.ToolAfterCallContext) error {
	ms := float64(c.Duration) / float64(time.Millisecond)
	n := len([]rune(c.Result))
	r := &Record{
		Event: c.EventName(), CorrelationID: c.CorrelationID,
		Agent: c.Agent, RoomID: c.RoomID, ThreadID: c.ThreadID, Requester: c.RequesterID,
		Tool: c.Tool, Blocked: c.Blocked, Error: clip(c.Error, l.maxText),
		DurationMS: &ms, ResultChars: &n,
	}
	if l.includeArgs {
		r.Arguments = maskJSON(c.Arguments, l.maxText)
	}
	if l.includeRes {
		r.Result = clip(c.Result, l.maxText)
	}
	return l.write(r)
}

// memoryExtracted records the memories about to be stored. It changes
// nothing: at the audit log's priority it runs after the hooks that may.
func (l *Log) memoryExtracted(_ context.Context, c *hooks.MemoryExtractedContext) error {
	n := len(c.Memories)
	r := &Record{
		Event: c.EventName(), CorrelationID: c.CorrelationID,
		Agent: c.Agent, RoomID: c.RoomID, ThreadID: c.ThreadID, Requester: c.RequesterID, Memories: &n,
	}
	if l.includeText {
		for _, m := range c.Memories {
			r.MemoryTexts = append(r.MemoryTexts, clip(m.Scope+": "+m.Text, l.maxText))
		}
	}
	return l.write(r)
}

func (l *Log) reloaded(_ context.Context, c *hooks.ConfigReloadedContext) error {
	return l.write(&Record{
		Event: c.EventName(), CorrelationID: c.CorrelationID,
		AddedAgents: c.AddedAgents, ChangedAgents: c.ChangedAgents, RemovedAgents: c.RemovedAgents,
		PluginChanges: c.PluginChanges,
	})
}

func (l *Log) custom(_ context.Context, hc hooks.Context) error {
	c, ok := hc.(*hooks.CustomEventContext)
	if !ok {
		return fmt.Errorf("unexpected context %T for a custom event", hc)
	}
	return l.write(&Record{
		Event: c.EventName(), CorrelationID: c.CorrelationID,
		SourcePlugin: c.SourcePlugin, Agent: c.Agent, RoomID: c.RoomID, ThreadID: c.ThreadID, Sender: c.SenderID,
		Payload: maskJSON(c.Payload, l.maxText),
	})
}
