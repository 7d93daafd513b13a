package protocol

import (
	"encoding/json"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
)

// APIVersion is the protocol version this package speaks. The host sends it
// in initialize; a plugin answering with another version is not started.
const APIVersion = 1

// Methods the host calls on the plugin.
const (
	// MethodInitialize is the first request: InitializeParams →
	// InitializeResult.
	MethodInitialize = "initialize"
	// MethodHookInvoke runs one declared hook: HookInvokeParams →
	// HookInvokeResult.
	MethodHookInvoke = "hook.invoke"
	// MethodToolCall runs one declared tool: ToolCallParams →
	// ToolCallResult.
	MethodToolCall = "tool.call"
	// MethodShutdown asks the plugin to finish and exit: no params → {}.
	// The host closes the plugin's stdin right after the answer.
	MethodShutdown = "shutdown"
	// MethodPing is the liveness probe (either direction): no params → {}.
	MethodPing = "$/ping"
	// MethodCancel (notification, either direction) gives up on a request:
	// CancelParams.
	MethodCancel = jsonrpc.MethodCancel
)

// Methods the plugin calls on the host. Every one except host.log and
// host.state_dir needs the invocation id of a hook or tool call in flight.
const (
	MethodSendMessage  = "host.send_message"   // SendMessageParams → SendMessageResult
	MethodRoomStateGet = "host.room_state.get" // RoomStateGetParams → RoomStateGetResult
	MethodRoomStatePut = "host.room_state.put" // RoomStatePutParams → RoomStatePutResult
	MethodEmit         = "host.emit"           // EmitParams → {}
	MethodLog          = "host.log"            // LogParams (notification, or request → {})
	MethodStateDir     = "host.state_dir"      // {} → StateDirResult
	// MethodAttachmentGet reads a file of the hook's message:
	// AttachmentGetParams → AttachmentGetResult.
	MethodAttachmentGet = "host.attachment.get"
)

// Error codes of the protocol, besides JSON-RPC's own (jsonrpc.Code*).
const (
	// CodeHookFailed: the hook or tool ran and failed (the plugin's error
	// message is in the error's message).
	CodeHookFailed = -32000
	// CodeUnknownInvocation: a host method named an invocation that is not
	// in flight (it finished, timed out, or never existed).
	CodeUnknownInvocation = -32001
	// CodeNoService: the host has no such service bound (no Matrix
	// connection in a test, or a tool call without an emitter).
	CodeNoService = -32002
	// CodeNotFound: the room state event does not exist.
	CodeNotFound = -32003
	// CodeUnknownHook: hook.invoke or tool.call named something the plugin
	// did not declare.
	CodeUnknownHook = -32004
	// CodeRecursionLimit: host.emit was refused because the causal chain
	// is already at the maximum depth.
	CodeRecursionLimit = -32005
	// CodeHookPanicked: the hook panicked or raised an unexpected
	// exception.
	CodeHookPanicked = -32006
	// CodeDeadline: the hook or a host call ran past its deadline.
	CodeDeadline = -32007
	// CodeTooLarge: host.attachment.get named a file larger than the host
	// lets hooks fetch (attachments.max_size).
	CodeTooLarge = -32008
	// CodeAPIVersion: initialize asked for an api_version the plugin does
	// not speak.
	CodeAPIVersion = -32010
	// CodeRequestCancelled answers a request cancelled with $/cancel.
	CodeRequestCancelled = jsonrpc.CodeRequestCancelled
)

// InitializeParams are sent by the host in initialize.
type InitializeParams struct {
	APIVersion int `json:"api_version"`
	// Plugin is the plugin's name in hookroom's configuration.
	Plugin string `json:"plugin"`
	// Settings are the plugin's settings from config.yaml ({} when none).
	Settings json.RawMessage `json:"settings"`
	// StateDir is the plugin's state directory (also its working directory).
	StateDir string `json:"state_dir"`
}

// InitializeResult is the plugin's declaration.
type InitializeResult struct {
	APIVersion int        `json:"api_version"`
	Name       string     `json:"name"`
	Version    string     `json:"version,omitempty"`
	Hooks      []HookDecl `json:"hooks"`
	Tools      []ToolDecl `json:"tools,omitempty"`
}

