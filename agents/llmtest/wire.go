package llmtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	// Header holds the request headers (Authorization included: tests may
	// check that the key was sent).
	Header http.Header
	// Raw is the body exactly as received.
	Raw []byte
	// Body is Raw decoded (zero if it was not valid JSON; see DecodeErr).
	Body      ChatRequest
	DecodeErr error
	// Route is the index of the On route that answered (-1: the default
	// script or the fallback).
	Route int
	// Format is the wire format the request came in. Body is the common
	// form of both (an anthropic request is translated: system blocks
	// become system messages, tool_use blocks tool calls, tool_result
	// blocks tool messages), so that matchers and scripts work alike;
	// Anthropic holds an anthropic request as sent.
	Format    Format
	Anthropic MessagesRequest
}

// Format is a wire format the server speaks.
type Format string

const (
	// FormatOpenAI is OpenAI's chat completions API.
	FormatOpenAI Format = "openai"
	// FormatAnthropic is Anthropic's Messages API.
	FormatAnthropic Format = "anthropic"
)

// ChatRequest is the decoded body of a chat completion request.
type ChatRequest struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Tools               []Tool          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage `json:"tool_choice,omitempty"`
	Stream              bool            `json:"stream"`
	StreamOptions       *StreamOptions  `json:"stream_options,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	// Fields holds every top-level field as sent.
	Fields map[string]json.RawMessage `json:"-"`
}

// StreamOptions is the request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a request.
type Message struct {
	Role string `json:"role"`
	// Content is the text; an array of parts is joined from its text parts.
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []WireCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Content is a message's content: a string, null, or an array of parts.
type Content string

// UnmarshalJSON accepts a string, null, or an array of {"type":"text",
// "text":…} parts (joined).
func (c *Content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = ""
		return nil
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for _, p := range parts {
			sb.WriteString(p.Text)
		}
		*c = Content(sb.String())
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*c = Content(s)
	return nil
}

// WireCall is a tool call as it appears in a request's assistant message.
type WireCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function part of a tool call.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool the request offers the model.
type Tool struct {
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function describes an offered tool.
type Function struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// System returns the content of the request's system messages, joined by
// blank lines.
func (r Request) System() string {
	var parts []string
	for _, m := range r.Body.Messages {
		if m.Role == "system" {
			parts = append(parts, string(m.Content))
		}
	}
	return strings.Join(parts, "\n\n")
}

// LastUser returns the content of the last user message ("" if none).
func (r Request) LastUser() string {
	for i := len(r.Body.Messages) - 1; i >= 0; i-- {
		if r.Body.Messages[i].Role == "user" {
			return string(r.Body.Messages[i].Content)
		}
	}
	return ""
}

// Part is one part of a message whose content is an array of parts.
type Part struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// ImageURL is the url of an "image_url" part (a data: URL for inline
	// images).
	ImageURL string `json:"-"`
}

// Parts returns the content parts of message i as sent: nil when its
// content is a string (or i is out of range).
func (r Request) Parts(i int) []Part {
	msgs := r.MessageJSON()
	if i < 0 || i >= len(msgs) {
		return nil
	}
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(msgs[i], &m) != nil || len(m.Content) == 0 || m.Content[0] != '[' {
		return nil
	}
	var raw []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	if json.Unmarshal(m.Content, &raw) != nil {
		return nil
	}
	parts := make([]Part, len(raw))
	for j, p := range raw {
		parts[j] = Part{Type: p.Type, Text: p.Text, ImageURL: p.ImageURL.URL}
	}
	return parts
}

// LastUserParts returns the content parts of the last user message (see
// Parts).
func (r Request) LastUserParts() []Part {
	for i := len(r.Body.Messages) - 1; i >= 0; i-- {
		if r.Body.Messages[i].Role == "user" {
			return r.Parts(i)
		}
	}
	return nil
}

// HasTool reports whether the request offers a tool called name.
func (r Request) HasTool(name string) bool {
	for _, t := range r.Body.Tools {
		if t.Function.Name == name {
			return true
		}
	}
	return false
}

// MessagesJSON returns the "messages" array exactly as the client sent it,
// for byte-for-byte comparisons of prompts.
func (r Request) MessagesJSON() json.RawMessage { return r.Body.Fields["messages"] }

// MessageJSON returns the raw JSON of each message of the request, as sent.
func (r Request) MessageJSON() []json.RawMessage {
	var out []json.RawMessage
	_ = json.Unmarshal(r.Body.Fields["messages"], &out)
	return out
}

// Matcher picks requests for a route.
type Matcher func(*Request) bool

// HasTool matches requests that offer a tool called name.
func HasTool(name string) Matcher { return func(r *Request) bool { return r.HasTool(name) } }

// ModelIs matches requests for model name.
func ModelIs(name string) Matcher { return func(r *Request) bool { return r.Body.Model == name } }

// SystemContains matches requests whose system messages contain s.
func SystemContains(s string) Matcher {
	return func(r *Request) bool { return strings.Contains(r.System(), s) }
}

// LastUserContains matches requests whose last user message contains s.
func LastUserContains(s string) Matcher {
	return func(r *Request) bool { return strings.Contains(r.LastUser(), s) }
}

func decodeChat(raw []byte) (ChatRequest, error) {
	var c ChatRequest
	if err := json.Unmarshal(raw, &c); err != nil {
		return ChatRequest{}, err
	}
	if err := json.Unmarshal(raw, &c.Fields); err != nil {
		return ChatRequest{}, err
	}
	return c, nil
}

// Server-side wire types.

type chunk struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *Usage        `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int     `json:"index"`
	Delta        delta   `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

type delta struct {
	Role      string      `json:"role,omitempty"`
	Content   *string     `json:"content,omitempty"`
	ToolCalls []deltaCall `json:"tool_calls,omitempty"`
}

type deltaCall struct {
	Index    int           `json:"index"`
	ID       string        `json:"id,omitempty"`
	Type     string        `json:"type,omitempty"`
	Function deltaFunction `json:"function"`
}

type deltaFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   Usage              `json:"usage"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	FinishReason string            `json:"finish_reason"`
}

type completionMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []WireCall `json:"tool_calls,omitempty"`
}

type errorObject struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// errorBodyFor is the error body of status in format.
func errorBodyFor(format Format, status int, message string) string {
	if format == FormatAnthropic {
		return anthropicErrorBody(status, message)
	}
	return errorBody(status, message)
}

func errorBody(status int, message string) string {
	var e errorObject
	e.Error.Message = message
	switch {
	case status == http.StatusUnauthorized:
		e.Error.Type = "invalid_request_error"
		code := "invalid_api_key"
		e.Error.Code = &code
	case status == http.StatusTooManyRequests:
		e.Error.Type = "requests"
		code := "rate_limit_exceeded"
		e.Error.Code = &code
	case status >= 500:
		e.Error.Type = "server_error"
	default:
		e.Error.Type = "invalid_request_error"
	}
	b, _ := json.Marshal(e)
	return string(b)
}
