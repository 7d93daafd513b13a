package agents

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The wire format of Anthropic's Messages API (POST /v1/messages), as much
// of it as hookroom speaks: the request body, the streamed events, the
// error bodies, and the server-sent-events framing they come in.
//
// The request types' fields are in the order the official SDK wrote them,
// so that the bodies are byte-identical to the ones sent before hookroom
// spoke the API itself (prompt caching does not depend on it, but a byte
// diff of two turns stays easy to read).

// anthropicVersion is the API version every request asks for (the
// anthropic-version header).
const anthropicVersion = "2023-06-01"

// Stop reasons of the Messages API that do not mean "the model finished"
// (see anthropicFinish).
const (
	stopMaxTokens                  = "max_tokens"
	stopModelContextWindowExceeded = "model_context_window_exceeded"
	stopToolUse                    = "tool_use"
	stopRefusal                    = "refusal"
)

// messagesRequest is the body of POST /v1/messages.
type messagesRequest struct {
	MaxTokens int `json:"max_tokens"`
	// Messages alternate user and assistant; a request with none leaves
	// the field out (as the SDK did).
	Messages []anthropicMessage `json:"messages,omitempty"`
	Model    string             `json:"model"`
	// System is the system prompt as text blocks.
	System []anthropicBlock `json:"system,omitempty"`
	Tools  []anthropicTool  `json:"tools,omitempty"`
	// Temperature is sent when the request sets one, zero included.
	Temperature *float64 `json:"temperature,omitempty"`
	Stream      bool     `json:"stream"`
}

// anthropicMessage is one message of a messagesRequest.
type anthropicMessage struct {
	Content []anthropicBlock `json:"content"`
	Role    Role             `json:"role"`
}

// anthropicBlock is one content block of a request: text (Text,
// CacheControl), image (Source), tool_use (ID, Input, Name) or
// tool_result (ToolUseID, CacheControl, Content). The fields a block's
// type does not use are empty and left out.
type anthropicBlock struct {
	ID        string `json:"id,omitempty"`
	ToolUseID string `json:"tool_use_id,omitempty"`
	// Input is a tool_use block's input, a JSON object (never empty on a
	// tool_use block).
	Input        json.RawMessage       `json:"input,omitempty"`
	Name         string                `json:"name,omitempty"`
	Source       *anthropicImageSource `json:"source,omitempty"`
	Text         string                `json:"text,omitempty"`
	CacheControl *anthropicCache       `json:"cache_control,omitempty"`
	// Content is a tool_result block's text blocks.
	Content []anthropicBlock `json:"content,omitempty"`
	Type    string           `json:"type"`
}

// anthropicImageSource is an image block's base64 source.
type anthropicImageSource struct {
	Data      string `json:"data"`
	MediaType string `json:"media_type"`
	Type      string `json:"type"`
}

// anthropicCache is a prompt-cache breakpoint (cache_control).
type anthropicCache struct {
	Type string `json:"type"`
}

// ephemeralCache is the breakpoint hookroom sets: the default five-minute
// cache.
var ephemeralCache = &anthropicCache{Type: "ephemeral"}

