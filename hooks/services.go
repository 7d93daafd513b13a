package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"maunium.net/go/mautrix/id"
)

// ErrNoService is returned by a context helper when the host has not bound
// the service it needs (for example in a unit test without a homeserver).
var ErrNoService = errors.New("host service not available")

// ErrNotFound is returned by room-state helpers when the state event does
// not exist, and by Attachment for an id that is not an attachment of the
// hook's message.
var ErrNotFound = errors.New("not found")

// ErrTooLarge is returned by Attachment when the file is larger than the
// host lets hooks fetch (attachments.max_size in config.yaml).
var ErrTooLarge = errors.New("too large")

// Services are the host capabilities hooks reach through their context
// helpers. The bot implements them over its Matrix accounts; tests may leave
// any of them nil, in which case the helper returns ErrNoService.
type Services struct {
	Sender   MessageSender
	State    RoomState
	Admin    MatrixAdmin
	Messages AgentMessages
	// Attachments fetches the files of the message a hook handles.
	Attachments Attachments
	// Events, when set, receives the custom events hooks emit with
	// Base.Emit instead of the hook's own registry: a process plugin's SDK
	// forwards them to the host, whose registry holds every plugin's hooks.
	Events EventEmitter
}

// EventEmitter delivers a custom event a hook emitted (see Services.Events).
// ctx carries the causal-chain depth of the emitting hook.
type EventEmitter interface {
	EmitEvent(ctx context.Context, name string, payload json.RawMessage) error
}

// HookMessage is a message a hook asks the host to send.
type HookMessage struct {
	RoomID   id.RoomID
	ThreadID id.EventID // "" posts at room level
	Text     string     // Markdown
	// Extra is merged into the event content.
	Extra map[string]any
	// TriggerDispatch asks the host to treat the message as addressed, so it
	// re-enters the pipeline and may be answered by an agent.
	TriggerDispatch bool

	// Set by the engine, not by hooks:

	Plugin         string    // the sending plugin
	Event          string    // the event whose hook sent it
	Agent          AgentName // the agent of the emitting context, "" for none
	OriginalSender id.UserID // the human the causal chain started with, if known
	Depth          int       // synthetic-chain depth of the new message (>= 1)
}

// MessageSender sends hook-originated messages. The host marks them with
// their origin (plugin, event, depth) so that the pipeline can tell them from
// human messages and stop feedback loops; a human cannot spoof that origin.
type MessageSender interface {
	SendHookMessage(ctx context.Context, msg HookMessage) (id.EventID, error)
}

// RoomState reads and writes Matrix room state on the hook's behalf.
type RoomState interface {
	// RoomStateEvent returns the content of one state event, or ErrNotFound.
	RoomStateEvent(ctx context.Context, room id.RoomID, eventType, stateKey string) (json.RawMessage, error)
	// RoomStateEvents returns every state event of a type, by state key.
	RoomStateEvents(ctx context.Context, room id.RoomID, eventType string) (map[string]json.RawMessage, error)
	// PutRoomState writes one state event.
	PutRoomState(ctx context.Context, room id.RoomID, eventType, stateKey string, content any) (id.EventID, error)
}

// CreateRoomRequest describes a room a hook asks the admin facade to create.
type CreateRoomRequest struct {
	Name           string
	AliasLocalpart string
	Topic          string
	Invite         []id.UserID
	PowerUsers     []id.UserID
}

// MatrixAdmin is the narrow administrative facade hooks may use, backed by
// the router account. It is deliberately not the raw Matrix client.
type MatrixAdmin interface {
	ResolveAlias(ctx context.Context, alias id.RoomAlias) (id.RoomID, error)
	CreateRoom(ctx context.Context, req CreateRoomRequest) (id.RoomID, error)
	InviteUser(ctx context.Context, room id.RoomID, user id.UserID) error
	RoomMembers(ctx context.Context, room id.RoomID) ([]id.UserID, error)
	AddRoomToSpace(ctx context.Context, space, room id.RoomID) error
}

// AgentMessage is a message an agent posted, as the host remembers it.
type AgentMessage struct {
	EventID   id.EventID      `json:"event_id"`
	Sender    id.UserID       `json:"sender"`
	Body      string          `json:"body"`
	Content   json.RawMessage `json:"content,omitempty"`
	Timestamp time.Time       `json:"timestamp"`
}

// AgentMessages finds the latest message an agent account posted in a room
// (threadID "") or a thread, since the current run of the server started.
type AgentMessages interface {
	LatestAgentMessage(ctx context.Context, room id.RoomID, sender id.UserID, thread id.EventID) (*AgentMessage, error)
}

// Attachment is a file attached to the message a turn answers, as a hook
// fetches it.
type Attachment struct {
	// ID is the attachment's id as it appears in Envelope.AttachmentIDs:
	// the mxc:// URI of the file.
	ID string `json:"id"`
	// Kind is the Matrix message type without its "m." prefix: "image",
	// "file", "audio" or "video".
	Kind string `json:"kind"`
	// Name is the file name the sender gave.
	Name string `json:"name"`
	// MimeType is the type the sender declared ("" when none).
	MimeType string `json:"mimetype,omitempty"`
	// Size is len(Data).
	Size int64 `json:"size"`
	// Data is the file's content, decrypted when it came from an encrypted
	// room. It may be large (up to attachments.max_size); never log it.
	Data []byte `json:"-"`
}

// Attachments fetches the files of inbound messages for hooks. The engine
// asks only for ids of the message the hook's event is about (see
// Base.Attachment); the host still checks that the message is in room.
type Attachments interface {
	// FetchAttachment returns attachment attachmentID of message
	// sourceEvent in room, with its content: ErrNotFound when the host
	// knows no such attachment there, ErrTooLarge when the file is larger
	// than the host's limit.
	FetchAttachment(ctx context.Context, room id.RoomID, sourceEvent id.EventID, attachmentID string) (*Attachment, error)
}
