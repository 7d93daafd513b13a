package hooks

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"maunium.net/go/mautrix/id"
)

// SourceKind says where an inbound message came from.
type SourceKind string

const (
	SourceMessage      SourceKind = "message"       // a person's text message
	SourceEdit         SourceKind = "edit"          // a person edited a message
	SourceMedia        SourceKind = "media"         // image, file, audio or video
	SourceVoice        SourceKind = "voice"         // a person's audio message, transcribed: Body is the transcript
	SourceScheduled    SourceKind = "scheduled"     // posted by a schedule
	SourceHook         SourceKind = "hook"          // posted by a hook
	SourceHookDispatch SourceKind = "hook_dispatch" // posted by a hook, addressed for dispatch
)

// Envelope describes the inbound message a turn answers. Treat it as
// read-only: its slices are shared by every hook of the turn.
type Envelope struct {
	SourceEventID id.EventID `json:"source_event_id"`
	RoomID        id.RoomID  `json:"room_id"`
	// ThreadID is the thread the message was posted in ("" at room level).
	ThreadID id.EventID `json:"thread_id,omitempty"`
	// ResolvedThreadID is where the reply goes (a new thread is rooted at
	// the message itself).
	ResolvedThreadID id.EventID `json:"resolved_thread_id,omitempty"`
	// SessionID is the persistence key of the conversation (room + thread).
	SessionID string `json:"session_id,omitempty"`
	// RequesterID is the person the turn acts for; SenderID is the Matrix
	// sender of the event (they differ for relayed and hook messages).
	RequesterID id.UserID `json:"requester_id"`
	SenderID    id.UserID `json:"sender_id"`
	// Body is the message's text; for an image or a file it is the
	// caption, "" when there is none (the file name is not a caption).
	Body string `json:"body"`
	// AttachmentIDs names the files of the message (images, files, audio,
	// video), in order: each is the file's mxc:// URI. Hooks fetch their
	// content with Attachment.
	AttachmentIDs   []string    `json:"attachment_ids,omitempty"`
	MentionedAgents []AgentName `json:"mentioned_agents,omitempty"`
	// AgentName is the agent handling the message (for a team's turn, the
	// team).
	AgentName AgentName `json:"agent_name"`
	// Team describes the team whose turn this is, nil for a turn of a
	// single agent.
	Team       *TeamInfo  `json:"team,omitempty"`
	SourceKind SourceKind `json:"source_kind"`
	// HookSource is "plugin:event" for hook-originated messages.
	HookSource string `json:"hook_source,omitempty"`
	// Depth is the synthetic-chain depth: 0 for people, >= 1 for messages
	// that hooks sent.
	Depth int `json:"depth,omitempty"`
}

// clone gives the envelope private copies of its slices.
func (e *Envelope) clone() {
	e.AttachmentIDs = cloneNonEmpty(e.AttachmentIDs)
	e.MentionedAgents = cloneNonEmpty(e.MentionedAgents)
	e.Team = e.Team.clone()
}

// cloneNonEmpty returns a private copy of s. An empty s stays empty (nil
// stays nil) but loses its spare capacity, so that appending to the copy
// never writes into the caller's backing array.
func cloneNonEmpty[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return s[:0:0]
	}
	return slices.Clone(s)
}

func (e *Envelope) route() route {
	return route{
		agent: e.AgentName, room: e.RoomID, thread: e.ResolvedThreadID, requester: e.RequesterID,
		event: e.SourceEventID, attachments: e.AttachmentIDs,
	}
}

// MessageReceivedContext is passed to message:received hooks (observer,
// 15 s). It fires once per inbound message, after authorization and
// de-duplication, before commands run and before routing. A hook may set
// Suppress: the message then gets no command, no routing and no reply.
type MessageReceivedContext struct {
	Base
	Envelope Envelope `json:"envelope"`
	// SkipPlugins lists plugins whose hooks do not run for this message
	// (the plugin whose message:received hook sent it).
	SkipPlugins []string `json:"skip_plugins,omitempty"`
	// Suppress, when set by a hook that succeeds, drops the message.
	Suppress bool `json:"suppress"`
}

func (c *MessageReceivedContext) route() route {
	r := c.Envelope.route()
	r.skip = c.SkipPlugins
	return r
}
func (c *MessageReceivedContext) isolate() {
	c.Envelope.clone()
	c.SkipPlugins = cloneNonEmpty(c.SkipPlugins)
}
func (c *MessageReceivedContext) merge(from *MessageReceivedContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *MessageReceivedContext) describe(b *MessageReceivedContext, detail bool) (Effect, string) {
	if c.Suppress == b.Suppress {
		return EffectUnchanged, ""
	}
	eff := effect(true, c.Suppress)
	if !detail {
		return eff, ""
	}
	var ch changes
	ch.flag("suppress", b.Suppress, c.Suppress)
	return eff, ch.String()
}

// ClaimResponse is what a claiming hook answers with.
type ClaimResponse struct {
	// Text is posted as the reply (Markdown). Empty text claims the message
	// silently: no model call and no reply.
	Text string `json:"text"`
	// Extra is merged into the reply's event content.
	Extra map[string]any `json:"extra,omitempty"`
}

// MessageClaimContext is passed to message:claim hooks (claim, 1 s). It
// fires after routing chose an agent and before enrichment and the model
// call. The first hook that calls Claim answers the message instead of the
// model; later hooks do not run.
type MessageClaimContext struct {
	Base
	Envelope Envelope `json:"envelope"`
	// Claimed holds the answer of the claiming hook, nil while unclaimed.
	Claimed *ClaimResponse `json:"claimed,omitempty"`
}

// Claim answers the message with text instead of the model.
func (c *MessageClaimContext) Claim(text string) { c.Claimed = &ClaimResponse{Text: text} }

