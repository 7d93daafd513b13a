package hooktest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// Defaults used by the context builders.
const (
	Room      id.RoomID       = "!room:localhost"
	Sender    id.UserID       = "@alice:localhost"
	Agent     hooks.AgentName = "assistant"
	EventID   id.EventID      = "$event:localhost"
	SessionID                 = "!room:localhost/$event:localhost"
)

// Plugin returns a plugin named name with the given hooks, for Registry.
func Plugin(name string, hs ...hooks.Hook) hooks.Plugin {
	return hooks.Plugin{Name: name, Source: "test", Hooks: hs}
}

// Registry builds a registry from plugins (in config order) and fails the
// test on a load error. Pass options to bind services or set limits.
func Registry(t testing.TB, plugins []hooks.Plugin, opts ...hooks.Options) *hooks.Registry {
	t.Helper()
	var o hooks.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	reg, err := hooks.NewRegistry(plugins, o)
	if err != nil {
		t.Fatalf("hooktest: failed to build registry: %v", err)
	}
	return reg
}

// NewRegistry builds a registry holding hs as the hooks of one plugin
// called "test".
func NewRegistry(t testing.TB, hs ...hooks.Hook) *hooks.Registry {
	t.Helper()
	return Registry(t, []hooks.Plugin{Plugin("test", hs...)})
}

// Context returns a context whose zerolog logger writes to the test log.
func Context(t testing.TB) context.Context {
	l := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	return l.WithContext(context.Background())
}

// Emit runs ev's hooks on c in the event's mode, logging to the test log,
// and fails the test if the emission itself failed.
func Emit[T any, P hooks.ContextOf[T]](t testing.TB, reg *hooks.Registry, ev hooks.Event[T], c P) {
	t.Helper()
	if err := hooks.Emit(Context(t), reg, ev, c); err != nil {
		t.Fatalf("hooktest: emit %s: %v", ev.Name(), err)
	}
}

// Envelope returns an envelope for a message from Sender to Agent in Room
// with body.
func Envelope(body string) hooks.Envelope {
	return hooks.Envelope{
		SourceEventID: EventID, RoomID: Room, ResolvedThreadID: EventID, SessionID: SessionID,
		RequesterID: Sender, SenderID: Sender, Body: body, AgentName: Agent, SourceKind: hooks.SourceMessage,
	}
}

// MessageReceived returns a message:received context for body.
func MessageReceived(body string) *hooks.MessageReceivedContext {
	return &hooks.MessageReceivedContext{Envelope: Envelope(body)}
}

// MessageClaim returns a message:claim context for body.
func MessageClaim(body string) *hooks.MessageClaimContext {
	return &hooks.MessageClaimContext{Envelope: Envelope(body)}
}

// MessageEnrich returns a message:enrich context for body.
func MessageEnrich(body string) *hooks.MessageEnrichContext {
	return &hooks.MessageEnrichContext{Envelope: Envelope(body), TargetAgent: Agent}
}

// SystemEnrich returns a system:enrich context for body.
func SystemEnrich(body string) *hooks.SystemEnrichContext {
	return &hooks.SystemEnrichContext{Envelope: Envelope(body), TargetAgent: Agent}
}

// BeforeResponse returns a message:before_response context whose draft
// reply is text.
func BeforeResponse(text string) *hooks.BeforeResponseContext {
	return &hooks.BeforeResponseContext{Draft: hooks.ResponseDraft{Text: text, Kind: hooks.ResponseAI, Envelope: Envelope("hello")}}
}

// FinalResponse returns a message:final_response_transform context whose
// final text is text.
func FinalResponse(text string) *hooks.FinalResponseContext {
	return &hooks.FinalResponseContext{Draft: hooks.FinalDraft{Text: text, Kind: hooks.ResponseAI, Envelope: Envelope("hello")}}
}

// AfterResponse returns a message:after_response context for a reply text,
// from one model call of 120 input tokens (100 of them cached) and 8 output
// tokens.
func AfterResponse(text string) *hooks.AfterResponseContext {
	return &hooks.AfterResponseContext{Result: hooks.ResponseResult{
		Text: text, EventID: "$reply:localhost", DeliveryKind: hooks.DeliverySent, Kind: hooks.ResponseAI, Envelope: Envelope("hello"),
		Usage: hooks.TokenUsage{Model: "test-model", InputTokens: 120, OutputTokens: 8, CachedTokens: 100, TotalTokens: 128, ModelCalls: 1},
	}}
}