// HookDecl declares one hook.
type HookDecl struct {
	// Event is a built-in event name or a custom event ("todo:done").
	Event string `json:"event"`
	// Name is unique within the plugin; config overrides refer to it.
	Name string `json:"name"`
	// Priority orders hooks (lower first); absent means 100.
	Priority *int `json:"priority,omitempty"`
	// TimeoutMS overrides the event's default deadline; 0 keeps it.
	TimeoutMS int `json:"timeout_ms,omitempty"`
	// Agents and Rooms restrict the hook to contexts of these agents /
	// room ids.
	Agents []string `json:"agents,omitempty"`
	Rooms  []string `json:"rooms,omitempty"`
	// FailurePolicy is "open" (default) or "closed" (gate events only).
	FailurePolicy string `json:"failure_policy,omitempty"`
}

// ToolDecl declares one tool the plugin offers to agents.
type ToolDecl struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Parameters is the JSON Schema of the tool's arguments object.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// HookInvokeParams ask the plugin to run one hook.
type HookInvokeParams struct {
	// Invocation identifies this run in host method calls it makes.
	Invocation uint64 `json:"invocation"`
	Hook       string `json:"hook"`
	Event      string `json:"event"`
	// Context is the event's context as hookroom's hooks package marshals it.
	Context json.RawMessage `json:"context"`
	// DeadlineMS is how many milliseconds the hook has left; the host
	// gives up (and sends $/cancel) when they pass.
	DeadlineMS int64 `json:"deadline_ms"`
}

// HookInvokeResult carries the hook's changes: an object with the event's
// designated mutable fields (see Apply); other fields are ignored, and
// absent fields keep their values. {} or null means no change.
type HookInvokeResult struct {
	Context json.RawMessage `json:"context,omitempty"`
}

// ToolCallParams ask the plugin to run one tool: hooks.ToolCall, the
// call as the tool hooks see it, with the turn's correlation id, the
// invocation and the deadline. The host builds them with NewToolCallParams
// and the plugin reads the call back with Call; the fields are listed here
// again only for the wire format (agent is omitted when empty, unlike in
// the hooks' contexts).
type ToolCallParams struct {
	Invocation uint64 `json:"invocation"`
	Tool       string `json:"tool"`
	// Arguments is the JSON object the model passed.
	Arguments   json.RawMessage `json:"arguments"`
	Agent       string          `json:"agent,omitempty"`
	RoomID      id.RoomID       `json:"room_id,omitempty"`
	ThreadID    id.EventID      `json:"thread_id,omitempty"`
	RequesterID id.UserID       `json:"requester_id,omitempty"`
	SessionID   string          `json:"session_id,omitempty"`
	// CorrelationID is the turn's correlation id, the one its hook runs
	// carry (for logs).
	CorrelationID string `json:"correlation_id,omitempty"`
	DeadlineMS    int64  `json:"deadline_ms"`
}

// NewToolCallParams returns the tool.call params of call (its Tool names
// the tool to run).
func NewToolCallParams(invocation uint64, call hooks.ToolCall, correlationID string, deadlineMS int64) ToolCallParams {
	return ToolCallParams{
		Invocation: invocation, Tool: call.Tool, Arguments: call.Arguments, Agent: string(call.Agent),
		RoomID: call.RoomID, ThreadID: call.ThreadID, RequesterID: call.RequesterID, SessionID: call.SessionID,
		CorrelationID: correlationID, DeadlineMS: deadlineMS,
	}
}

// Call returns the call p carries, as the tool hooks see it: the inverse
// of NewToolCallParams (the correlation id is p.CorrelationID).
func (p *ToolCallParams) Call() hooks.ToolCall {
	return hooks.ToolCall{
		Tool: p.Tool, Arguments: p.Arguments, Agent: hooks.AgentName(p.Agent), RoomID: p.RoomID,
		ThreadID: p.ThreadID, RequesterID: p.RequesterID, SessionID: p.SessionID,
	}
}

