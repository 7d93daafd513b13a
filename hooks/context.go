package hooks

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"
)

// AgentName names a configured agent ("assistant", "code"). The router's
// name is RouterName.
type AgentName string

// RouterName is the agent name of the router account.
const RouterName AgentName = "router"

// Context is implemented by every event context type (*MessageReceivedContext,
// *ToolBeforeCallContext, …). Handlers registered with HandleAny receive it
// and may type-switch on the concrete type or marshal it to JSON.
type Context interface {
	hookBase() *Base
}

// ContextOf is the constraint of Emit: a pointer to one of this package's
// event context types, with the per-type operations the modes need. Only
// the context types of this package satisfy it.
type ContextOf[T any] interface {
	*T
	Context
	// route returns what filters and helpers need to know of the context.
	route() route
	// isolate makes the reference fields a hook may change private to this
	// copy, so that nothing it does leaks into other copies.
	isolate()
	// merge takes the designated mutable fields of a hook's copy after the
	// hook succeeded in time (collectors: appends its items).
	merge(from *T)
	// describe tells what a hook's successful run did to the designated
	// fields: this is the hook's copy after the run, before what it got
	// its copy from (for collectors, whose copies start without items,
	// unused). The Change text is built only with detail.
	describe(before *T, detail bool) (Effect, string)
}

// stopper is implemented by contexts whose chain ends early: a gate that
// declined, a message that was claimed.
type stopper interface{ stopped() bool }

// checker is implemented by contexts whose designated fields a hook can
// set to something the emitter cannot use (model:resolve: a model
// config.yaml does not define). A hook whose copy fails check after it
// returned in time has failed with check's error: it is logged and
// counted as an error, and its changes are dropped. before holds the
// designated fields as the hook got them.
type checker[T any] interface{ check(before *T) error }

// failCloser is implemented by gate contexts: a failing hook whose failure
// policy is closed declines with reason.
type failCloser interface{ declineUnavailable(reason string) }

type route struct {
	agent     AgentName
	room      id.RoomID
	thread    id.EventID
	requester id.UserID
	// sendThread is the thread a message sent without one goes to
	// (schedule:fired: the schedule's thread).
	sendThread id.EventID
	rooms      []id.RoomID // further rooms the context is in (lifecycle: joined rooms)
	skip       []string    // plugins excluded (message:received re-entry)
	// event and attachments are the inbound message of an envelope and its
	// attachment ids: the only attachments Base.Attachment fetches.
	event       id.EventID
	attachments []string
}

// Base is embedded in every event context. Its helpers are bound to the hook
// being run: the plugin's settings, state directory and logger, and the host
// services. In a context built by the caller (before Emit) they are unbound.
type Base struct {
	// CorrelationID ties every hook run caused by one inbound event or
	// lifecycle action together in logs. The emitter sets it; when empty,
	// the engine fills a unique one.
	CorrelationID string `json:"correlation_id,omitempty"`

	hook *registered
	em   *emission
}

func (b *Base) hookBase() *Base { return b }

// EventName returns the name of the event being emitted.
func (b *Base) EventName() string {
	if b.em == nil {
		return ""
	}
	return b.em.info.name
}

// PluginName returns the name of the plugin that owns the running hook.
func (b *Base) PluginName() string {
	if b.hook == nil {
		return ""
	}
	return b.hook.plugin.name
}

// HookName returns the running hook's name.
func (b *Base) HookName() string {
	if b.hook == nil {
		return ""
	}
	return b.hook.name
}

// Settings returns the plugin's settings from config.yaml.
func (b *Base) Settings() Settings {
	if b.hook == nil {
		return Settings{}
	}
	return b.hook.plugin.settings
}

// StateRoot returns the plugin's own state directory,
// <data_dir>/plugins/<plugin>/, creating it on first use.
func (b *Base) StateRoot() (string, error) {
	if b.hook == nil || b.hook.plugin.stateRoot == "" {
		return "", fmt.Errorf("failed to get state root: %w", ErrNoService)
	}
	dir := b.hook.plugin.stateRoot
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", fmt.Errorf("failed to create plugin state directory: %w", err)
	}
	return filepath.Clean(dir), nil
}

// Logger returns a logger bound to the plugin, hook, event and correlation id.
func (b *Base) Logger() *zerolog.Logger {
	if b.em == nil {
		l := zerolog.Nop()
		return &l
	}
	l := b.em.log.With().
		Str("plugin", b.PluginName()).
		Str("hook", b.HookName()).
		Str("event", b.em.info.name).
		Str("correlation_id", b.em.correlationID).
		Logger()
	return &l
}

// SendOptions adjust a hook-originated message.
type SendOptions struct {
	// ThreadID is the thread to post in. Left empty, the message is
	// posted at room level, except from schedule:fired, where it goes to
	// the schedule's thread (ScheduleFiredContext.ThreadID).
	ThreadID id.EventID
	// RoomLevel, with ThreadID empty, posts at room level even from
	// schedule:fired.
	RoomLevel       bool
	Extra           map[string]any
	TriggerDispatch bool
}