// Cancelled returns a message:cancelled context with reason.
func Cancelled(reason hooks.CancelReason) *hooks.CancelledContext {
	return &hooks.CancelledContext{Info: hooks.CancelledInfo{Envelope: Envelope("hello"), Kind: hooks.ResponseAI, Reason: reason}}
}

// Lifecycle returns an agent:started / agent:stopped / bot:ready context
// for Agent joined to Room.
func Lifecycle() *hooks.AgentLifecycleContext {
	return &hooks.AgentLifecycleContext{
		Agent: Agent, EntityType: "agent", UserID: "@assistant:localhost",
		Rooms: []string{string(Room)}, JoinedRooms: []id.RoomID{Room},
	}
}

// ToolBeforeCall returns a tool:before_call context for tool with JSON args.
func ToolBeforeCall(tool, args string) *hooks.ToolBeforeCallContext {
	return &hooks.ToolBeforeCallContext{ToolCall: toolCall(tool, args)}
}

// ToolAfterCall returns a tool:after_call context for tool with JSON args
// and its result.
func ToolAfterCall(tool, args, result string) *hooks.ToolAfterCallContext {
	return &hooks.ToolAfterCallContext{ToolCall: toolCall(tool, args), Result: result}
}

func toolCall(tool, args string) hooks.ToolCall {
	if args == "" {
		args = "{}"
	}
	return hooks.ToolCall{
		Tool: tool, Arguments: json.RawMessage(args), Agent: Agent, RoomID: Room,
		ThreadID: EventID, RequesterID: Sender, SessionID: SessionID,
	}
}

// MemberJoined returns a room:member_joined context for user in Room.
func MemberJoined(user id.UserID) *hooks.RoomMemberContext {
	return &hooks.RoomMemberContext{RoomID: Room, EventID: "$join:localhost", UserID: user, SenderID: user, Membership: "join", PrevMembership: "invite"}
}

// Custom returns a custom-event context with payload marshalled to JSON.
func Custom(payload any) *hooks.CustomEventContext {
	raw, err := json.Marshal(payload)
	if err != nil {
		panic(fmt.Sprintf("hooktest: payload: %v", err))
	}
	return &hooks.CustomEventContext{Payload: raw, Agent: Agent, RoomID: Room, SenderID: Sender}
}

// Services is an in-memory stand-in for the host services, recording what
// hooks asked for. Its zero value is ready to use; bind it with
// hooks.Options{Services: s.Bind()}.
type Services struct {
	mu          sync.Mutex
	sent        []hooks.HookMessage
	state       map[id.RoomID]map[string]map[string]json.RawMessage
	attachments map[attachmentKey]hooks.Attachment
	nextID      int
}

type attachmentKey struct {
	room  id.RoomID
	event id.EventID
	id    string
}

var (
	_ hooks.MessageSender = (*Services)(nil)
	_ hooks.RoomState     = (*Services)(nil)
	_ hooks.Attachments   = (*Services)(nil)
)

// Bind returns the hooks.Services backed by s.
func (s *Services) Bind() hooks.Services {
	return hooks.Services{Sender: s, State: s, Attachments: s}
}

// AddAttachment makes att (by att.ID) an attachment of message event in
// room, for FetchAttachment. Put att.ID into the envelope's AttachmentIDs
// too: hooks can only fetch the attachments their message names.
func (s *Services) AddAttachment(room id.RoomID, event id.EventID, att hooks.Attachment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attachments == nil {
		s.attachments = map[attachmentKey]hooks.Attachment{}
	}
	att.Size = int64(len(att.Data))
	s.attachments[attachmentKey{room, event, att.ID}] = att
}

// FetchAttachment returns an attachment added with AddAttachment, or
// hooks.ErrNotFound.
func (s *Services) FetchAttachment(_ context.Context, room id.RoomID, event id.EventID, attachmentID string) (*hooks.Attachment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	att, ok := s.attachments[attachmentKey{room, event, attachmentID}]
	if !ok {
		return nil, fmt.Errorf("no attachment %q: %w", attachmentID, hooks.ErrNotFound)
	}
	att.Data = slices.Clone(att.Data)
	return &att, nil
}