// ToolCallResult is the tool's output, as the model will read it.
type ToolCallResult struct {
	Content string `json:"content"`
}

// CancelParams name the request being given up.
type CancelParams struct {
	ID json.RawMessage `json:"id"`
}

// SendMessageParams ask the host to send a message on behalf of a hook.
type SendMessageParams struct {
	Invocation uint64    `json:"invocation"`
	RoomID     id.RoomID `json:"room_id"`
	Text       string    `json:"text"`
	// ThreadID posts into a thread; absent or "" posts at room level.
	ThreadID        id.EventID     `json:"thread_id,omitempty"`
	Extra           map[string]any `json:"extra,omitempty"`
	TriggerDispatch bool           `json:"trigger_dispatch,omitempty"`
}

// SendMessageResult is the sent message's event id.
type SendMessageResult struct {
	EventID id.EventID `json:"event_id"`
}

// RoomStateGetParams read room state. With StateKey (even "") one event's
// content is returned; without it, every event of EventType by state key.
type RoomStateGetParams struct {
	Invocation uint64    `json:"invocation"`
	RoomID     id.RoomID `json:"room_id"`
	EventType  string    `json:"event_type"`
	StateKey   *string   `json:"state_key,omitempty"`
}

// RoomStateGetResult holds Content (single event) or Events (by state key).
type RoomStateGetResult struct {
	Content json.RawMessage            `json:"content,omitempty"`
	Events  map[string]json.RawMessage `json:"events,omitempty"`
}

// RoomStatePutParams write one state event.
type RoomStatePutParams struct {
	Invocation uint64          `json:"invocation"`
	RoomID     id.RoomID       `json:"room_id"`
	EventType  string          `json:"event_type"`
	StateKey   string          `json:"state_key"`
	Content    json.RawMessage `json:"content"`
}

// RoomStatePutResult is the state event's id.
type RoomStatePutResult struct {
	EventID id.EventID `json:"event_id"`
}

// EmitParams emit a custom event on behalf of a hook or tool.
type EmitParams struct {
	Invocation uint64          `json:"invocation"`
	Event      string          `json:"event"`
	Payload    json.RawMessage `json:"payload,omitempty"`
}

// LogParams are one log record of the plugin. Invocation (optional) ties it
// to a hook or tool run, so the host logs it with the hook's name and the
// turn's correlation id.
type LogParams struct {
	Invocation uint64 `json:"invocation,omitempty"`
	// Level is "debug", "info", "warn" or "error" (unknown: info).
	Level   string         `json:"level"`
	Message string         `json:"message"`
	Fields  map[string]any `json:"fields,omitempty"`
}

// StateDirResult is the plugin's state directory.
type StateDirResult struct {
	Path string `json:"path"`
}

// MaxAttachmentChunk is the most bytes of a file one host.attachment.get
// answer carries (base64 makes it about 5.3 MiB of JSON, well inside the
// line limit). Larger files are read in several calls.
const MaxAttachmentChunk = 4 << 20

// AttachmentGetParams read part of a file of the message the invocation's
// hook handles, by one of its envelope's attachment_ids.
type AttachmentGetParams struct {
	Invocation   uint64 `json:"invocation"`
	AttachmentID string `json:"attachment_id"`
	// Offset is the first byte to return (default 0; at most the size).
	Offset int64 `json:"offset,omitempty"`
	// Length is the most bytes to return: absent, 0 or more than
	// MaxAttachmentChunk mean MaxAttachmentChunk.
	Length int64 `json:"length,omitempty"`
}

// AttachmentGetResult is the file's description and the requested bytes.
type AttachmentGetResult struct {
	AttachmentID string `json:"attachment_id"`
	// Kind is "image", "file", "audio" or "video".
	Kind     string `json:"kind"`
	Name     string `json:"name"`
	MimeType string `json:"mimetype,omitempty"`
	// Size is the size of the whole file.
	Size   int64 `json:"size"`
	Offset int64 `json:"offset"`
	// Data holds the bytes from Offset on (base64 in JSON).
	Data []byte `json:"data"`
	// EOF is true when Data reaches the end of the file.
	EOF bool `json:"eof"`
}