func (c *MessageClaimContext) route() route { return c.Envelope.route() }
func (c *MessageClaimContext) isolate()     { c.Envelope.clone() }
func (c *MessageClaimContext) merge(from *MessageClaimContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *MessageClaimContext) stopped() bool { return c.Claimed != nil }
func (c *MessageClaimContext) describe(b *MessageClaimContext, detail bool) (Effect, string) {
	switch {
	case c.Claimed == b.Claimed:
		return EffectUnchanged, ""
	case c.Claimed == nil:
		if !detail {
			return EffectChanged, ""
		}
		return EffectChanged, "claimed: cleared"
	}
	if !detail {
		return EffectClaimed, ""
	}
	var ch changes
	ch.value("claimed", c.Claimed.Text)
	return EffectClaimed, ch.String()
}

// MessageEnrichContext is passed to message:enrich hooks (collector, 2 s).
// It fires after routing chose the agent, before the model call. Hooks run
// concurrently and add items with AddMetadata; the items of hooks that
// succeed are merged in hook order and rendered into the user turn.
type MessageEnrichContext struct {
	Base
	Envelope Envelope `json:"envelope"`
	// TargetAgent is the agent that will answer (for a team's turn, the
	// team).
	TargetAgent AgentName `json:"target_agent"`
	// TargetMembers are the team members the turn asks (Envelope.Team's
	// TargetMembers); nil for a turn of a single agent.
	TargetMembers []AgentName `json:"target_member_names,omitempty"`
	// Items are the items added so far by this hook (after Emit: by all).
	Items []EnrichmentItem `json:"items,omitempty"`
}

// AddMetadata adds an item to the message-context block of the user turn.
// Pass StableItem for rarely changing items, TransientItem to keep it out
// of the stored history.
func (c *MessageEnrichContext) AddMetadata(key, text string, flags ...ItemFlag) {
	c.Items = append(c.Items, newItem(key, text, flags))
}

func (c *MessageEnrichContext) route() route { return c.Envelope.route() }
func (c *MessageEnrichContext) isolate() {
	c.Envelope.clone()
	c.TargetMembers = cloneNonEmpty(c.TargetMembers)
	c.Items = nil
}
func (c *MessageEnrichContext) merge(from *MessageEnrichContext) {
	mergeFields(c.mutableFields(), c, from)
}

// describe: the hook's copy starts without items, so its items are the
// ones it added.
func (c *MessageEnrichContext) describe(_ *MessageEnrichContext, detail bool) (Effect, string) {
	if len(c.Items) == 0 {
		return EffectUnchanged, ""
	}
	if !detail {
		return EffectChanged, ""
	}
	return EffectChanged, describeItems(c.Items, func(it EnrichmentItem) string {
		if it.Transient {
			return "transient_context"
		}
		return "message_context"
	})
}

// SystemEnrichContext is passed to system:enrich hooks (collector, 2 s). It
// fires right after message:enrich. Items added with AddInstruction are
// rendered into the system prompt for this run only (stable items first);
// for a team's turn, into the prompts of the leader and of each member.
type SystemEnrichContext struct {
	Base
	Envelope      Envelope         `json:"envelope"`
	TargetAgent   AgentName        `json:"target_agent"`
	TargetMembers []AgentName      `json:"target_member_names,omitempty"`
	Items         []EnrichmentItem `json:"items,omitempty"`
}

// AddInstruction adds an item to the system-context block.
func (c *SystemEnrichContext) AddInstruction(key, text string, flags ...ItemFlag) {
	c.Items = append(c.Items, newItem(key, text, flags))
}

func (c *SystemEnrichContext) route() route { return c.Envelope.route() }
func (c *SystemEnrichContext) isolate() {
	c.Envelope.clone()
	c.TargetMembers = cloneNonEmpty(c.TargetMembers)
	c.Items = nil
}
func (c *SystemEnrichContext) merge(from *SystemEnrichContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *SystemEnrichContext) describe(_ *SystemEnrichContext, detail bool) (Effect, string) {
	if len(c.Items) == 0 {
		return EffectUnchanged, ""
	}
	if !detail {
		return EffectChanged, ""
	}
	return EffectChanged, describeItems(c.Items, func(EnrichmentItem) string { return "system_context" })
}

// ResponseKind says who produced a reply.
type ResponseKind string

const (
	// ResponseAI: an agent's model answered.
	ResponseAI ResponseKind = "ai"
	// ResponseTeam: a team answered (its leader's synthesis of its
	// members' answers); the envelope's Team describes the team.
	ResponseTeam ResponseKind = "team"
	// ResponseRouter: the router answered (a command, a hand-off).
	ResponseRouter ResponseKind = "router"
	// ResponseSystem: hookroom itself answered (a message:claim hook's
	// text, a notice).
	ResponseSystem ResponseKind = "system"
)