// SendHookMessage records msg and returns a fresh event id.
func (s *Services) SendHookMessage(_ context.Context, msg hooks.HookMessage) (id.EventID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, msg)
	s.nextID++
	return id.EventID(fmt.Sprintf("$sent%d:localhost", s.nextID)), nil
}

// Sent returns the messages hooks sent so far.
func (s *Services) Sent() []hooks.HookMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hooks.HookMessage(nil), s.sent...)
}

// RoomStateEvent returns stored state or hooks.ErrNotFound.
func (s *Services) RoomStateEvent(_ context.Context, room id.RoomID, eventType, stateKey string) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.state[room][eventType][stateKey]; ok {
		return c, nil
	}
	return nil, hooks.ErrNotFound
}

// RoomStateEvents returns all stored state of a type.
func (s *Services) RoomStateEvents(_ context.Context, room id.RoomID, eventType string) (map[string]json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.state[room][eventType]), nil
}

// PutRoomState stores content.
func (s *Services) PutRoomState(_ context.Context, room id.RoomID, eventType, stateKey string, content any) (id.EventID, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return "", fmt.Errorf("failed to marshal state content: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		s.state = map[id.RoomID]map[string]map[string]json.RawMessage{}
	}
	if s.state[room] == nil {
		s.state[room] = map[string]map[string]json.RawMessage{}
	}
	if s.state[room][eventType] == nil {
		s.state[room][eventType] = map[string]json.RawMessage{}
	}
	s.state[room][eventType][stateKey] = raw
	s.nextID++
	return id.EventID(fmt.Sprintf("$state%d:localhost", s.nextID)), nil
}

// ToolApprovalRequested returns a tool:approval_requested context for tool
// with JSON args.
func ToolApprovalRequested(tool, args string) *hooks.ToolApprovalRequestedContext {
	return &hooks.ToolApprovalRequestedContext{ToolCall: toolCall(tool, args), ApprovalID: "approval-1"}
}

// PluginInstall returns a plugin:before_install context for a fresh install
// of plugin name at version from a local directory.
func PluginInstall(name, version string) *hooks.PluginInstallContext {
	return &hooks.PluginInstallContext{
		Name: name, Version: version, Source: "/src/" + name, SourceType: hooks.PluginSourceDir,
		Checksum: "sha256:0000", Command: []string{"python3", "plugin.py"}, Dir: "/plugins/.staging/" + name,
	}
}

// Where returns the conversation the model events' builders are about:
// Agent answering Sender in Room, in the thread rooted at EventID.
func Where() hooks.Where {
	return hooks.Where{Agent: Agent, RoomID: Room, ThreadID: EventID, RequesterID: Sender, SessionID: SessionID}
}

// ModelResolve returns a model:resolve context for a turn of an agent
// configured with model configured, config.yaml defining models (sorted
// here), nobody having chosen a model with !model. Set Requested and
// Source (and Model) for a turn that has a choice.
func ModelResolve(text, configured string, models ...string) *hooks.ModelResolveContext {
	models = slices.Sorted(slices.Values(models))
	return &hooks.ModelResolveContext{
		Where: Where(), Text: text, Configured: configured, Source: hooks.ModelFromConfig, Models: models, Model: configured,
	}
}

// ModelRequest returns a model:request context for the first model call
// of a turn: a system prompt and the person's text, offering tools (with
// empty parameters), for model "default".
func ModelRequest(text string, tools ...string) *hooks.ModelRequestContext {
	c := &hooks.ModelRequestContext{
		Where: Where(), Model: "default", ProviderModel: "test-model", Round: 1,
		Messages: []hooks.ChatMessage{
			{Role: hooks.RoleSystem, Content: "You are a helpful assistant."},
			{Role: hooks.RoleUser, Content: text},
		},
	}
	for _, name := range tools {
		c.Tools = append(c.Tools, hooks.ModelTool{Name: name, Description: "the " + name + " tool"})
	}
	return c
}