// SendMessage sends a Markdown message into room on behalf of the hook and
// returns its event id. The message carries its origin (plugin, event,
// causal depth, and the requester of the context as original sender;
// room:member_joined names none, its messages are the server's own); with
// TriggerDispatch it re-enters the pipeline as an addressed message,
// subject to the recursion limit. From schedule:fired, a message sent
// without a thread goes to the schedule's thread unless opts.RoomLevel.
func (b *Base) SendMessage(ctx context.Context, room id.RoomID, text string, opts *SendOptions) (id.EventID, error) {
	if b.em == nil || b.em.reg.services.Sender == nil {
		return "", fmt.Errorf("failed to send message: %w", ErrNoService)
	}
	msg := HookMessage{
		RoomID:         room,
		Text:           text,
		Plugin:         b.PluginName(),
		Event:          b.em.info.name,
		Agent:          b.em.route.agent,
		OriginalSender: b.em.route.requester,
		Depth:          max(Depth(ctx), b.em.depth+1),
		ThreadID:       b.em.route.sendThread,
	}
	if opts != nil {
		if opts.ThreadID != "" || opts.RoomLevel {
			msg.ThreadID = opts.ThreadID
		}
		msg.Extra = opts.Extra
		msg.TriggerDispatch = opts.TriggerDispatch
	}
	return b.em.reg.services.Sender.SendHookMessage(ctx, msg)
}

// RoomStateEvent returns the content of one state event, or ErrNotFound.
func (b *Base) RoomStateEvent(ctx context.Context, room id.RoomID, eventType, stateKey string) (json.RawMessage, error) {
	if b.em == nil || b.em.reg.services.State == nil {
		return nil, fmt.Errorf("failed to query room state: %w", ErrNoService)
	}
	return b.em.reg.services.State.RoomStateEvent(ctx, room, eventType, stateKey)
}

// RoomStateEvents returns every state event of eventType in room, by state key.
func (b *Base) RoomStateEvents(ctx context.Context, room id.RoomID, eventType string) (map[string]json.RawMessage, error) {
	if b.em == nil || b.em.reg.services.State == nil {
		return nil, fmt.Errorf("failed to query room state: %w", ErrNoService)
	}
	return b.em.reg.services.State.RoomStateEvents(ctx, room, eventType)
}

// PutRoomState writes one state event and returns its event id.
func (b *Base) PutRoomState(ctx context.Context, room id.RoomID, eventType, stateKey string, content any) (id.EventID, error) {
	if b.em == nil || b.em.reg.services.State == nil {
		return "", fmt.Errorf("failed to put room state: %w", ErrNoService)
	}
	return b.em.reg.services.State.PutRoomState(ctx, room, eventType, stateKey, content)
}

// Admin returns the Matrix admin facade, or nil when none is bound.
func (b *Base) Admin() MatrixAdmin {
	if b.em == nil {
		return nil
	}
	return b.em.reg.services.Admin
}

// LatestAgentMessage returns the latest message sender (an agent account)
// posted in room, or in the thread when thread is not empty.
func (b *Base) LatestAgentMessage(ctx context.Context, room id.RoomID, sender id.UserID, thread id.EventID) (*AgentMessage, error) {
	if b.em == nil || b.em.reg.services.Messages == nil {
		return nil, fmt.Errorf("failed to read latest agent message: %w", ErrNoService)
	}
	return b.em.reg.services.Messages.LatestAgentMessage(ctx, room, sender, thread)
}

// Attachment returns the attachment attachmentID of the message this
// hook's event is about (one of its envelope's AttachmentIDs), with its
// content. It can be called from the hooks of every event whose context
// has an envelope (message:received, message:claim, message:enrich,
// system:enrich, message:before_response,
// message:final_response_transform, message:after_response,
// message:cancelled). Any other id, and every id in the hooks of other
// events, is ErrNotFound: a hook can only read the files of the message it
// handles. A file larger than the host's limit is ErrTooLarge.
func (b *Base) Attachment(ctx context.Context, attachmentID string) (*Attachment, error) {
	if b.em == nil || b.em.reg.services.Attachments == nil {
		return nil, fmt.Errorf("failed to fetch attachment: %w", ErrNoService)
	}
	r := b.em.route
	if r.event == "" || !slices.Contains(r.attachments, attachmentID) {
		return nil, fmt.Errorf("failed to fetch attachment %q: not an attachment of this message: %w", attachmentID, ErrNotFound)
	}
	return b.em.reg.services.Attachments.FetchAttachment(ctx, r.room, r.event, attachmentID)
}

// Emit emits the custom event name with payload (marshalled to JSON) to the
// hooks of the registry this hook runs in. It runs in observer mode and
// counts towards the recursion limit of the causal chain carried by ctx.
func (b *Base) Emit(ctx context.Context, name string, payload any) error {
	if b.em == nil {
		return fmt.Errorf("failed to emit %q: %w", name, ErrNoService)
	}
	ev, err := NewCustomEvent(name)
	if err != nil {
		return fmt.Errorf("failed to emit custom event: %w", err)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("failed to emit %q: failed to marshal payload: %w", name, err)
	}
	// The chain's depth comes from the emission this hook runs in, so a
	// hook that passes a fresh context cannot escape the recursion limit.
	if d := b.em.depth + 1; Depth(ctx) < d {
		ctx = WithDepth(ctx, d)
	}
	if events := b.em.reg.services.Events; events != nil {
		return events.EmitEvent(ctx, name, raw)
	}
	r := b.em.route
	c := &CustomEventContext{
		Payload:      raw,
		SourcePlugin: b.PluginName(),
		Agent:        r.agent,
		RoomID:       r.room,
		ThreadID:     r.thread,
		SenderID:     r.requester,
	}
	c.CorrelationID = b.em.correlationID
	return Emit(ctx, b.em.reg, ev, c)
}