// ToolTraceEntry records one tool call of a turn.
type ToolTraceEntry struct {
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"arguments,omitempty"`
	Result   string          `json:"result,omitempty"`
	Error    string          `json:"error,omitempty"`
	Blocked  bool            `json:"blocked,omitempty"`
	Duration time.Duration   `json:"duration_ns,omitempty"`
}

// ResponseDraft is a reply before its first visible send.
type ResponseDraft struct {
	Text      string           `json:"text"`
	Kind      ResponseKind     `json:"kind"`
	ToolTrace []ToolTraceEntry `json:"tool_trace,omitempty"`
	// Extra is JSON merged into the reply's event content.
	Extra    json.RawMessage `json:"extra,omitempty"`
	Envelope Envelope        `json:"envelope"`
	// Suppress, if still set once the last hook ran, drops the reply:
	// nothing is sent and the turn ends with message:cancelled.
	Suppress bool `json:"suppress"`
}

// BeforeResponseContext is passed to message:before_response hooks
// (transformer, 200 ms). It fires after generation, before the first
// visible text of the reply is sent. A hook may change Draft.Text,
// Draft.Extra and Draft.ToolTrace, or set Draft.Suppress; its draft goes to
// the next hook only if it succeeds in time. Suppression does not end the
// chain: later hooks see Draft.Suppress set and may clear it; the reply is
// dropped only if the draft the last successful hook left says so.
type BeforeResponseContext struct {
	Base
	Draft ResponseDraft `json:"draft"`
}

func (c *BeforeResponseContext) route() route { return c.Draft.Envelope.route() }
func (c *BeforeResponseContext) isolate() {
	c.Draft.Envelope.clone()
	if len(c.Draft.ToolTrace) > 0 {
		c.Draft.ToolTrace = slices.Clone(c.Draft.ToolTrace)
		for i := range c.Draft.ToolTrace {
			c.Draft.ToolTrace[i].Args = cloneNonEmpty(c.Draft.ToolTrace[i].Args)
		}
	}
	c.Draft.Extra = cloneNonEmpty(c.Draft.Extra)
}

// merge takes the fields a before_response hook may change.
func (c *BeforeResponseContext) merge(from *BeforeResponseContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *BeforeResponseContext) describe(b *BeforeResponseContext, detail bool) (Effect, string) {
	d, bd := &c.Draft, &b.Draft
	text := d.Text != bd.Text
	extra := !bytes.Equal(nilIfNull(d.Extra), nilIfNull(bd.Extra))
	trace := !sameTrace(d.ToolTrace, bd.ToolTrace)
	suppress := d.Suppress != bd.Suppress
	eff := effect(text || extra || trace || suppress, suppress && d.Suppress)
	if !detail || eff == EffectUnchanged {
		return eff, ""
	}
	var ch changes
	if text {
		ch.text("response_text", bd.Text, d.Text)
	}
	if extra {
		ch.text("extra", string(nilIfNull(bd.Extra)), string(nilIfNull(d.Extra)))
	}
	if trace {
		ch.add(describeTrace(bd.ToolTrace, d.ToolTrace))
	}
	if suppress {
		ch.flag("suppress", bd.Suppress, d.Suppress)
	}
	return eff, ch.String()
}

// FinalDraft is the final text of a streamed reply before its last edit.
type FinalDraft struct {
	Text     string       `json:"text"`
	Kind     ResponseKind `json:"kind"`
	Envelope Envelope     `json:"envelope"`
}

// FinalResponseContext is passed to message:final_response_transform hooks
// (transformer, 200 ms). It fires once on a clean streamed reply, after its
// text is visible, before the final edit. A hook may replace Draft.Text; it
// cannot suppress the reply.
type FinalResponseContext struct {
	Base
	Draft FinalDraft `json:"draft"`
}

func (c *FinalResponseContext) route() route { return c.Draft.Envelope.route() }
func (c *FinalResponseContext) isolate()     { c.Draft.Envelope.clone() }
func (c *FinalResponseContext) merge(from *FinalResponseContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *FinalResponseContext) describe(b *FinalResponseContext, detail bool) (Effect, string) {
	if c.Draft.Text == b.Draft.Text {
		return EffectUnchanged, ""
	}
	if !detail {
		return EffectChanged, ""
	}
	var ch changes
	ch.text("response_text", b.Draft.Text, c.Draft.Text)
	return EffectChanged, ch.String()
}

// DeliveryKind says how the final reply reached the room.
type DeliveryKind string

const (
	DeliverySent   DeliveryKind = "sent"
	DeliveryEdited DeliveryKind = "edited"
)

// ResponseResult is a delivered reply.
type ResponseResult struct {
	Text         string       `json:"text"`
	EventID      id.EventID   `json:"event_id"`
	DeliveryKind DeliveryKind `json:"delivery_kind"`
	Kind         ResponseKind `json:"kind"`
	Envelope     Envelope     `json:"envelope"`
	// Usage is what the turn's model calls used (zero for a reply a
	// message:claim hook gave).
	Usage TokenUsage `json:"usage"`
}

// TokenUsage counts the tokens of a turn's model calls, summed, as the
// provider reported them. The same counts are recorded in the database
// (!usage) and count against the daily token budgets.
type TokenUsage struct {
	// Model is the model the provider was asked for ("" when no model was
	// called).
	Model        string `json:"model,omitempty"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	// CachedTokens is the part of InputTokens the provider served from its
	// prompt cache (0 where the provider does not report it).
	CachedTokens int `json:"cached_tokens"`
	TotalTokens  int `json:"total_tokens"`
	// ModelCalls counts the model calls of the turn (one per round of tool
	// calls, plus the answer).
	ModelCalls int `json:"model_calls"`
}

// AfterResponseContext is passed to message:after_response hooks (observer,
// 3 s). It fires once after a turn's final reply was delivered. Nothing in
// it can be changed.
type AfterResponseContext struct {
	Base
	Result ResponseResult `json:"result"`
}