// ModelResponse returns a model:response context for a first model call
// that answered text (12 prompt and 3 completion tokens, 250 ms).
func ModelResponse(text string) *hooks.ModelResponseContext {
	return &hooks.ModelResponseContext{
		Where: Where(), Model: "default", ProviderModel: "test-model", Round: 1, Text: text, FinishReason: "stop",
		Usage:   hooks.TokenUsage{Model: "test-model", InputTokens: 12, OutputTokens: 3, TotalTokens: 15, ModelCalls: 1},
		Latency: 250 * time.Millisecond,
	}
}

// ToolResult returns a tool:result context for a call of tool with args
// (JSON; "" is {}) that returned content.
func ToolResult(tool, args, content string) *hooks.ToolResultContext {
	return &hooks.ToolResultContext{ToolCall: toolCall(tool, args), CallID: "call_1", Content: content}
}

// BudgetReached returns a usage:budget_reached context: the budget of
// scope (Sender's, or Agent's) of limit tokens, of which used were used
// today, reached threshold.
func BudgetReached(scope hooks.BudgetScope, limit, used int64, threshold float64) *hooks.BudgetReachedContext {
	subject := string(Sender)
	if scope == hooks.BudgetAgent {
		subject = string(Agent)
	}
	return &hooks.BudgetReachedContext{
		Where: Where(), Scope: scope, Subject: subject, Limit: limit, Used: used, Threshold: threshold, Day: "2026-01-02",
	}
}

// TeamName is the team the team builders describe.
const TeamName hooks.AgentName = "research"

// Team returns the team fields of a turn of TeamName in mode, led by the
// first of members, asking every member.
func Team(mode hooks.TeamMode, members ...hooks.AgentName) *hooks.TeamInfo {
	t := &hooks.TeamInfo{Name: TeamName, Mode: mode, Members: members, TargetMembers: slices.Clone(members)}
	if len(members) > 0 {
		t.Leader = members[0]
	}
	return t
}

// SubagentStarted is when the sub-agent runs of SubagentSpawned and
// SubagentEnded start.
var SubagentStarted = time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)

// SubagentSpawned returns a subagent:spawned context: member answering
// task for TeamName (depth 1), in the team's turn on Sender's message in
// Room.
func SubagentSpawned(member hooks.AgentName, task string) *hooks.SubagentContext {
	w := Where()
	w.Agent = TeamName
	return &hooks.SubagentContext{
		Where: w, RunID: string(EventID) + "/" + string(TeamName) + "/" + string(member) + "/answer",
		AgentID: member, Parent: TeamName, Team: TeamName, Reason: hooks.SubagentTeamMember, Task: task,
		SpawnDepth: 1, SourceEventID: EventID, StartedAt: SubagentStarted,
	}
}

// SubagentEnded returns the subagent:ended context of SubagentSpawned's run,
// ended after 1.5 s with outcome: one model call of 200 input and 40 output
// tokens for ok, none and an error for the others.
func SubagentEnded(member hooks.AgentName, task string, outcome hooks.SubagentOutcome) *hooks.SubagentContext {
	c := SubagentSpawned(member, task)
	c.Outcome, c.Duration = outcome, 1500*time.Millisecond
	c.EndedAt = c.StartedAt.Add(c.Duration)
	switch outcome {
	case hooks.SubagentOK:
		c.Usage = hooks.TokenUsage{Model: "test-model", InputTokens: 200, OutputTokens: 40, TotalTokens: 240, ModelCalls: 1}
	case hooks.SubagentTimeout:
		c.Error = "context deadline exceeded"
	case hooks.SubagentKilled:
		c.Error = "cancelled by a person"
	default:
		c.Error = "the model failed: 500 Internal Server Error"
	}
	return c
}

// MemoryExtracted returns a memory:extracted context for Agent's turn
// answering Sender in Room: the candidates texts, each a person memory of
// Sender with Agent.
func MemoryExtracted(texts ...string) *hooks.MemoryExtractedContext {
	c := &hooks.MemoryExtractedContext{Where: Where()}
	for _, t := range texts {
		c.Memories = append(c.Memories, hooks.ExtractedMemory{Text: t, Scope: "person", Person: Sender, Agent: Agent, Room: Room})
	}
	return c
}