// anthropicTool is a tool a request offers.
type anthropicTool struct {
	InputSchema json.RawMessage `json:"input_schema"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
}

// anthropicEvent is the data of one streamed event: message_start,
// content_block_start, content_block_delta, content_block_stop,
// message_delta or message_stop (Type). The fields of all of them are
// here; an event fills those of its type.
type anthropicEvent struct {
	Type  string `json:"type"`
	Index int64  `json:"index"`
	// Message is message_start's message; only its usage matters.
	Message struct {
		Usage anthropicUsage `json:"usage"`
	} `json:"message"`
	// ContentBlock is content_block_start's block: text (Text) or
	// tool_use (ID, Name and Input, normally {} with the input following
	// as input_json_delta).
	ContentBlock struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	// Delta is content_block_delta's (Type text_delta with Text,
	// input_json_delta with PartialJSON) or message_delta's (StopReason).
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	// Usage is message_delta's cumulative counts.
	Usage anthropicUsage `json:"usage"`
}

// anthropicUsage is a usage object: input_tokens excludes the tokens read
// from or written to the prompt cache.
type anthropicUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
}

// anthropicErrorBody is the body of an error response and the data of an
// error event: {"type":"error","error":{"type":"overloaded_error",
// "message":"Overloaded"}}.
type anthropicErrorBody struct {
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// maxErrorBody bounds how much of an error response is read: the message
// shown is clipped far shorter (clip), the rest is there for the JSON to
// parse.
const maxErrorBody = 1 << 20

// anthropicHTTPError is a request the server refused with a non-2xx
// status. Its text names the status and what the server said, never the
// request URL or headers.
type anthropicHTTPError struct {
	StatusCode int
	// Type is the body's error.type, if it had one.
	Type string
	// Message is the body's error.message, else the whole body, else
	// "(empty body)".
	Message string
}

func (e *anthropicHTTPError) Error() string {
	return statusText(e.StatusCode) + ": " + e.Message
}

// readHTTPError reads the error response res (status >= 400) into an
// *anthropicHTTPError; the caller closes the body. It returns the read
// error instead when the body broke off.
func readHTTPError(res *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	if err != nil {
		return fmt.Errorf("failed to read the error response (%s): %w", statusText(res.StatusCode), err)
	}
	e := &anthropicHTTPError{StatusCode: res.StatusCode, Message: string(body)}
	var eb anthropicErrorBody
	if json.Unmarshal(body, &eb) == nil {
		e.Type = eb.Error.Type
		if eb.Error.Message != "" {
			e.Message = eb.Error.Message
		}
	}
	if strings.TrimSpace(e.Message) == "" {
		e.Message = "(empty body)"
	}
	return e
}

// anthropicEventError is an error event in a stream that had started
// (HTTP 200).
type anthropicEventError struct {
	// Type is the error's type ("overloaded_error", …), "" when the data
	// was not an error object.
	Type string
	// Message is the error's message, else the event's data.
	Message string
}

func (e *anthropicEventError) Error() string {
	if e.Type == "" {
		return "error event: " + e.Message
	}
	return "error event: " + e.Type + ": " + e.Message
}

// parseEventError turns the data of an error event into an
// *anthropicEventError.
func parseEventError(data []byte) *anthropicEventError {
	e := &anthropicEventError{Message: string(data)}
	var eb anthropicErrorBody
	if json.Unmarshal(data, &eb) == nil {
		e.Type = eb.Error.Type
		if eb.Error.Message != "" {
			e.Message = eb.Error.Message
		}
	}
	return e
}

// maxSSELine bounds one line of the event stream (a whole event's data
// normally fits on one line); a longer line fails the stream. It is the
// bound the SDK had.
const maxSSELine = 32 << 20

// sseEvent is one event of a text/event-stream: its event: name ("" when
// it had none) and its data: lines joined with "\n".
type sseEvent struct {
	name string
	data []byte
}

// sseReader reads server-sent events, as the HTML standard describes
// them: lines end in LF, CRLF or CR; "event:" names the event, "data:"
// lines add to its data, a line starting with ":" is a comment, other
// fields (id, retry) are ignored; a blank line ends the event. An event
// the stream ends in the middle of (no blank line after it) is dropped.
type sseReader struct {
	scn  *bufio.Scanner
	data bytes.Buffer
}

func newSSEReader(r io.Reader) *sseReader {
	scn := bufio.NewScanner(r)
	scn.Buffer(nil, maxSSELine)
	scn.Split(scanSSELines)
	return &sseReader{scn: scn}
}

// next returns the next event. At the end of the stream it reports
// more=false, with err nil when the stream ended cleanly. The event's data
// is valid until the next call.
func (r *sseReader) next() (ev sseEvent, more bool, err error) {
	var name string
	named := false
	r.data.Reset()
	for r.scn.Scan() {
		line := r.scn.Bytes()
		if len(line) == 0 {
			if !named && r.data.Len() == 0 {
				continue // blank lines between events
			}
			data := r.data.Bytes()
			// The last data line's "\n" is not part of the data.
			return sseEvent{name: name, data: bytes.TrimSuffix(data, []byte("\n"))}, true, nil
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "": // a comment
		case "event":
			name, named = string(value), true
		case "data":
			r.data.Write(value)
			r.data.WriteByte('\n')
		}
	}
	return sseEvent{}, false, r.scn.Err()
}

// scanSSELines is a bufio.SplitFunc for lines that end in LF, CRLF or a
// lone CR; the line returned has no line ending. A last line without an
// ending is returned as well.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		// A CR: the line ends here; an LF right after it belongs to it.
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // wait for the byte after the CR
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}
