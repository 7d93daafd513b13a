package agents

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
)

// anthropicModel is the native Anthropic provider (the Messages API), built
// on the official anthropic-sdk-go: the SDK speaks the wire format (request
// encoding, SSE framing); this file maps our types onto it, gathers the
// streamed tool_use input, marks the stable prompt prefix for prompt
// caching and turns every failure into a *ModelError.
type anthropicModel struct {
	spec ModelSpec
	// messages is the SDK's Messages API service alone, made without
	// anthropic.NewClient: no environment defaults, no other API.
	messages anthropic.MessageService
}

var _ Model = (*anthropicModel)(nil)

// maxCacheBreakpoints is how many cache_control markers the Messages API
// accepts in one request.
const maxCacheBreakpoints = 4

func newAnthropic(spec ModelSpec) (*anthropicModel, error) {
	if spec.Model == "" {
		return nil, errors.New("failed to create anthropic model: no model name")
	}
	u, err := url.Parse(spec.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL itself is not repeated: its path or query may hold a token.
		return nil, fmt.Errorf("failed to create anthropic model %q: its base url is not an http(s) URL", spec.Model)
	}
	hc := spec.HTTPClient
	if hc == nil {
		// No client-wide timeout: a long reply may stream for minutes. The
		// idle watchdog bounds silence instead.
		hc = &http.Client{}
	}
	// Only what config.yaml says: a service made without anthropic.NewClient
	// reads no ANTHROPIC_* environment variable and no credential file.
	opts := []option.RequestOption{
		option.WithBaseURL(anthropicRoot(spec.BaseURL)),
		option.WithHTTPClient(hc),
		// A failure is reported once, as a *ModelError that says whether
		// it is retryable: retrying is hookroom's decision, as for the
		// OpenAI-compatible provider, never the SDK's behind its back.
		option.WithMaxRetries(0),
	}
	if spec.APIKey != "" {
		opts = append(opts, option.WithAPIKey(spec.APIKey))
	}
	return &anthropicModel{spec: spec, messages: anthropic.NewMessageService(opts...)}, nil
}

// anthropicRoot is the base URL the SDK wants: the API root, to which it
// appends "v1/messages". A configured URL that already ends in /v1 (as
// OpenAI-style URLs do) is accepted too.
func anthropicRoot(base string) string {
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/v1")
	return base + "/"
}

// request maps req onto the Messages API. The result is deterministic: the
// same req always gives the same JSON, so that the provider's prompt cache
// sees identical prefixes.
func (m *anthropicModel) request(req *Request) (anthropic.MessageNewParams, []option.RequestOption) {
	out := anthropic.MessageNewParams{Model: m.spec.Model, MaxTokens: int64(m.maxTokens(req))}
	marks := cacheMarks(req.Messages)
	for i := range req.Messages {
		msg := &req.Messages[i]
		var blocks []anthropic.TextBlockParam
		if msg.Role == RoleSystem {
			// The Messages API has one system prompt, before the
			// conversation: every system message becomes a part of it, in
			// order (a compaction summary is one, at the head of the
			// history).
			blocks = splitText(msg.Content, msg.StablePrefix, marks[i])
			out.System = append(out.System, blocks...)
			continue
		}
		role, content := m.blocks(msg, marks[i])
		if len(content) == 0 {
			continue
		}
		// Consecutive messages of one role become one message: the API
		// wants user and assistant to alternate, and all the results of one
		// round of tool calls in the user message after it.
		if n := len(out.Messages); n > 0 && messageRole(out.Messages[n-1]) == role {
			last := &out.Messages[n-1]
			if role == RoleAssistant {
				last.OfAssistant.Content = append(last.OfAssistant.Content, content...)
			} else {
				last.OfUser.Content = append(last.OfUser.Content, content...)
			}
			continue
		}
		if role == RoleAssistant {
			out.Messages = append(out.Messages, anthropic.NewAssistantMessage(content...))
		} else {
			out.Messages = append(out.Messages, anthropic.NewUserMessage(content...))
		}
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = emptySchema
		}
		tool := &anthropic.ToolParam{
			Name:        t.Name,
			InputSchema: param.Override[anthropic.ToolInputSchemaParam](schema),
		}
		if t.Description != "" {
			tool.Description = anthropic.String(t.Description)
		}
		out.Tools = append(out.Tools, anthropic.ToolUnionParam{OfTool: tool})
	}
	var opts []option.RequestOption
	if req.Temperature != nil {
		opts = append(opts, option.WithJSONSet("temperature", float64(*req.Temperature)))
	}
	return out, opts
}

// maxTokens is the request's bound, else the model's; the Messages API
// requires one.
func (m *anthropicModel) maxTokens(req *Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	if m.spec.MaxTokens > 0 {
		return m.spec.MaxTokens
	}
	return DefaultAnthropicMaxTokens
}

func messageRole(p anthropic.MessageParam) Role {
	if p.OfAssistant != nil {
		return RoleAssistant
	}
	return RoleUser
}

