package agents

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Role is who a message is from.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of a conversation, as the model sees it. History
// stores messages byte-exact, so a replayed conversation produces the same
// request body.
type Message struct {
	Role Role `json:"role"`
	// Content is the text. It may be empty on an assistant message that
	// only calls tools.
	Content string `json:"content,omitempty"`
	// Name optionally names the author of a user message (sent to the model
	// as "name"). The tool loop never sets it.
	Name string `json:"name,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID ties a tool message (the result) to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Images go with a user message to a model that accepts images, after
	// Content (OpenAI-compatible providers send them as image_url content
	// parts with data: URLs). They belong to one request only: History
	// does not store them and the message's JSON form leaves them out, so
	// a stored turn keeps only its text (which names its images).
	Images []Image `json:"-"`
	// StablePrefix, when positive, says that the first StablePrefix bytes
	// of Content are the same on every turn of the conversation (the
	// agent's own system prompt and its stable enrichment). Providers with
	// explicit prompt caching (anthropic) put a cache breakpoint at its end;
	// the text sent is unchanged. Like Images it is not stored.
	StablePrefix int `json:"-"`
}

// Image is an image sent to the model with a message.
type Image struct {
	// MimeType is the image's type: image/png, image/jpeg, image/gif or
	// image/webp (what OpenAI-compatible vision models accept).
	MimeType string
	Data     []byte
}

// DataURL returns the image as a data: URL (base64).
func (img Image) DataURL() string {
	return "data:" + img.MimeType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}

// ToolCall is one tool call the model asked for.
type ToolCall struct {
	// ID is the model's id of the call; the tool result refers to it. A
	// provider fills in "call_<n>" when the server sent none.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is the JSON text the model produced, verbatim (it is replayed
	// byte-exact). It may be invalid JSON: the tool loop then answers the
	// model with an error instead of calling the tool. Empty arguments from
	// the server are normalised to "{}".
	Arguments string `json:"arguments"`
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	// Name is what the model calls the tool by: 1 to 64 characters of
	// [a-zA-Z0-9_-].
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the arguments object. Empty means no
	// arguments ({"type":"object","properties":{}}).
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Request is one chat completion request.
type Request struct {
	// Messages is the whole prompt: system prompt, history and the new turn.
	Messages []Message
	// Tools the model may call. Providers that cannot call tools ignore them.
	Tools []ToolSpec
	// MaxTokens bounds the reply's length; 0 leaves it to the server.
	MaxTokens int
	// Temperature, when set, overrides the server's default. The
	// OpenAI-compatible client omits a zero temperature.
	Temperature *float32
	// ResponseSchema, when set, asks for structured output: a reply that is
	// one JSON object matching the schema (OpenAI-compatible:
	// response_format json_schema). Servers that do not support it may
	// answer freely, so say what you want in the prompt too and validate
	// the reply.
	ResponseSchema *ResponseSchema
}

// ResponseSchema names and describes the JSON object a structured reply
// must be.
type ResponseSchema struct {
	// Name identifies the schema (^[a-zA-Z0-9_-]+$).
	Name string
	// Schema is a JSON Schema object.
	Schema json.RawMessage
	// Strict asks the server to enforce the schema exactly (every property
	// required, additionalProperties false).
	Strict bool
}

// FinishReason says why the model stopped.
type FinishReason string

const (
	FinishStop          FinishReason = "stop"
	FinishLength        FinishReason = "length"
	FinishToolCalls     FinishReason = "tool_calls"
	FinishContentFilter FinishReason = "content_filter"
)

// Usage counts the tokens of one or more model calls, as the server reported
// them (zero when it reported nothing).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens is the part of PromptTokens the provider served from its
	// prompt cache, where it reports it (OpenAI-compatible:
	// usage.prompt_tokens_details.cached_tokens); 0 otherwise.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.TotalTokens += o.TotalTokens
	u.CachedTokens += o.CachedTokens
}

// IsZero reports whether u counts no tokens at all.
func (u Usage) IsZero() bool { return u == Usage{} }

// EventKind says what a stream event carries.
type EventKind uint8

const (
	// EventText carries a piece of the reply's text in Text.
	EventText EventKind = iota + 1
	// EventToolCalls carries every complete tool call of the reply in
	// ToolCalls. It comes once, after the last EventText.
	EventToolCalls
	// EventUsage carries the token counts in Usage, when the server sent
	// them.
	EventUsage
	// EventFinish carries FinishReason. It is the last event.
	EventFinish
)

var eventKindNames = [...]string{EventText: "text", EventToolCalls: "tool_calls", EventUsage: "usage", EventFinish: "finish"}

func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", k)
}

// Event is one step of a streamed reply.
type Event struct {
	Kind         EventKind
	Text         string
	ToolCalls    []ToolCall
	Usage        Usage
	FinishReason FinishReason
}

// Stream is a reply in progress. Recv returns the events in order: text
// deltas, then at most one EventToolCalls, at most one EventUsage and one
// EventFinish; after that it returns io.EOF. Failures are *ModelError
// values. Close releases the connection; it may be called at any time, more
// than once, and must be called.
type Stream interface {
	Recv() (Event, error)
	Close() error
}

// Model is a chat model that streams its replies and may call tools.
// Implementations are safe for concurrent use.
type Model interface {
	// Stream sends req and returns the reply as a stream. Failures before
	// the first event (connection, HTTP status) are returned here as
	// *ModelError; the stream ends when ctx does.
	Stream(ctx context.Context, req *Request) (Stream, error)
}

// Completion is a whole reply, gathered from a stream.
type Completion struct {
	Text         string
	ToolCalls    []ToolCall
	FinishReason FinishReason
	Usage        Usage
}

// Complete streams req from m and gathers the reply, passing every text
// delta to onText (which may be nil) as it arrives, on the calling
// goroutine.
func Complete(ctx context.Context, m Model, req *Request, onText func(delta string)) (*Completion, error) {
	s, err := m.Stream(ctx, req)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var (
		c    Completion
		text strings.Builder
	)
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			c.Text = text.String()
			return &c, err
		}
		switch ev.Kind {
		case EventText:
			text.WriteString(ev.Text)
			if onText != nil {
				onText(ev.Text)
			}
		case EventToolCalls:
			c.ToolCalls = append(c.ToolCalls, ev.ToolCalls...)
		case EventUsage:
			c.Usage.Add(ev.Usage)
		case EventFinish:
			c.FinishReason = ev.FinishReason
		}
	}
	c.Text = text.String()
	return &c, nil
}
