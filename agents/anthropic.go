package agents

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// anthropicModel is the native Anthropic provider (the Messages API),
// spoken by hand: one endpoint, POST /v1/messages, streamed (the wire
// types and the server-sent-events framing are in anthropic_wire.go).
// This file maps our types onto the request, gathers the streamed
// tool_use input, marks the stable prompt prefix for prompt caching and
// turns every failure into a *ModelError.
type anthropicModel struct {
	spec ModelSpec
	// endpoint is the URL of the Messages API (…/v1/messages); it may
	// hold a token in its path, so it never goes into an error.
	endpoint string
	hc       *http.Client
}

var _ Model = (*anthropicModel)(nil)

// maxCacheBreakpoints is how many cache_control markers the Messages API
// accepts in one request.
const maxCacheBreakpoints = 4

// newAnthropic builds the provider for spec; NewModel calls it.
func newAnthropic(spec ModelSpec) (*anthropicModel, error) {
	if spec.Model == "" {
		return nil, errors.New("failed to create anthropic model: no model name")
	}
	u, err := url.Parse(spec.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL itself is not repeated: its path or query may hold a token.
		return nil, fmt.Errorf("failed to create anthropic model %q: its base url is not an http(s) URL", spec.Model)
	}
	endpoint, err := anthropicEndpoint(spec.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("failed to create anthropic model %q: its base url is not an http(s) URL", spec.Model)
	}
	hc := spec.HTTPClient
	if hc == nil {
		// No client-wide timeout: a long reply may stream for minutes. The
		// idle watchdog bounds silence instead.
		hc = &http.Client{}
	}
	// Only what config.yaml says: no ANTHROPIC_* environment variable and
	// no credential file is read. A failure is reported once, as a
	// *ModelError that says whether it is retryable: retrying is
	// hookroom's decision (as for the OpenAI-compatible provider), so the
	// client never repeats a request itself.
	return &anthropicModel{spec: spec, endpoint: endpoint, hc: hc}, nil
}

// anthropicEndpoint is the Messages API's URL for the configured base URL:
// anthropicRoot's root with "v1/messages" resolved against it, the way the
// official SDK resolved its paths (a root whose path does not end in "/"
// gets one first).
func anthropicEndpoint(base string) (string, error) {
	root, err := url.Parse(anthropicRoot(base))
	if err != nil {
		return "", err
	}
	if root.Path != "" && !strings.HasSuffix(root.Path, "/") {
		root.Path += "/"
	}
	return root.ResolveReference(&url.URL{Path: "v1/messages"}).String(), nil
}

// anthropicRoot is the API root of a configured base URL, to which
// anthropicEndpoint appends "v1/messages". A configured URL that already
// ends in /v1 (as OpenAI-style URLs do) is accepted too.
func anthropicRoot(base string) string {
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/v1")
	return base + "/"
}

