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
		// idle watchdog bounds silence instead.
		cfg.HTTPClient = &http.Client{}
	}
	return &openaiModel{spec: spec, client: openai.NewClientWithConfig(cfg)}, nil
}

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
	s := &openaiStream{}
	return s.start(ctx, m.spec, s, openaiError, func(sctx context.Context) (err error) {
		s.raw, err = m.client.CreateChatCompletionStream(sctx, m.request(req))
		return err
	})
}

// openaiStream reads go-openai's chunks and turns them into events. Text is
// passed on as it arrives; tool calls, usage and the finish reason are held
// back until the server ends the stream, because they are only complete
// then.
type openaiStream struct {
	streamCore[openai.ChatCompletionStreamResponse]
	raw *openai.ChatCompletionStream

	sawChoice bool
	finish    FinishReason
	usage     *Usage
	calls     []*ToolCall
}

func (s *openaiStream) next() (openai.ChatCompletionStreamResponse, bool, error) {
	chunk, err := s.raw.Recv()
	if errors.Is(err, io.EOF) {
		return chunk, false, nil
	}
	return chunk, err == nil, err
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
			s.queue(Event{Kind: EventText, Text: c.Delta.Content})
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

// reply is the held-back part of the reply; a reply without choices is
// not a chat completion.
func (s *openaiStream) reply() streamReply {
	r := streamReply{finished: s.finish != "", usage: s.usage, finish: s.finish}
	if !s.sawChoice {
		r.notAStream = "the server's reply had no choices"
	}
	for _, tc := range s.calls {
		if tc != nil {
			r.calls = append(r.calls, *tc)
		}
	}
	return r
}

func (s *openaiStream) closeRaw() error {
	if s.raw == nil { // the request failed
		return nil
	}
	return s.raw.Close()
}

// maxBodyInMessage bounds how much of an error body goes into a message.
const maxBodyInMessage = 300

// openaiError fills me for an error of go-openai or net/http of a request
// whose context is live.
func openaiError(me *ModelError, err error) {
	var (
		apiErr  *openai.APIError
		reqErr  *openai.RequestError
		synErr  *json.SyntaxError
		typeErr *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode > 0:
		httpError(me, apiErr.HTTPStatusCode, apiErr.Message)
	case errors.As(err, &apiErr):
		streamError(me, apiErr.Type == "server_error", apiErr.Message)
	case errors.As(err, &reqErr):
		body := string(reqErr.Body)
		if strings.TrimSpace(body) == "" {
			body = "(empty body)"
		}
		httpError(me, reqErr.HTTPStatusCode, body)
	case errors.As(err, &synErr), errors.As(err, &typeErr):
		invalidJSON(me, err)
	case errors.Is(err, openai.ErrTooManyEmptyStreamMessages):
		me.Kind = ErrorProtocol
		me.Message = "the server's reply is not a chat completion stream (too many lines without data)"
	case transportError(me, err):
	default:
		me.Kind = ErrorProtocol
		me.Message = "failed to send the request: " + err.Error()
	}
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