// cacheMarks says which messages get a cache breakpoint: those with a
// StablePrefix, the last maxCacheBreakpoints of them (a later breakpoint
// covers everything before it, so the last ones are worth the most).
func cacheMarks(msgs []Message) []bool {
	marks := make([]bool, len(msgs))
	n := 0
	for i := len(msgs) - 1; i >= 0 && n < maxCacheBreakpoints; i-- {
		if msgs[i].StablePrefix > 0 && msgs[i].Content != "" {
			marks[i] = true
			n++
		}
	}
	return marks
}

// splitText turns text into text blocks: when mark is set, the first
// stable bytes become a block of their own that carries the cache
// breakpoint, and the rest (if any) a second block. Joined, the blocks are
// the text unchanged. Empty text gives no block (the API refuses empty
// text blocks).
func splitText(text string, stable int, mark bool) []anthropic.TextBlockParam {
	if text == "" {
		return nil
	}
	if !mark {
		return []anthropic.TextBlockParam{{Text: text}}
	}
	stable = min(stable, len(text))
	if !utf8.RuneStart(text[min(stable, len(text)-1)]) {
		stable = len(text) // not a character boundary: mark the whole text
	}
	head := anthropic.TextBlockParam{Text: text[:stable], CacheControl: anthropic.NewCacheControlEphemeralParam()}
	if stable == len(text) {
		return []anthropic.TextBlockParam{head}
	}
	return []anthropic.TextBlockParam{head, {Text: text[stable:]}}
}

// blocks maps one non-system message to the role it is sent as and its
// content blocks.
func (m *anthropicModel) blocks(msg *Message, mark bool) (Role, []anthropic.ContentBlockParamUnion) {
	var out []anthropic.ContentBlockParamUnion
	switch msg.Role {
	case RoleTool:
		res := &anthropic.ToolResultBlockParam{ToolUseID: msg.ToolCallID}
		if msg.Content != "" {
			res.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: msg.Content}}}
		}
		if mark {
			res.CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
		return RoleUser, []anthropic.ContentBlockParamUnion{{OfToolResult: res}}
	case RoleAssistant:
		for _, b := range splitText(msg.Content, msg.StablePrefix, mark) {
			out = append(out, anthropic.ContentBlockParamUnion{OfText: &b})
		}
		for _, tc := range msg.ToolCalls {
			out = append(out, anthropic.ContentBlockParamUnion{OfToolUse: &anthropic.ToolUseBlockParam{
				ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments),
			}})
		}
		return RoleAssistant, out
	default:
		for _, b := range splitText(msg.Content, msg.StablePrefix, mark) {
			out = append(out, anthropic.ContentBlockParamUnion{OfText: &b})
		}
		for _, img := range msg.Images {
			out = append(out, anthropic.ContentBlockParamUnion{OfImage: &anthropic.ImageBlockParam{
				Source: anthropic.ImageBlockParamSourceUnion{OfBase64: &anthropic.Base64ImageSourceParam{
					Data: base64.StdEncoding.EncodeToString(img.Data), MediaType: anthropic.Base64ImageSourceMediaType(img.MimeType),
				}},
			}})
		}
		return RoleUser, out
	}
}

