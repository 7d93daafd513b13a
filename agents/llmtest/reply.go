package llmtest

import (
	"net/http"
	"time"
)

// Reply is one scripted answer of the server. The zero value answers an
// empty text with finish reason "stop". Build replies with Text, Calls,
// HTTPError or Garbage and adjust them with the With… methods.
type Reply struct {
	// Text is sent as content deltas, one chunk per element, in order
	// (non-streaming requests get them joined).
	Text []string
	// Calls are tool calls, sent after the text: each call's first chunk
	// carries its index, id and name, the arguments follow in Pieces
	// chunks.
	Calls []Call
	// Finish is the finish reason (default "tool_calls" when there are
	// calls, else "stop").
	Finish string
	// Usage is reported in the usage chunk (sent when the request asks for
	// it with stream_options.include_usage) and in non-streaming replies.
	// Nil reports an estimate from the request and reply sizes.
	Usage *Usage

	// Status, when 400 or more, answers with this HTTP status and Body
	// instead of a completion.
	Status int
	// Body is the error body, verbatim (default: an error object in the
	// request's format carrying ErrMessage, or the status text).
	Body string
	// ErrMessage is the message of the default error body.
	ErrMessage string
	// Header is added to the response (e.g. Retry-After).
	Header http.Header

	// Delay waits before the response headers are sent.
	Delay time.Duration
	// Hold, when not nil, keeps the request waiting before its response
	// headers (after Delay) until the channel is closed or the client gives
	// up: a model call that the test releases when it is ready.
	Hold <-chan struct{}
	// ChunkDelay waits between chunks; the opening chunk (the role) and the
	// first delta after it go out at once.
	ChunkDelay time.Duration

	// Garbage lines are written verbatim into the stream after the text
	// (each followed by "\n"); then the stream ends without [DONE].
	// Non-streaming requests get them as the whole body.
	Garbage []string
	// StreamError, when set, ends the stream after the text and calls with
	// an error: an "error" event (anthropic) or a data line holding an
	// error object (openai).
	StreamError *StreamError
	// Truncate ends the stream after the text and calls with half a chunk
	// and no finish reason and no [DONE]; non-streaming requests get half
	// the JSON body.
	Truncate bool
	// EmptyChoices sends chunks (or a completion) whose "choices" array is
	// empty.
	EmptyChoices bool
}

// StreamError is an error the server reports inside a stream.
type StreamError struct {
	// Type is the error type, e.g. "overloaded_error" (anthropic) or
	// "server_error" (openai).
	Type    string
	Message string
}

// Call is a scripted tool call.
type Call struct {
	ID        string
	Name      string
	Arguments string
	// Pieces is how many chunks the arguments are split into (default 1).
	Pieces int
}

// Usage is what the server reports as token usage.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails, when set, reports the cached part of the prompt
	// as OpenAI does.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks the prompt tokens down.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Text returns a reply streaming chunks as content deltas.
func Text(chunks ...string) Reply { return Reply{Text: chunks} }

// Calls returns a reply with tool calls (and no text).
func Calls(calls ...Call) Reply { return Reply{Calls: calls} }

// ToolCall returns a call whose arguments come in one chunk.
func ToolCall(id, name, arguments string) Call {
	return Call{ID: id, Name: name, Arguments: arguments, Pieces: 1}
}

// HTTPError returns a reply with HTTP status and an error object carrying
// message, in the request's format (OpenAI's or Anthropic's).
func HTTPError(status int, message string) Reply {
	return Reply{Status: status, ErrMessage: message}
}

// WithStreamError returns r ending its stream, after its text and calls,
// with an error of type errType.
func (r Reply) WithStreamError(errType, message string) Reply {
	r.StreamError = &StreamError{Type: errType, Message: message}
	return r
}

// Garbage returns a reply whose stream holds lines that are not a valid
// chat completion stream.
func Garbage(lines ...string) Reply { return Reply{Garbage: lines} }

// Split cuts s into n pieces of nearly equal length, never inside a UTF-8
// character; joined they give s back.
func Split(s string, n int) []string {
	r := []rune(s)
	if n <= 1 || len(r) <= 1 {
		return []string{s}
	}
	n = min(n, len(r))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

// WithText returns r with text chunks (before its calls).
func (r Reply) WithText(chunks ...string) Reply { r.Text = chunks; return r }

// WithUsage returns r reporting this usage.
func (r Reply) WithUsage(prompt, completion int) Reply {
	r.Usage = &Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	return r
}

// WithCachedUsage returns r reporting this usage, cached of the prompt
// tokens served from the provider's prompt cache
// (usage.prompt_tokens_details.cached_tokens).
func (r Reply) WithCachedUsage(prompt, cached, completion int) Reply {
	r = r.WithUsage(prompt, completion)
	r.Usage.PromptTokensDetails = &PromptTokensDetails{CachedTokens: cached}
	return r
}

// WithGarbage returns r writing lines verbatim after its text and calls,
// instead of its end (see Reply.Garbage).
func (r Reply) WithGarbage(lines ...string) Reply { r.Garbage = lines; return r }

// WithDelay returns r waiting d before its response headers.
func (r Reply) WithDelay(d time.Duration) Reply { r.Delay = d; return r }

// WithHold returns r waiting until release is closed before it answers.
func (r Reply) WithHold(release <-chan struct{}) Reply { r.Hold = release; return r }

// WithChunkDelay returns r waiting d between chunks.
func (r Reply) WithChunkDelay(d time.Duration) Reply { r.ChunkDelay = d; return r }

// WithFinish returns r with finish reason reason.
func (r Reply) WithFinish(reason string) Reply { r.Finish = reason; return r }

// Truncated returns r cut off before its end.
func (r Reply) Truncated() Reply { r.Truncate = true; return r }

// WithPieces returns c with its arguments split into n chunks.
func (c Call) WithPieces(n int) Call { c.Pieces = n; return c }
