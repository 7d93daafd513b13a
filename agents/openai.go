package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"
)

// openaiModel is the OpenAI-compatible provider, built on go-openai: the
// library speaks the wire format (request encoding, SSE framing); this file
// maps our types onto it, accumulates tool-call deltas and turns every
// failure into a *ModelError.
type openaiModel struct {
	spec   ModelSpec
	client *openai.Client
}

var _ Model = (*openaiModel)(nil)

func newOpenAI(spec ModelSpec) (*openaiModel, error) {
	if spec.Model == "" {
		return nil, errors.New("failed to create openai model: no model name")
	}
	u, err := url.Parse(spec.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Not the URL itself: it may hold a token.
		return nil, fmt.Errorf("failed to create openai model %q: its base url is not an http(s) URL", spec.Model)
	}
	cfg := openai.DefaultConfig(spec.APIKey)
	cfg.BaseURL = strings.TrimRight(spec.BaseURL, "/")
	if spec.HTTPClient != nil {
		cfg.HTTPClient = spec.HTTPClient
	} else {
		// No client-wide timeout: a long reply may stream for minutes. The
		// idle watchdog below bounds silence instead.
		cfg.HTTPClient = &http.Client{}
	}
	return &openaiModel{spec: spec, client: openai.NewClientWithConfig(cfg)}, nil
}

// errIdleTimeout is the cancel cause when the server stayed silent for the
// request timeout. It wraps context.DeadlineExceeded so that callers can
// treat every timeout alike.
var errIdleTimeout = fmt.Errorf("model server stayed silent: %w", context.DeadlineExceeded)

// reasoningModel reports whether go-openai insists on max_completion_tokens
// for model.
func reasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

// emptySchema is the parameters schema of a tool without arguments.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func (m *openaiModel) request(req *Request) openai.ChatCompletionRequest {
	out := openai.ChatCompletionRequest{
		Model:         m.spec.Model,
		Messages:      make([]openai.ChatCompletionMessage, len(req.Messages)),
		Stream:        true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
	for i, msg := range req.Messages {
		om := openai.ChatCompletionMessage{
			Role:       string(msg.Role),
			Content:    msg.Content,
			Name:       msg.Name,
			ToolCallID: msg.ToolCallID,
		}
		if len(msg.Images) > 0 {
			// Content becomes an array of parts: the text, then the images.
			om.Content = ""
			if msg.Content != "" {
				om.MultiContent = append(om.MultiContent, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: msg.Content})
			}
			for _, img := range msg.Images {
				om.MultiContent = append(om.MultiContent, openai.ChatMessagePart{
					Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: img.DataURL()},
				})
			}
		}
		if len(msg.ToolCalls) > 0 {
			om.ToolCalls = make([]openai.ToolCall, len(msg.ToolCalls))
			for j, tc := range msg.ToolCalls {
				om.ToolCalls[j] = openai.ToolCall{
					ID:       tc.ID,
					Type:     openai.ToolTypeFunction,
					Function: openai.FunctionCall{Name: tc.Name, Arguments: tc.Arguments},
				}
			}
		}
		out.Messages[i] = om
	}
	if len(req.Tools) > 0 {
		out.Tools = make([]openai.Tool, len(req.Tools))
		for i, t := range req.Tools {
			params := t.Parameters
			if len(params) == 0 {
				params = emptySchema
			}
			out.Tools[i] = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
				Name: t.Name, Description: t.Description, Parameters: params,
			}}
		}
	}
	if n := cmp.Or(req.MaxTokens, m.spec.MaxTokens); n > 0 {
		if reasoningModel(m.spec.Model) {
			out.MaxCompletionTokens = n
		} else {
			out.MaxTokens = n
		}
	}
	if req.Temperature != nil {
		out.Temperature = *req.Temperature
	}
	if rs := req.ResponseSchema; rs != nil {
		out.ResponseFormat = &openai.ChatCompletionResponseFormat{
			Type:       openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: rs.Name, Schema: rs.Schema, Strict: rs.Strict},
		}
	}
	return out
}

