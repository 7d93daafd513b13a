package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// MessagesRequest is the decoded body of an Anthropic Messages API request
// (POST /v1/messages), as sent.
type MessagesRequest struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	// System is the system prompt; a plain string arrives as one text
	// block.
	System      Blocks             `json:"system,omitempty"`
	Messages    []AnthropicMessage `json:"messages"`
	Tools       []AnthropicTool    `json:"tools,omitempty"`
	Stream      bool               `json:"stream"`
	Temperature *float64           `json:"temperature,omitempty"`
}

// AnthropicMessage is one message of a MessagesRequest.
type AnthropicMessage struct {
	Role string `json:"role"`
	// Content is the message's blocks; a plain string arrives as one text
	// block.
	Content Blocks `json:"content"`
}

// Blocks is a content array; it also accepts a plain string (one text
// block).
type Blocks []Block

// UnmarshalJSON accepts an array of blocks or a string.
func (b *Blocks) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*b = Blocks{{Type: "text", Text: s}}
		return nil
	}
	var blocks []Block
	if err := json.Unmarshal(data, &blocks); err != nil {
		return err
	}
	*b = blocks
	return nil
}

// Text joins the text of the text blocks.
func (b Blocks) Text() string {
	var sb strings.Builder
	for _, bl := range b {
		if bl.Type == "text" {
			sb.WriteString(bl.Text)
		}
	}
	return sb.String()
}