// toolInput is a tool call's arguments as the tool_use block's input: the
// model's JSON object verbatim, or {} when it was not a JSON object (the
// tool loop told the model so in the call's result).
func toolInput(args string) json.RawMessage {
	a := strings.TrimSpace(args)
	if !strings.HasPrefix(a, "{") || !json.Valid([]byte(a)) {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(a)
}

// Stream sends req as a streamed message.
func (m *anthropicModel) Stream(ctx context.Context, req *Request) (Stream, error) {
	params, opts := m.request(req)
	s := &anthropicStream{calls: map[int64]*ToolCall{}, startInput: map[int64]string{}}
	return s.start(ctx, m.spec, s, anthropicError, func(sctx context.Context) error {
		s.raw = m.messages.NewStreaming(sctx, params, opts...)
		return s.raw.Err()
	})
}

// anthropicStream reads the SDK's stream events and turns them into ours.
// Text is passed on as it arrives; tool calls, usage and the stop reason
// are held back until message_stop, because they are only complete then.
type anthropicStream struct {
	streamCore[anthropic.MessageStreamEventUnion]
	raw *ssestream.Stream[anthropic.MessageStreamEventUnion]

	started    bool
	stopped    bool
	stop       anthropic.StopReason
	usage      Usage
	calls      map[int64]*ToolCall
	startInput map[int64]string
	callOrder  []int64
}

func (s *anthropicStream) next() (anthropic.MessageStreamEventUnion, bool, error) {
	if s.raw.Next() {
		return s.raw.Current(), true, nil
	}
	return anthropic.MessageStreamEventUnion{}, false, s.raw.Err()
}

func (s *anthropicStream) absorb(ev *anthropic.MessageStreamEventUnion) {
	switch ev.Type {
	case "message_start":
		s.started = true
		u := ev.Message.Usage
		s.setUsage(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	case "content_block_start":
		switch cb := &ev.ContentBlock; cb.Type {
		case "text":
			if cb.Text != "" {
				s.queue(Event{Kind: EventText, Text: cb.Text})
			}
		case "tool_use":
			if _, dup := s.calls[ev.Index]; !dup {
				s.callOrder = append(s.callOrder, ev.Index)
			}
			s.calls[ev.Index] = &ToolCall{ID: cb.ID, Name: cb.Name}
			// The API starts the block with "input": {} and streams the
			// input as input_json_delta; a proxy may send it whole here.
			if raw := strings.TrimSpace(cb.JSON.Input.Raw()); raw != "" && raw != "{}" && raw != "null" {
				s.startInput[ev.Index] = raw
			}
		}
	case "content_block_delta":
		switch ev.Delta.Type {
		case "text_delta":
			if ev.Delta.Text != "" {
				s.queue(Event{Kind: EventText, Text: ev.Delta.Text})
			}
		case "input_json_delta":
			if tc := s.calls[ev.Index]; tc != nil {
				tc.Arguments += ev.Delta.PartialJSON
			}
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			s.stop = ev.Delta.StopReason
		}
		// The counts in message_delta are cumulative; input counts are
		// only there on newer API versions.
		u := ev.Usage
		s.setUsage(u.InputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens, u.OutputTokens)
	case "message_stop":
		s.stopped = true
	}
}

// setUsage merges token counts; zero counts leave the known ones alone.
// The Messages API counts cache reads and writes apart from input_tokens;
// our PromptTokens is all three.
func (s *anthropicStream) setUsage(input, cacheRead, cacheWrite, output int64) {
	if input > 0 || cacheRead > 0 || cacheWrite > 0 {
		s.usage.PromptTokens = int(input + cacheRead + cacheWrite)
		s.usage.CachedTokens = int(cacheRead)
	}
	if output > 0 {
		s.usage.CompletionTokens = int(output)
	}
	s.usage.TotalTokens = s.usage.PromptTokens + s.usage.CompletionTokens
}

// anthropicFinish maps a stop reason onto ours.
func anthropicFinish(r anthropic.StopReason) FinishReason {
	switch r {
	case anthropic.StopReasonMaxTokens, anthropic.StopReasonModelContextWindowExceeded:
		return FinishLength
	case anthropic.StopReasonToolUse:
		return FinishToolCalls
	case anthropic.StopReasonRefusal:
		return FinishContentFilter
	}
	// end_turn, stop_sequence, pause_turn (a server tool paused: the text
	// so far is the answer) and reasons unknown to us.
	return FinishStop
}

// reply is the held-back part of the reply; a stream without
// message_start is not a message stream, one without message_stop was cut
// off.
func (s *anthropicStream) reply() streamReply {
	r := streamReply{finished: s.stopped, finish: anthropicFinish(s.stop)}
	if !s.started {
		r.notAStream = "the server's reply is not a message stream (no message_start)"
	}
	for _, idx := range s.callOrder {
		c := *s.calls[idx]
		if strings.TrimSpace(c.Arguments) == "" {
			c.Arguments = s.startInput[idx]
		}
		r.calls = append(r.calls, c)
	}
	if !s.usage.IsZero() {
		u := s.usage
		r.usage = &u
	}
	return r
}

func (s *anthropicStream) closeRaw() error { return s.raw.Close() }

// retryableAnthropicError says which error types of an error event in a
// stream are worth repeating the request for.
func retryableAnthropicError(t anthropic.ErrorType) bool {
	switch t {
	case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
		return true
	}
	return false
}

// anthropicError fills me for an error of the SDK or net/http of a request
// whose context is live.
func anthropicError(me *ModelError, err error) {
	var (
		apiErr *anthropic.Error
		synErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode >= 400:
		msg := cmp.Or(apiErr.Message, apiErr.RawJSON(), "(empty body)")
		httpError(me, apiErr.StatusCode, msg)
		if apiErr.StatusCode == 529 { // overloaded
			me.Retryable = true
		}
	case errors.As(err, &apiErr):
		// An error event inside a stream that had started (HTTP 200).
		msg := cmp.Or(apiErr.Message, apiErr.RawJSON())
		if t := apiErr.Type(); t != "" {
			msg = string(t) + ": " + msg
		}
		streamError(me, retryableAnthropicError(apiErr.Type()), msg)
	case strings.HasPrefix(err.Error(), "received error while streaming"):
		streamError(me, false, strings.TrimPrefix(err.Error(), "received error while streaming: "))
	case errors.As(err, &synErr):
		invalidJSON(me, err)
	case transportError(me, err):
	default:
		me.Kind = ErrorProtocol
		me.Message = "failed to read the reply: " + clip(err.Error())
	}
}