// Stream sends req as a streamed chat completion.
func (m *openaiModel) Stream(ctx context.Context, req *Request) (Stream, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	timeout := m.spec.RequestTimeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	watchdog := time.AfterFunc(timeout, func() { cancel(errIdleTimeout) })
	raw, err := m.client.CreateChatCompletionStream(sctx, m.request(req))
	watchdog.Stop()
	if err != nil {
		me := m.classify(sctx, ctx, err)
		cancel(nil)
		return nil, me
	}
	return &openaiStream{m: m, parent: ctx, ctx: sctx, cancel: cancel, watchdog: watchdog, timeout: timeout, raw: raw}, nil
}

// openaiStream reads go-openai's chunks and turns them into events. Text is
// passed on as it arrives; tool calls, usage and the finish reason are held
// back until the server ends the stream, because they are only complete
// then.
type openaiStream struct {
	m        *openaiModel
	parent   context.Context
	ctx      context.Context
	cancel   context.CancelCauseFunc
	watchdog *time.Timer
	timeout  time.Duration
	raw      *openai.ChatCompletionStream

	pending []Event
	err     error
	ended   bool

	sawChoice bool
	finish    FinishReason
	usage     *Usage
	calls     []*ToolCall
	closeOnce sync.Once
}

func (s *openaiStream) Recv() (Event, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return Event{}, s.err
		}
		if s.ended {
			return Event{}, io.EOF
		}
		// The watchdog runs only while we wait for the server, not while
		// the caller handles an event.
		s.watchdog.Reset(s.timeout)
		chunk, err := s.raw.Recv()
		s.watchdog.Stop()
		if errors.Is(err, io.EOF) && s.ctx.Err() == nil {
			s.end()
			continue
		} else if err != nil {
			s.err = s.m.classify(s.ctx, s.parent, err)
			s.Close()
			continue
		}
		s.absorb(&chunk)
	}
	ev := s.pending[0]
	s.pending = s.pending[1:]
	return ev, nil
}

func (s *openaiStream) absorb(chunk *openai.ChatCompletionStreamResponse) {
	if chunk.Usage != nil {
		s.usage = &Usage{
			PromptTokens:     chunk.Usage.PromptTokens,
			CompletionTokens: chunk.Usage.CompletionTokens,
			TotalTokens:      chunk.Usage.TotalTokens,
		}
		if d := chunk.Usage.PromptTokensDetails; d != nil {
			s.usage.CachedTokens = d.CachedTokens
		}
	}
	for i := range chunk.Choices {
		c := &chunk.Choices[i]
		if c.Index != 0 {
			continue // we ask for one choice
		}
		s.sawChoice = true
		if c.Delta.Content != "" {
			s.pending = append(s.pending, Event{Kind: EventText, Text: c.Delta.Content})
		}
		for _, d := range c.Delta.ToolCalls {
			s.addToolDelta(d)
		}
		if c.FinishReason != "" {
			s.finish = FinishReason(c.FinishReason)
		}
	}
}

// addToolDelta merges one tool-call fragment into the call it belongs to:
// by index when the server sends one, else by id (a new id starts a new
// call), else into the last call.
func (s *openaiStream) addToolDelta(d openai.ToolCall) {
	var tc *ToolCall
	switch {
	case d.Index != nil && *d.Index >= 0 && *d.Index < 1024:
		for len(s.calls) <= *d.Index {
			s.calls = append(s.calls, nil)
		}
		if s.calls[*d.Index] == nil {
			s.calls[*d.Index] = &ToolCall{}
		}
		tc = s.calls[*d.Index]
	case len(s.calls) == 0 || (d.ID != "" && s.calls[len(s.calls)-1] != nil && s.calls[len(s.calls)-1].ID != "" && s.calls[len(s.calls)-1].ID != d.ID):
		tc = &ToolCall{}
		s.calls = append(s.calls, tc)
	default:
		tc = s.calls[len(s.calls)-1]
		if tc == nil {
			tc = &ToolCall{}
			s.calls[len(s.calls)-1] = tc
		}
	}
	if tc.ID == "" {
		tc.ID = d.ID
	}
	// The name normally comes whole in the first fragment; some servers
	// repeat it on every fragment.
	if d.Function.Name != "" && d.Function.Name != tc.Name {
		tc.Name += d.Function.Name
	}
	tc.Arguments += d.Function.Arguments
}