// request maps req onto the Messages API; Stream calls it once per
// request. The result is deterministic: the same req always gives the
// same JSON, so that the provider's prompt cache sees identical prefixes.
func (m *anthropicModel) request(req *Request) *messagesRequest {
	out := &messagesRequest{Model: m.spec.Model, MaxTokens: m.maxTokens(req), Stream: true}
	marks := cacheMarks(req.Messages)
	for i := range req.Messages {
		msg := &req.Messages[i]
		if msg.Role == RoleSystem {
			// The Messages API has one system prompt, before the
			// conversation: every system message becomes a part of it, in
			// order (a compaction summary is one, at the head of the
			// history).
			out.System = append(out.System, splitText(msg.Content, msg.StablePrefix, marks[i])...)
			continue
		}
		role, content := m.blocks(msg, marks[i])
		if len(content) == 0 {
			continue
		}
		// Consecutive messages of one role become one message: the API
		// wants user and assistant to alternate, and all the results of one
		// round of tool calls in the user message after it.
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == role {
			last := &out.Messages[n-1]
			last.Content = append(last.Content, content...)
			continue
		}
		out.Messages = append(out.Messages, anthropicMessage{Role: role, Content: content})
	}
	for _, t := range req.Tools {
		schema := t.Parameters
		if len(schema) == 0 {
			schema = emptySchema
		}
		out.Tools = append(out.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	if req.Temperature != nil {
		t := float64(*req.Temperature)
		out.Temperature = &t
	}
	return out
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
func splitText(text string, stable int, mark bool) []anthropicBlock {
	if text == "" {
		return nil
	}
	if !mark {
		return []anthropicBlock{{Type: "text", Text: text}}
	}
	stable = min(stable, len(text))
	if !utf8.RuneStart(text[min(stable, len(text)-1)]) {
		stable = len(text) // not a character boundary: mark the whole text
	}
	head := anthropicBlock{Type: "text", Text: text[:stable], CacheControl: ephemeralCache}
	if stable == len(text) {
		return []anthropicBlock{head}
	}
	return []anthropicBlock{head, {Type: "text", Text: text[stable:]}}
}

// blocks maps one non-system message to the role it is sent as and its
// content blocks.
func (m *anthropicModel) blocks(msg *Message, mark bool) (Role, []anthropicBlock) {
	switch msg.Role {
	case RoleTool:
		res := anthropicBlock{Type: "tool_result", ToolUseID: msg.ToolCallID}
		if msg.Content != "" {
			res.Content = []anthropicBlock{{Type: "text", Text: msg.Content}}
		}
		if mark {
			res.CacheControl = ephemeralCache
		}
		return RoleUser, []anthropicBlock{res}
	case RoleAssistant:
		out := splitText(msg.Content, msg.StablePrefix, mark)
		for _, tc := range msg.ToolCalls {
			out = append(out, anthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: toolInput(tc.Arguments)})
		}
		return RoleAssistant, out
	default:
		out := splitText(msg.Content, msg.StablePrefix, mark)
		for _, img := range msg.Images {
			out = append(out, anthropicBlock{Type: "image", Source: &anthropicImageSource{
				Type: "base64", MediaType: img.MimeType, Data: base64.StdEncoding.EncodeToString(img.Data),
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

// errEncodeRequest marks a request body that could not be encoded (a
// tool's parameters schema that is not valid JSON).
var errEncodeRequest = errors.New("failed to encode the request")

// Stream sends req as a streamed message.
func (m *anthropicModel) Stream(ctx context.Context, req *Request) (Stream, error) {
	s := &anthropicStream{calls: map[int64]*ToolCall{}, startInput: map[int64]string{}}
	return s.start(ctx, m.spec, s, anthropicError, func(sctx context.Context) error {
		body, err := json.Marshal(m.request(req))
		if err != nil {
			return fmt.Errorf("%w: %w", errEncodeRequest, err)
		}
		res, err := m.send(sctx, body)
		if err != nil {
			return err
		}
		s.body = res.Body
		s.events = newSSEReader(res.Body)
		return nil
	})
}

// send posts body to the Messages API with ctx, once, and returns the
// response of a request the server accepted; its body is the caller's to
// close. A response with an error status is read and closed here, and
// returned as an *anthropicHTTPError.
func (m *anthropicModel) send(ctx context.Context, body []byte) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.endpoint, bytes.NewReader(body))
	if err != nil {
		// Not err itself: it quotes the URL.
		return nil, errors.New("failed to build the request: the base url is not usable")
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Anthropic-Version", anthropicVersion)
	if m.spec.APIKey != "" {
		hreq.Header.Set("X-Api-Key", m.spec.APIKey)
	}
	res, err := m.hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 400 {
		defer res.Body.Close()
		return nil, readHTTPError(res)
	}
	return res, nil
}

// anthropicStream reads the server's stream events and turns them into
// ours. Text is passed on as it arrives; tool calls, usage and the stop
// reason are held back until message_stop, because they are only complete
// then.
type anthropicStream struct {
	streamCore[anthropicEvent]
	// body is the response body (nil until the server accepted the
	// request); events reads it.
	body   io.Closer
	events *sseReader

	started    bool
	stopped    bool
	stop       string
	usage      Usage
	calls      map[int64]*ToolCall
	startInput map[int64]string
	callOrder  []int64
}

// next returns the next message event: ping events and events without a
// name are skipped, an error event ends the stream with an
// *anthropicEventError, data that is not JSON with the decoding error.
func (s *anthropicStream) next() (anthropicEvent, bool, error) {
	for {
		raw, more, err := s.events.next()
		if !more {
			return anthropicEvent{}, false, err
		}
		switch raw.name {
		case "", "ping":
			continue
		case "error":
			return anthropicEvent{}, false, parseEventError(raw.data)
		}
		if len(raw.data) == 0 {
			continue
		}
		var ev anthropicEvent
		if err := json.Unmarshal(raw.data, &ev); err != nil {
			return anthropicEvent{}, false, err
		}
		return ev, true, nil
	}
}

// absorb takes in one event (see streamSource).
func (s *anthropicStream) absorb(ev *anthropicEvent) {
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
			if raw := strings.TrimSpace(string(cb.Input)); raw != "" && raw != "{}" && raw != "null" {
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
func anthropicFinish(r string) FinishReason {
	switch r {
	case stopMaxTokens, stopModelContextWindowExceeded:
		return FinishLength
	case stopToolUse:
		return FinishToolCalls
	case stopRefusal:
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

// closeRaw closes the response body, which ends a stream still being
// read (see streamSource).
func (s *anthropicStream) closeRaw() error {
	if s.body == nil { // the request failed
		return nil
	}
	return s.body.Close()
}

// retryableAnthropicError says which error types of an error event in a
// stream are worth repeating the request for.
func retryableAnthropicError(t string) bool {
	switch t {
	case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
		return true
	}
	return false
}

// anthropicError fills me for an error of a request whose context is
// live: an error status, an error event, a stream that is not JSON, a
// failed connection.
func anthropicError(me *ModelError, err error) {
	var (
		httpErr  *anthropicHTTPError
		eventErr *anthropicEventError
		synErr   *json.SyntaxError
		typeErr  *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, errEncodeRequest):
		me.Kind = ErrorProtocol
		me.Message = clip(err.Error())
	case errors.As(err, &httpErr):
		httpError(me, httpErr.StatusCode, httpErr.Message)
		if httpErr.StatusCode == 529 { // overloaded
			me.Retryable = true
		}
	case errors.As(err, &eventErr):
		// An error event inside a stream that had started (HTTP 200).
		msg := eventErr.Message
		if eventErr.Type != "" {
			msg = eventErr.Type + ": " + msg
		}
		streamError(me, retryableAnthropicError(eventErr.Type), msg)
	case errors.As(err, &synErr), errors.As(err, &typeErr):
		invalidJSON(me, err)
	case transportError(me, err):
	default:
		me.Kind = ErrorProtocol
		me.Message = "failed to read the reply: " + clip(err.Error())
	}
}