func (c *AfterResponseContext) route() route                { return c.Result.Envelope.route() }
func (c *AfterResponseContext) isolate()                    { c.Result.Envelope.clone() }
func (c *AfterResponseContext) merge(*AfterResponseContext) {}
func (c *AfterResponseContext) describe(*AfterResponseContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// CancelReason says why a turn ended without a clean reply.
type CancelReason string

const (
	CancelledByUser     CancelReason = "cancelled_by_user"
	CancelSuppressed    CancelReason = "suppressed_by_hook"
	CancelModelError    CancelReason = "model_error"
	CancelDeliveryError CancelReason = "delivery_failed"
	CancelInterrupted   CancelReason = "interrupted"
	CancelClaimed       CancelReason = "claimed_by_hook"
	// CancelRedacted: the person's message was redacted (deleted) before
	// the turn delivered its answer.
	CancelRedacted CancelReason = "redacted"
	// CancelOverBudget: a daily token budget (the person's or the agent's)
	// was used up; the person was told and no model was called.
	CancelOverBudget CancelReason = "over_budget"
	// CancelShutdown: hookroom stopped before the turn ended. The message
	// stays unhandled and is answered after the restart (a second turn,
	// with its own terminal event).
	CancelShutdown CancelReason = "shutdown"
)

// CancelledInfo describes a turn that ended without a clean reply.
type CancelledInfo struct {
	Envelope Envelope `json:"envelope"`
	// VisibleEventID is the reply event people may have seen, if any.
	VisibleEventID id.EventID   `json:"visible_event_id,omitempty"`
	Kind           ResponseKind `json:"kind"`
	Reason         CancelReason `json:"reason"`
	// Detail is a human-readable explanation (an error message).
	Detail string `json:"detail,omitempty"`
	// Usage is what the turn's model calls used before it ended (zero when
	// it ended before calling the model).
	Usage TokenUsage `json:"usage"`
}

// CancelledContext is passed to message:cancelled hooks (observer, 3 s). It
// fires once for every turn that ends other than cleanly: cancelled by a
// person (🛑 or by redacting the message), suppressed by a hook, a model,
// tool or delivery failure. Exactly
// one of message:after_response and message:cancelled fires per turn.
type CancelledContext struct {
	Base
	Info CancelledInfo `json:"info"`
}

func (c *CancelledContext) route() route            { return c.Info.Envelope.route() }
func (c *CancelledContext) isolate()                { c.Info.Envelope.clone() }
func (c *CancelledContext) merge(*CancelledContext) {}
func (c *CancelledContext) describe(*CancelledContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// AgentLifecycleContext is passed to agent:started (after an account logged
// in), bot:ready (after its first sync and room joins) and agent:stopped
// (during an orderly shutdown, while the account can still send). All
// observer, 5 s; nothing can be changed. rooms= filters match JoinedRooms.
type AgentLifecycleContext struct {
	Base
	Agent AgentName `json:"agent"`
	// EntityType is "agent" or "router".
	EntityType  string      `json:"entity_type"`
	UserID      id.UserID   `json:"user_id"`
	Rooms       []string    `json:"rooms,omitempty"` // as configured (keys, aliases or ids)
	JoinedRooms []id.RoomID `json:"joined_rooms,omitempty"`
	StopReason  string      `json:"stop_reason,omitempty"`
}

func (c *AgentLifecycleContext) route() route {
	return route{agent: c.Agent, rooms: c.JoinedRooms}
}
func (c *AgentLifecycleContext) isolate() {
	c.Rooms = cloneNonEmpty(c.Rooms)
	c.JoinedRooms = cloneNonEmpty(c.JoinedRooms)
}
func (c *AgentLifecycleContext) merge(*AgentLifecycleContext) {}
func (c *AgentLifecycleContext) describe(*AgentLifecycleContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// SessionContext is passed to session:started hooks (observer, 5 s). It
// fires once when the first turn of a conversation scope (room + thread) is
// stored.
type SessionContext struct {
	Base
	Agent AgentName `json:"agent"`
	// SessionID is the conversation's key (room + thread), the same value
	// as an envelope's session_id.
	SessionID string `json:"session_id"`
	// HistoryID identifies the stored history of the conversation: made
	// when its first turn is stored, kept by compaction, new after the
	// history was deleted.
	HistoryID string     `json:"history_id"`
	RoomID    id.RoomID  `json:"room_id"`
	ThreadID  id.EventID `json:"thread_id,omitempty"`
}

func (c *SessionContext) route() route {
	return route{agent: c.Agent, room: c.RoomID, thread: c.ThreadID}
}
func (c *SessionContext) isolate()                                        {}
func (c *SessionContext) merge(*SessionContext)                           {}
func (c *SessionContext) describe(*SessionContext, bool) (Effect, string) { return EffectUnchanged, "" }

// ChatMessage is one message of a conversation history.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	Name    string `json:"name,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ChatToolCall `json:"tool_calls,omitempty"`
	// ToolCallID ties a tool message (a result) to its call.
	ToolCallID string `json:"tool_call_id,omitempty"`
}

// ChatToolCall is one tool call of an assistant message.
type ChatToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// CompactionContext is passed to compaction:before (observer, 15 s; after
// the compacted history is prepared, before it is stored) and
// compaction:after (observer, 5 s; after it is stored, with the token
// counts and the summary). Nothing can be changed.
type CompactionContext struct {
	Base
	Agent AgentName `json:"agent"`
	// SessionID is the conversation's key (room + thread); HistoryID the
	// stored history's id (see SessionContext).
	SessionID    string        `json:"session_id"`
	HistoryID    string        `json:"history_id"`
	RoomID       id.RoomID     `json:"room_id"`
	ThreadID     id.EventID    `json:"thread_id,omitempty"`
	Messages     []ChatMessage `json:"messages"`
	TokensBefore int           `json:"tokens_before"`
	TokensAfter  int           `json:"tokens_after,omitempty"`
	Summary      string        `json:"summary,omitempty"`
}

func (c *CompactionContext) route() route {
	return route{agent: c.Agent, room: c.RoomID, thread: c.ThreadID}
}
func (c *CompactionContext) isolate() {
	c.Messages = cloneNonEmpty(c.Messages)
	for i := range c.Messages {
		c.Messages[i].ToolCalls = cloneNonEmpty(c.Messages[i].ToolCalls)
	}
}
func (c *CompactionContext) merge(*CompactionContext) {}
func (c *CompactionContext) describe(*CompactionContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// ScheduleFiredContext is passed to schedule:fired hooks (observer, 1 s). It
// fires when a scheduled task is due, before the router posts its message
// (which then enters the pipeline on behalf of CreatedBy, in ThreadID). A
// hook may change MessageText or set Suppress (nothing is posted). Schedule
// describes when the task runs ("every weekday at 09:00 (UTC)"); Agent is
// the agent that created the task with the schedule tool and that the
// message is addressed to ("" for !schedule); DueAt is the due time the
// firing is for (RFC 3339 with milliseconds, UTC).
type ScheduleFiredContext struct {
	Base
	TaskID      string     `json:"task_id"`
	Schedule    string     `json:"schedule,omitempty"`
	RoomID      id.RoomID  `json:"room_id"`
	ThreadID    id.EventID `json:"thread_id,omitempty"`
	CreatedBy   id.UserID  `json:"created_by,omitempty"`
	Agent       AgentName  `json:"agent,omitempty"`
	DueAt       string     `json:"due_at,omitempty"`
	MessageText string     `json:"message_text"`
	Suppress    bool       `json:"suppress"`
}

func (c *ScheduleFiredContext) route() route {
	return route{room: c.RoomID, thread: c.ThreadID, requester: c.CreatedBy, sendThread: c.ThreadID}
}
func (c *ScheduleFiredContext) isolate() {}
func (c *ScheduleFiredContext) merge(from *ScheduleFiredContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *ScheduleFiredContext) describe(b *ScheduleFiredContext, detail bool) (Effect, string) {
	text := c.MessageText != b.MessageText
	suppress := c.Suppress != b.Suppress
	eff := effect(text || suppress, suppress && c.Suppress)
	if !detail || eff == EffectUnchanged {
		return eff, ""
	}
	var ch changes
	if text {
		ch.text("message_text", b.MessageText, c.MessageText)
	}
	if suppress {
		ch.flag("suppress", b.Suppress, c.Suppress)
	}
	return eff, ch.String()
}

// ReactionReceivedContext is passed to reaction:received hooks (observer,
// 500 ms). It fires for a reaction from an authorized person after the
// built-in reaction handlers (🛑 stop) declined it. Agent is the agent whose
// message was reacted to, "" when the target is not an agent's message.
type ReactionReceivedContext struct {
	Base
	Agent         AgentName  `json:"agent,omitempty"`
	RoomID        id.RoomID  `json:"room_id"`
	EventID       id.EventID `json:"event_id"`
	SenderID      id.UserID  `json:"sender_id"`
	Key           string     `json:"key"`
	TargetEventID id.EventID `json:"target_event_id"`
	ThreadID      id.EventID `json:"thread_id,omitempty"`
}

func (c *ReactionReceivedContext) route() route {
	return route{agent: c.Agent, room: c.RoomID, thread: c.ThreadID, requester: c.SenderID}
}
func (c *ReactionReceivedContext) isolate()                       {}
func (c *ReactionReceivedContext) merge(*ReactionReceivedContext) {}
func (c *ReactionReceivedContext) describe(*ReactionReceivedContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// RoomMemberContext is passed to room:member_joined and room:member_left
// hooks (observer, 3 s). member_joined fires once per room and person,
// ever: not for members present before hookroom first synced the room, not
// again after a leave and rejoin or a restart, and never for the router,
// agents or configured bot accounts. member_left fires when a person leaves
// on their own. Nothing can be changed.
type RoomMemberContext struct {
	Base
	RoomID         id.RoomID  `json:"room_id"`
	EventID        id.EventID `json:"event_id"`
	UserID         id.UserID  `json:"user_id"`
	SenderID       id.UserID  `json:"sender_id"`
	DisplayName    string     `json:"display_name,omitempty"`
	AvatarURL      string     `json:"avatar_url,omitempty"`
	Membership     string     `json:"membership"`
	PrevMembership string     `json:"prev_membership,omitempty"`
}

// route names no requester: what a hook does for a new member (a welcome
// message, an onboarding turn) is the server's own action, not the
// member's, so its messages carry no original sender.
func (c *RoomMemberContext) route() route {
	return route{room: c.RoomID}
}
func (c *RoomMemberContext) isolate()                 {}
func (c *RoomMemberContext) merge(*RoomMemberContext) {}
func (c *RoomMemberContext) describe(*RoomMemberContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// ConfigReloadedContext is passed to config:reloaded hooks (observer, 5 s).
// It fires after a new configuration was applied, with what changed (sorted).
type ConfigReloadedContext struct {
	Base
	AddedAgents   []AgentName `json:"added_agents,omitempty"`
	ChangedAgents []AgentName `json:"changed_agents,omitempty"`
	RemovedAgents []AgentName `json:"removed_agents,omitempty"`
	// PluginChanges describe plugin changes, e.g. "added audit", "restarted geo".
	PluginChanges []string `json:"plugin_changes,omitempty"`
}

func (c *ConfigReloadedContext) route() route { return route{} }
func (c *ConfigReloadedContext) isolate() {
	c.AddedAgents = cloneNonEmpty(c.AddedAgents)
	c.ChangedAgents = cloneNonEmpty(c.ChangedAgents)
	c.RemovedAgents = cloneNonEmpty(c.RemovedAgents)
	c.PluginChanges = cloneNonEmpty(c.PluginChanges)
}
func (c *ConfigReloadedContext) merge(*ConfigReloadedContext) {}
func (c *ConfigReloadedContext) describe(*ConfigReloadedContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// ToolCall describes one tool call of a turn.
type ToolCall struct {
	Tool string `json:"tool"`
	// Arguments is the JSON object the model passed. Each hook gets its own
	// copy; use DecodeArguments to read it.
	Arguments   json.RawMessage `json:"arguments"`
	Agent       AgentName       `json:"agent"`
	RoomID      id.RoomID       `json:"room_id,omitempty"`
	ThreadID    id.EventID      `json:"thread_id,omitempty"`
	RequesterID id.UserID       `json:"requester_id,omitempty"`
	SessionID   string          `json:"session_id,omitempty"`
}

// DecodeArguments unmarshals the call's arguments into v.
func (t *ToolCall) DecodeArguments(v any) error { return json.Unmarshal(t.Arguments, v) }

func (t *ToolCall) route() route {
	return route{agent: t.Agent, room: t.RoomID, thread: t.ThreadID, requester: t.RequesterID}
}

// ToolBeforeCallContext is passed to tool:before_call hooks (gate, 200 ms).
// It fires right before each tool call. A hook may Decline the call: the
// chain stops and the model gets a declined result with the reason instead
// of the tool's output. A hook may instead RequireApproval: the chain goes
// on (a later hook may still decline; a decline beats an approval), and
// after the gates the call waits for a person's approval (see
// tool:approval_requested). A failing hook is ignored, unless its failure
// policy is closed: then the call is declined because the gate was
// unavailable.
type ToolBeforeCallContext struct {
	Base
	ToolCall
	Declined      bool   `json:"declined"`
	DeclineReason string `json:"decline_reason,omitempty"`
	// ApprovalRequired is set when a hook asked for a person's approval
	// (or a tool_approval rule did before the hooks ran); ApprovalReason
	// says why, and is shown on the approval card.
	ApprovalRequired bool   `json:"approval_required"`
	ApprovalReason   string `json:"approval_reason"`
}

// Decline refuses the tool call with a reason the model will see.
func (c *ToolBeforeCallContext) Decline(reason string) {
	c.Declined = true
	c.DeclineReason = reason
}

// RequireApproval makes the call wait for a person's approval instead of
// running right away, with a reason shown to the person. The first reason
// given is kept.
func (c *ToolBeforeCallContext) RequireApproval(reason string) {
	if !c.ApprovalRequired || c.ApprovalReason == "" {
		c.ApprovalReason = reason
	}
	c.ApprovalRequired = true
}

func (c *ToolBeforeCallContext) route() route { return c.ToolCall.route() }
func (c *ToolBeforeCallContext) isolate()     { c.Arguments = cloneNonEmpty(c.Arguments) }
func (c *ToolBeforeCallContext) merge(from *ToolBeforeCallContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *ToolBeforeCallContext) stopped() bool { return c.Declined }
func (c *ToolBeforeCallContext) declineUnavailable(reason string) {
	c.Declined = true
	c.DeclineReason = reason
}

// describe: a decline beats a request for approval, which beats any other
// change (a changed reason).
func (c *ToolBeforeCallContext) describe(b *ToolBeforeCallContext, detail bool) (Effect, string) {
	declined := c.Declined != b.Declined || c.DeclineReason != b.DeclineReason
	approval := c.ApprovalRequired != b.ApprovalRequired || c.ApprovalReason != b.ApprovalReason
	var eff Effect
	switch {
	case c.Declined && !b.Declined:
		eff = EffectDeclined
	case c.ApprovalRequired && !b.ApprovalRequired:
		eff = EffectApprovalRequired
	default:
		eff = effect(declined || approval, false)
	}
	if !detail || eff == EffectUnchanged {
		return eff, ""
	}
	var ch changes
	switch {
	case c.Declined && !b.Declined:
		ch.value("declined", c.DeclineReason)
	case declined:
		ch.flag("declined", b.Declined, c.Declined)
		ch.text("decline_reason", b.DeclineReason, c.DeclineReason)
	}
	switch {
	case c.ApprovalRequired && !b.ApprovalRequired:
		ch.value("approval_required", c.ApprovalReason)
	case approval:
		ch.flag("approval_required", b.ApprovalRequired, c.ApprovalRequired)
		ch.text("approval_reason", b.ApprovalReason, c.ApprovalReason)
	}
	return eff, ch.String()
}

// ToolAfterCallContext is passed to tool:after_call hooks (observer, 300 ms).
// It fires after every tool call: when it returned, failed, or was
// declined (Blocked). Nothing can be changed.
type ToolAfterCallContext struct {
	Base
	ToolCall
	Result   string        `json:"result,omitempty"`
	Error    string        `json:"error,omitempty"`
	Blocked  bool          `json:"blocked"`
	Duration time.Duration `json:"duration_ns"`
}

func (c *ToolAfterCallContext) route() route                { return c.ToolCall.route() }
func (c *ToolAfterCallContext) isolate()                    { c.Arguments = cloneNonEmpty(c.Arguments) }
func (c *ToolAfterCallContext) merge(*ToolAfterCallContext) {}
func (c *ToolAfterCallContext) describe(*ToolAfterCallContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// ApprovalDecision is a tool:approval_requested hook's decision.
type ApprovalDecision string

// The decisions a tool:approval_requested hook can make.
const (
	ApprovalApprove ApprovalDecision = "approve"
	ApprovalDeny    ApprovalDecision = "deny"
)

// ToolApprovalRequestedContext is passed to tool:approval_requested hooks
// (gate, 2 s). It fires when a tool call needs a person's approval (a
// tool_approval rule or a tool:before_call hook asked for it), before the
// approval card is posted. A hook may decide instead of a person: Approve
// or Deny stops the chain, no card is posted, and tool:approval_resolved
// follows. A failing hook is ignored, unless its failure policy is closed:
// then the call is denied. When no hook decides, the card is posted and the
// call waits until ExpiresAt.
type ToolApprovalRequestedContext struct {
	Base
	ToolCall
	ApprovalID string `json:"approval_id"`
	// Reason says why the call needs approval.
	Reason    string    `json:"reason,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
	// Decision is "" (no decision: ask a person), "approve" or "deny";
	// DecisionReason goes with it (the model sees a denial's reason).
	Decision       ApprovalDecision `json:"decision,omitempty"`
	DecisionReason string           `json:"decision_reason,omitempty"`
}

// Approve lets the call run without asking a person.
func (c *ToolApprovalRequestedContext) Approve(reason string) {
	c.Decision, c.DecisionReason = ApprovalApprove, reason
}

// Deny refuses the call without asking a person; the model sees reason.
func (c *ToolApprovalRequestedContext) Deny(reason string) {
	c.Decision, c.DecisionReason = ApprovalDeny, reason
}

func (c *ToolApprovalRequestedContext) route() route { return c.ToolCall.route() }
func (c *ToolApprovalRequestedContext) isolate()     { c.Arguments = cloneNonEmpty(c.Arguments) }
func (c *ToolApprovalRequestedContext) merge(from *ToolApprovalRequestedContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *ToolApprovalRequestedContext) stopped() bool { return c.Decision != "" }
func (c *ToolApprovalRequestedContext) declineUnavailable(reason string) {
	c.Decision, c.DecisionReason = ApprovalDeny, reason
}

// describe: a denial is EffectDeclined, an approval EffectChanged.
func (c *ToolApprovalRequestedContext) describe(b *ToolApprovalRequestedContext, detail bool) (Effect, string) {
	if c.Decision == b.Decision && c.DecisionReason == b.DecisionReason {
		return EffectUnchanged, ""
	}
	eff := EffectChanged
	if c.Decision == ApprovalDeny && b.Decision != ApprovalDeny {
		eff = EffectDeclined
	}
	if !detail {
		return eff, ""
	}
	var ch changes
	switch {
	case c.Decision == b.Decision:
		ch.text("decision_reason", b.DecisionReason, c.DecisionReason)
	case c.Decision == ApprovalDeny:
		ch.value("denied", c.DecisionReason)
	case c.Decision == ApprovalApprove:
		ch.value("approved", c.DecisionReason)
	default:
		ch.text("decision", string(b.Decision), string(c.Decision))
		ch.text("decision_reason", b.DecisionReason, c.DecisionReason)
	}
	return eff, ch.String()
}

// ApprovalOutcome is how an approval ended.
type ApprovalOutcome string

// The outcomes of an approval.
const (
	ApprovalApproved  ApprovalOutcome = "approved"
	ApprovalDenied    ApprovalOutcome = "denied"
	ApprovalExpired   ApprovalOutcome = "expired"   // nobody answered in time: denied
	ApprovalCancelled ApprovalOutcome = "cancelled" // the turn ended or no longer makes the call
)

// ToolApprovalResolvedContext is passed to tool:approval_resolved hooks
// (observer, 1 s). It fires once per approval when it ends: approved or
// denied by a person or a tool:approval_requested hook, expired at its
// deadline, or cancelled (the turn was stopped, or after a restart no
// longer made the call). Nothing can be changed.
type ToolApprovalResolvedContext struct {
	Base
	ToolCall
	ApprovalID string          `json:"approval_id"`
	Reason     string          `json:"reason,omitempty"`
	Outcome    ApprovalOutcome `json:"outcome"`
	// DecidedBy is the person who answered; "" when a hook, the deadline
	// or the turn's end decided.
	DecidedBy      id.UserID `json:"decided_by,omitempty"`
	DecisionReason string    `json:"decision_reason,omitempty"`
	// Waited is how long the call waited for the decision.
	Waited time.Duration `json:"waited_ns"`
}

func (c *ToolApprovalResolvedContext) route() route                       { return c.ToolCall.route() }
func (c *ToolApprovalResolvedContext) isolate()                           { c.Arguments = cloneNonEmpty(c.Arguments) }
func (c *ToolApprovalResolvedContext) merge(*ToolApprovalResolvedContext) {}
func (c *ToolApprovalResolvedContext) describe(*ToolApprovalResolvedContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// PluginSourceType says what a plugin being installed was installed from.
type PluginSourceType string

// The sources a plugin can be installed from.
const (
	PluginSourceDir     PluginSourceType = "dir"     // a local directory, copied
	PluginSourceTarball PluginSourceType = "tarball" // a .tar.gz archive, extracted
	PluginSourceGit     PluginSourceType = "git"     // a git repository, cloned
)

// PluginInstallContext is passed to plugin:before_install hooks (gate,
// 5 s). It fires when `hookroom plugin install` or `hookroom plugin update`
// has unpacked a plugin into a staging directory, read its manifest and
// checked that it is compatible with this hookroom, before the plugin is
// moved into the plugin directory. A hook may Decline: the chain stops,
// nothing is installed (an update leaves the installed version in place)
// and the operator sees the reason. A failing hook is ignored, unless its
// failure policy is closed: then the install is declined because the gate
// was unavailable. The event names no agent and no room.
type PluginInstallContext struct {
	Base
	// Name, Version and Description are the manifest's.
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
	// Update is set when the plugin replaces an installed version,
	// PreviousVersion.
	Update          bool   `json:"update"`
	PreviousVersion string `json:"previous_version,omitempty"`
	// Source is what the operator named (a directory, an archive, a git
	// URL without its password), SourceType its kind. For git, Ref is the
	// requested branch or tag ("" for the default branch) and Commit the
	// commit that was checked out.
	Source     string           `json:"source"`
	SourceType PluginSourceType `json:"source_type"`
	Ref        string           `json:"ref,omitempty"`
	Commit     string           `json:"commit,omitempty"`
	// Checksum is "sha256:<hex>" over the plugin's file tree, as the lock
	// file records it.
	Checksum string `json:"checksum"`
	// Command, Builtin and Env are the manifest's: what will run and which
	// environment variables it asks for.
	Command []string `json:"command,omitempty"`
	Builtin string   `json:"builtin,omitempty"`
	Env     []string `json:"env,omitempty"`
	// HookroomRange is the manifest's hookroom version range ("" when it
	// declares none); HookroomVersion the version of the installing
	// hookroom.
	HookroomRange   string `json:"hookroom_range,omitempty"`
	HookroomVersion string `json:"hookroom_version,omitempty"`
	// Dir is the staging directory holding the plugin's files, for hooks
	// that inspect them. Read it, never change it: the checksum was taken.
	// Files and Size count its regular files and their bytes.
	Dir   string `json:"dir"`
	Files int    `json:"files"`
	Size  int64  `json:"size"`
	// Declined, set with Decline, refuses the install; DeclineReason is
	// shown to the operator.
	Declined      bool   `json:"declined"`
	DeclineReason string `json:"decline_reason,omitempty"`
}

// Decline refuses the install with a reason the operator will see.
func (c *PluginInstallContext) Decline(reason string) {
	c.Declined = true
	c.DeclineReason = reason
}

func (c *PluginInstallContext) route() route { return route{} }
func (c *PluginInstallContext) isolate() {
	c.Command = cloneNonEmpty(c.Command)
	c.Env = cloneNonEmpty(c.Env)
}
func (c *PluginInstallContext) merge(from *PluginInstallContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *PluginInstallContext) stopped() bool { return c.Declined }
func (c *PluginInstallContext) declineUnavailable(reason string) {
	c.Declined = true
	c.DeclineReason = reason
}
func (c *PluginInstallContext) describe(b *PluginInstallContext, detail bool) (Effect, string) {
	if c.Declined == b.Declined && c.DeclineReason == b.DeclineReason {
		return EffectUnchanged, ""
	}
	eff := EffectChanged
	if c.Declined && !b.Declined {
		eff = EffectDeclined
	}
	if !detail {
		return eff, ""
	}
	var ch changes
	if c.Declined && !b.Declined {
		ch.value("declined", c.DeclineReason)
	} else {
		ch.flag("declined", b.Declined, c.Declined)
		ch.text("decline_reason", b.DeclineReason, c.DeclineReason)
	}
	return eff, ch.String()
}

// CustomEventContext is passed to hooks of custom events (observer, 1 s),
// which plugins emit with Emit from hooks and tools.
type CustomEventContext struct {
	Base
	// Payload is the JSON the emitter passed; use DecodePayload.
	Payload      json.RawMessage `json:"payload"`
	SourcePlugin string          `json:"source_plugin,omitempty"`
	Agent        AgentName       `json:"agent,omitempty"`
	RoomID       id.RoomID       `json:"room_id,omitempty"`
	ThreadID     id.EventID      `json:"thread_id,omitempty"`
	SenderID     id.UserID       `json:"sender_id,omitempty"`
}

// DecodePayload unmarshals the payload into v.
func (c *CustomEventContext) DecodePayload(v any) error { return json.Unmarshal(c.Payload, v) }

func (c *CustomEventContext) route() route {
	return route{agent: c.Agent, room: c.RoomID, thread: c.ThreadID, requester: c.SenderID}
}
func (c *CustomEventContext) isolate()                  { c.Payload = cloneNonEmpty(c.Payload) }
func (c *CustomEventContext) merge(*CustomEventContext) {}
func (c *CustomEventContext) describe(*CustomEventContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// guard makes the compiler check that *T satisfies the engine's contract.
func guard[T any, P ContextOf[T]]() {}

// Interface guards: every context type satisfies the engine's contract.
var (
	_ = guard[MessageReceivedContext, *MessageReceivedContext]
	_ = guard[MessageClaimContext, *MessageClaimContext]
	_ = guard[MessageEnrichContext, *MessageEnrichContext]
	_ = guard[SystemEnrichContext, *SystemEnrichContext]
	_ = guard[BeforeResponseContext, *BeforeResponseContext]
	_ = guard[FinalResponseContext, *FinalResponseContext]
	_ = guard[AfterResponseContext, *AfterResponseContext]
	_ = guard[CancelledContext, *CancelledContext]
	_ = guard[AgentLifecycleContext, *AgentLifecycleContext]
	_ = guard[SessionContext, *SessionContext]
	_ = guard[CompactionContext, *CompactionContext]
	_ = guard[ScheduleFiredContext, *ScheduleFiredContext]
	_ = guard[ReactionReceivedContext, *ReactionReceivedContext]
	_ = guard[RoomMemberContext, *RoomMemberContext]
	_ = guard[ConfigReloadedContext, *ConfigReloadedContext]
	_ = guard[ToolBeforeCallContext, *ToolBeforeCallContext]
	_ = guard[ToolAfterCallContext, *ToolAfterCallContext]
	_ = guard[ToolApprovalRequestedContext, *ToolApprovalRequestedContext]
	_ = guard[ToolApprovalResolvedContext, *ToolApprovalResolvedContext]
	_ = guard[PluginInstallContext, *PluginInstallContext]
	_ = guard[ModelResolveContext, *ModelResolveContext]
	_ = guard[ModelRequestContext, *ModelRequestContext]
	_ = guard[ModelResponseContext, *ModelResponseContext]
	_ = guard[ToolResultContext, *ToolResultContext]
	_ = guard[BudgetReachedContext, *BudgetReachedContext]
	_ = guard[SubagentContext, *SubagentContext]
	_ = guard[MemoryExtractedContext, *MemoryExtractedContext]
	_ = guard[CustomEventContext, *CustomEventContext]

	_ stopper    = (*ToolBeforeCallContext)(nil)
	_ stopper    = (*MessageClaimContext)(nil)
	_ failCloser = (*ToolBeforeCallContext)(nil)
	_ stopper    = (*ToolApprovalRequestedContext)(nil)
	_ failCloser = (*ToolApprovalRequestedContext)(nil)
	_ stopper    = (*PluginInstallContext)(nil)
	_ failCloser = (*PluginInstallContext)(nil)
	_ stopper    = (*ModelRequestContext)(nil)
	_ stopper    = (*MemoryExtractedContext)(nil)
)