// end runs when the server closed the stream: it checks that the reply was
// complete and queues the held-back events.
func (s *openaiStream) end() {
	s.ended = true
	s.Close()
	switch {
	case !s.sawChoice:
		s.err = &ModelError{Model: s.m.spec.Model, Kind: ErrorProtocol, Message: "the server's reply had no choices"}
		return
	case s.finish == "":
		s.err = &ModelError{Model: s.m.spec.Model, Kind: ErrorProtocol, Retryable: true, Err: io.ErrUnexpectedEOF,
			Message: "the stream ended before the model finished its reply (truncated)"}
		return
	}
	var calls []ToolCall
	for _, tc := range s.calls {
		if tc == nil {
			continue
		}
		c := *tc
		if c.ID == "" {
			c.ID = fmt.Sprintf("call_%d", len(calls))
		}
		if strings.TrimSpace(c.Arguments) == "" {
			c.Arguments = "{}"
		}
		calls = append(calls, c)
	}
	if len(calls) > 0 {
		s.pending = append(s.pending, Event{Kind: EventToolCalls, ToolCalls: calls})
	}
	if s.usage != nil {
		s.pending = append(s.pending, Event{Kind: EventUsage, Usage: *s.usage})
	}
	s.pending = append(s.pending, Event{Kind: EventFinish, FinishReason: s.finish})
}

func (s *openaiStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.watchdog.Stop()
		err = s.raw.Close()
		s.cancel(nil)
	})
	return err
}

// maxBodyInMessage bounds how much of an error body goes into a message.
const maxBodyInMessage = 300

// classify turns an error of go-openai or net/http into a *ModelError.
// sctx is the request's own context (cancelled by the watchdog), parent the
// caller's.
func (m *openaiModel) classify(sctx, parent context.Context, err error) *ModelError {
	me := m.classifyRaw(sctx, parent, err)
	me.Message = scrubCredentials(me.Message, m.spec.APIKey)
	return me
}

// classifyRaw is classify before the message is scrubbed of credentials.
func (m *openaiModel) classifyRaw(sctx, parent context.Context, err error) *ModelError {
	if me := stoppedError(m.spec, sctx, parent); me != nil {
		return me
	}
	me := &ModelError{Model: m.spec.Model, Err: err}
	var (
		apiErr  *openai.APIError
		reqErr  *openai.RequestError
		synErr  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode > 0:
		me.Kind, me.StatusCode, me.Retryable = ErrorHTTP, apiErr.HTTPStatusCode, retryableStatus(apiErr.HTTPStatusCode)
		me.Message = fmt.Sprintf("the server answered %s: %s", statusText(apiErr.HTTPStatusCode), clip(apiErr.Message))
	case errors.As(err, &apiErr):
		me.Kind, me.Retryable = ErrorServer, apiErr.Type == "server_error"
		me.Message = "the server reported an error in the stream: " + clip(apiErr.Message)
	case errors.As(err, &reqErr):
		me.Kind, me.StatusCode, me.Retryable = ErrorHTTP, reqErr.HTTPStatusCode, retryableStatus(reqErr.HTTPStatusCode)
		body := clip(string(reqErr.Body))
		if body == "" {
			body = "(empty body)"
		}
		me.Message = fmt.Sprintf("the server answered %s: %s", statusText(reqErr.HTTPStatusCode), body)
	case errors.As(err, &synErr), errors.As(err, &typeErr):
		me.Kind = ErrorProtocol
		me.Message = "the server sent invalid JSON in the stream: " + err.Error()
	case errors.Is(err, openai.ErrTooManyEmptyStreamMessages):
		me.Kind = ErrorProtocol
		me.Message = "the server's reply is not a chat completion stream (too many lines without data)"
	case transportError(me, err):
	default:
		me.Kind = ErrorProtocol
		me.Message = "failed to send the request: " + err.Error()
	}
	return me
}

// urlOrigin returns the scheme and host of raw, without the path, query
// and user info that may carry credentials.
func urlOrigin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(its base URL)"
	}
	return u.Scheme + "://" + u.Host
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("HTTP %d %s", code, t)
	}
	return fmt.Sprintf("HTTP %d", code)
}

// clip shortens s for an error message, on a rune boundary.
func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxBodyInMessage {
		return s
	}
	cut := maxBodyInMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