// Block is one content block: text, image, tool_use or tool_result.
type Block struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// ID, Name and Input are a tool_use block's.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError are a tool_result block's.
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   Blocks `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
	// Source is an image block's.
	Source *ImageSource `json:"source,omitempty"`
	// CacheControl is the block's cache breakpoint, if any.
	CacheControl *CacheControl `json:"cache_control,omitempty"`
}

// ImageSource is an image block's source.
type ImageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
}

// CacheControl is a prompt-cache breakpoint.
type CacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// AnthropicTool is a tool an anthropic request offers.
type AnthropicTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *CacheControl   `json:"cache_control,omitempty"`
}

// CacheBreakpoints lists where an anthropic request put cache_control
// markers, in request order: "tools[i]", "system[i]",
// "messages[i].content[j]".
func (r Request) CacheBreakpoints() []string {
	var out []string
	for i, t := range r.Anthropic.Tools {
		if t.CacheControl != nil {
			out = append(out, fmt.Sprintf("tools[%d]", i))
		}
	}
	for i, b := range r.Anthropic.System {
		if b.CacheControl != nil {
			out = append(out, fmt.Sprintf("system[%d]", i))
		}
	}
	for i, m := range r.Anthropic.Messages {
		for j, b := range m.Content {
			if b.CacheControl != nil {
				out = append(out, fmt.Sprintf("messages[%d].content[%d]", i, j))
			}
		}
	}
	return out
}

// decodeMessages decodes an anthropic request and translates it into the
// common form.
func decodeMessages(raw []byte) (MessagesRequest, ChatRequest, error) {
	var m MessagesRequest
	if err := json.Unmarshal(raw, &m); err != nil {
		return MessagesRequest{}, ChatRequest{}, err
	}
	c := ChatRequest{Model: m.Model, Stream: m.Stream, MaxTokens: m.MaxTokens, Temperature: m.Temperature}
	if err := json.Unmarshal(raw, &c.Fields); err != nil {
		return MessagesRequest{}, ChatRequest{}, err
	}
	if len(m.System) > 0 {
		c.Messages = append(c.Messages, Message{Role: "system", Content: Content(m.System.Text())})
	}
	for _, am := range m.Messages {
		var text strings.Builder
		var calls []WireCall
		flush := func() {
			if text.Len() > 0 || len(calls) > 0 {
				c.Messages = append(c.Messages, Message{Role: am.Role, Content: Content(text.String()), ToolCalls: calls})
			}
			text.Reset()
			calls = nil
		}
		for _, b := range am.Content {
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				calls = append(calls, WireCall{ID: b.ID, Type: "function", Function: FunctionCall{Name: b.Name, Arguments: string(b.Input)}})
			case "tool_result":
				flush()
				c.Messages = append(c.Messages, Message{Role: "tool", Content: Content(b.Content.Text()), ToolCallID: b.ToolUseID})
			}
		}
		flush()
	}
	for _, t := range m.Tools {
		c.Tools = append(c.Tools, Tool{Type: "function", Function: Function{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	return m, c, nil
}

// anthropicErrorBody is an Anthropic-style error object for status.
func anthropicErrorBody(status int, message string) string {
	t := "invalid_request_error"
	switch status {
	case http.StatusUnauthorized:
		t = "authentication_error"
	case http.StatusForbidden:
		t = "permission_error"
	case http.StatusNotFound:
		t = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		t = "request_too_large"
	case http.StatusTooManyRequests:
		t = "rate_limit_error"
	case 529:
		t = "overloaded_error"
	default:
		if status >= 500 {
			t = "api_error"
		}
	}
	return anthropicError(t, message)
}

func anthropicError(errType, message string) string {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": errType, "message": message}})
	return string(b)
}

// stopReason maps a scripted finish reason onto Anthropic's stop reasons;
// reasons of Anthropic's own pass through.
func stopReason(reply Reply) string {
	switch r := finishReason(reply); r {
	case "stop":
		return "end_turn"
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	case "content_filter":
		return "refusal"
	default:
		return r
	}
}

// anthropicUsage is a usage object of the Messages API: input_tokens
// excludes the tokens read from the cache.
func anthropicUsage(u Usage, output int) map[string]int {
	cached := 0
	if u.PromptTokensDetails != nil {
		cached = u.PromptTokensDetails.CachedTokens
	}
	return map[string]int{
		"input_tokens": u.PromptTokens - cached, "output_tokens": output,
		"cache_read_input_tokens": cached, "cache_creation_input_tokens": 0,
	}
}

func toolUseID(c Call, i int) string {
	if c.ID != "" {
		return c.ID
	}
	return fmt.Sprintf("toolu_llmtest_%d", i)
}

// streamMessage writes reply as a Messages API event stream.
func (s *Server) streamMessage(w http.ResponseWriter, r *http.Request, req *Request, reply Reply, id string) {
	e := s.openSSE(w, r, reply)
	defer e.finish()
	ev := func(name string, payload any) bool {
		b, _ := json.Marshal(payload)
		return e.line([]byte("event: " + name + "\ndata: " + string(b) + "\n\n"))
	}
	type obj = map[string]any
	u := usage(req, reply)
	start := obj{"id": id, "type": "message", "role": "assistant", "model": req.Body.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(u, 1)}
	if !ev("message_start", obj{"type": "message_start", "message": start}) {
		return
	}
	index := 0
	if len(reply.Text) > 0 && !reply.EmptyChoices {
		if !ev("content_block_start", obj{"type": "content_block_start", "index": index, "content_block": obj{"type": "text", "text": ""}}) ||
			!ev("ping", obj{"type": "ping"}) {
			return
		}
		for _, t := range reply.Text {
			if !ev("content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": obj{"type": "text_delta", "text": t}}) {
				return
			}
		}
		if !ev("content_block_stop", obj{"type": "content_block_stop", "index": index}) {
			return
		}
		index++
	}
	for i, c := range reply.Calls {
		if reply.EmptyChoices {
			break
		}
		if !ev("content_block_start", obj{"type": "content_block_start", "index": index,
			"content_block": obj{"type": "tool_use", "id": toolUseID(c, i), "name": c.Name, "input": obj{}}}) {
			return
		}
		for _, piece := range Split(c.Arguments, max(c.Pieces, 1)) {
			if piece == "" {
				continue
			}
			if !ev("content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": obj{"type": "input_json_delta", "partial_json": piece}}) {
				return
			}
		}
		if !ev("content_block_stop", obj{"type": "content_block_stop", "index": index}) {
			return
		}
		index++
	}
	if len(reply.Garbage) > 0 {
		for _, g := range reply.Garbage {
			if !e.line([]byte(g + "\n")) {
				return
			}
		}
		return
	}
	if se := reply.StreamError; se != nil {
		e.line([]byte("event: error\ndata: " + anthropicError(se.Type, se.Message) + "\n\n"))
		return
	}
	if reply.Truncate {
		b, _ := json.Marshal(obj{"type": "message_delta", "delta": obj{"stop_reason": stopReason(reply)}})
		e.line(append([]byte("event: message_delta\ndata: "), b[:len(b)/2]...))
		return
	}
	if !ev("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stopReason(reply), "stop_sequence": nil},
		"usage": obj{"output_tokens": u.CompletionTokens}}) {
		return
	}
	ev("message_stop", obj{"type": "message_stop"})
}

// completeMessage writes reply as one Messages API message (a request
// without "stream").
func (s *Server) completeMessage(w http.ResponseWriter, req *Request, reply Reply, id string) {
	if len(reply.Garbage) > 0 {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(strings.Join(reply.Garbage, "\n")))
		return
	}
	type obj = map[string]any
	content := []any{}
	if text := strings.Join(reply.Text, ""); text != "" && !reply.EmptyChoices {
		content = append(content, obj{"type": "text", "text": text})
	}
	for i, c := range reply.Calls {
		if reply.EmptyChoices {
			break
		}
		input := json.RawMessage(c.Arguments)
		if !json.Valid(input) {
			input = json.RawMessage(`{}`)
		}
		content = append(content, obj{"type": "tool_use", "id": toolUseID(c, i), "name": c.Name, "input": input})
	}
	u := usage(req, reply)
	b, _ := json.Marshal(obj{"id": id, "type": "message", "role": "assistant", "model": req.Body.Model, "content": content,
		"stop_reason": stopReason(reply), "stop_sequence": nil, "usage": anthropicUsage(u, u.CompletionTokens)})
	if reply.Truncate {
		b = b[:len(b)/2]
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
