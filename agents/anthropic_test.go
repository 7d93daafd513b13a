package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
)

func TestAnthropicStreams(t *testing.T) {
	testStreams(t, agents.ProviderAnthropic, []streamCase{
		{
			name:  "plain text in chunks",
			reply: llmtest.Text("Hel", "lo, ", "wörld 🌍").WithUsage(11, 7),
			want:  streamed{text: []string{"Hel", "lo, ", "wörld 🌍"}, finish: agents.FinishStop, usage: agents.Usage{PromptTokens: 11, CompletionTokens: 7, TotalTokens: 18}},
		},
		{
			name:  "cache reads count as prompt tokens and as cached",
			reply: llmtest.Text("hi").WithCachedUsage(100, 64, 5),
			want:  streamed{text: []string{"hi"}, finish: agents.FinishStop, usage: agents.Usage{PromptTokens: 100, CompletionTokens: 5, TotalTokens: 105, CachedTokens: 64}},
		},
		{
			name:  "max_tokens",
			reply: llmtest.Text("cut").WithFinish("length").WithUsage(3, 1),
			want:  streamed{text: []string{"cut"}, finish: agents.FinishLength, usage: agents.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}},
		},
		{
			name:  "refusal",
			reply: llmtest.Text("no").WithFinish("refusal").WithUsage(3, 1),
			want:  streamed{text: []string{"no"}, finish: agents.FinishContentFilter, usage: agents.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}},
		},
		{
			name:  "empty reply",
			reply: llmtest.Reply{}.WithUsage(3, 1),
			want:  streamed{finish: agents.FinishStop, usage: agents.Usage{PromptTokens: 3, CompletionTokens: 1, TotalTokens: 4}},
		},
	}, func(t *testing.T, srv *llmtest.Server) {
		req := srv.LastRequest(t)
		if req.Path != "/v1/messages" || req.Format != llmtest.FormatAnthropic || !req.Anthropic.Stream {
			t.Errorf("request = %s %s (%s), stream %v", req.Method, req.Path, req.Format, req.Anthropic.Stream)
		}
		if req.Anthropic.Model != "claude-test" || req.Anthropic.MaxTokens != agents.DefaultAnthropicMaxTokens {
			t.Errorf("model %q, max_tokens %d", req.Anthropic.Model, req.Anthropic.MaxTokens)
		}
		if got := req.Header.Get("Authorization") + req.Header.Get("X-Api-Key"); !strings.Contains(got, testKey) {
			t.Errorf("the API key was not sent (Authorization %q, X-Api-Key %q)", req.Header.Get("Authorization"), req.Header.Get("X-Api-Key"))
		}
		if sys := req.Anthropic.System; len(sys) != 1 || sys[0].Text != "You are a test." || req.Anthropic.Messages[0].Content.Text() != "hi" {
			t.Errorf("system %+v, messages %+v", sys, req.Anthropic.Messages)
		}
	})
}

// A tool_use block's streamed input becomes a tool call; the next request
// carries the call as a tool_use block and its result as a tool_result
// block in the user message after it.
func TestAnthropicToolUse(t *testing.T) {
	srv := llmtest.NewServer(t,
		llmtest.Calls(
			llmtest.ToolCall("toolu_1", "current_time", `{"timezone":"Europe/Berlin"}`).WithPieces(5),
			llmtest.ToolCall("toolu_2", "room_info", ``),
		).WithText("Let me ", "check."),
	)
	m := anthropicModel(t, srv)
	evs, err := collectStream(t, m, &agents.Request{
		Messages: userPrompt("what time is it?").Messages,
		Tools: []agents.ToolSpec{
			{Name: "current_time", Description: "The time", Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}`)},
			{Name: "room_info"},
		},
	})
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	var text string
	var calls []agents.ToolCall
	var fin agents.FinishReason
	for _, ev := range evs {
		switch ev.Kind {
		case agents.EventText:
			text += ev.Text
		case agents.EventToolCalls:
			calls = ev.ToolCalls
		case agents.EventFinish:
			fin = ev.FinishReason
		}
	}
	want := []agents.ToolCall{
		{ID: "toolu_1", Name: "current_time", Arguments: `{"timezone":"Europe/Berlin"}`},
		{ID: "toolu_2", Name: "room_info", Arguments: `{}`},
	}
	if text != "Let me check." || !reflect.DeepEqual(calls, want) || fin != agents.FinishToolCalls {
		t.Fatalf("text %q, calls %+v, finish %q", text, calls, fin)
	}
	first := srv.LastRequest(t)
	tools := first.Anthropic.Tools
	if len(tools) != 2 || tools[0].Name != "current_time" || tools[0].Description != "The time" ||
		string(tools[0].InputSchema) != `{"type":"object","properties":{"timezone":{"type":"string"}},"required":["timezone"]}` ||
		string(tools[1].InputSchema) != `{"type":"object","properties":{}}` {
		t.Errorf("tools = %+v", tools)
	}

	// The whole tool loop, through the real client: the calls run, their
	// results go back, the model answers.
	clock := agents.NewTool(agents.ToolSpec{Name: "current_time", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, json.RawMessage) (string, error) { return "12:00", nil })
	room := agents.NewTool(agents.ToolSpec{Name: "room_info"}, func(context.Context, json.RawMessage) (string, error) { return "lobby", nil })
	ts, err := agents.NewToolset(clock, room)
	if err != nil {
		t.Fatal(err)
	}
	srv.Script(llmtest.Calls(llmtest.ToolCall("toolu_3", "current_time", `{"timezone":"UTC"}`).WithPieces(3), llmtest.ToolCall("toolu_4", "room_info", `{}`)),
		llmtest.Text("Noon in the lobby."))
	res, err := agents.Run(t.Context(), agents.RunRequest{Model: m, Messages: userPrompt("time?").Messages, Tools: ts})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Text != "Noon in the lobby." {
		t.Errorf("Run text = %q", res.Text)
	}
	last := srv.LastRequest(t)
	msgs := last.Anthropic.Messages
	if len(msgs) != 3 || msgs[0].Role != "user" || msgs[1].Role != "assistant" || msgs[2].Role != "user" {
		t.Fatalf("messages = %+v", msgs)
	}
	use := msgs[1].Content
	if len(use) != 2 || use[0].Type != "tool_use" || use[0].ID != "toolu_3" || use[0].Name != "current_time" || string(use[0].Input) != `{"timezone":"UTC"}` ||
		use[1].Type != "tool_use" || use[1].ID != "toolu_4" {
		t.Errorf("assistant blocks = %+v", use)
	}
	results := msgs[2].Content
	if len(results) != 2 || results[0].Type != "tool_result" || results[0].ToolUseID != "toolu_3" || results[0].Content.Text() != "12:00" ||
		results[1].ToolUseID != "toolu_4" || results[1].Content.Text() != "lobby" {
		t.Errorf("tool results = %+v", results)
	}
	// The common form sees the same conversation as an OpenAI request.
	if b := last.Body; len(b.Messages) != 5 || b.Messages[2].ToolCalls[0].Function.Name != "current_time" || b.Messages[3].Role != "tool" || b.Messages[3].ToolCallID != "toolu_3" {
		t.Errorf("common form = %+v", b.Messages)
	}
}

func TestAnthropicErrors(t *testing.T) {
	testModelErrors(t, agents.ProviderAnthropic, []modelErrorCase{
		{name: "HTTP 401", reply: llmtest.HTTPError(401, "invalid x-api-key"), kind: agents.ErrorHTTP, status: 401, message: "HTTP 401 Unauthorized: invalid x-api-key"},
		{name: "HTTP 401 echoing the key", reply: llmtest.HTTPError(401, "invalid key "+testKey), kind: agents.ErrorHTTP, status: 401, message: "invalid key [REDACTED]"},
		{name: "HTTP 403 echoing another credential", reply: llmtest.Reply{Status: 403, Body: `{"detail":"upstream refused Authorization: Bearer upstream-token-0123456789"}`}, kind: agents.ErrorHTTP, status: 403, message: "upstream refused Authorization: [REDACTED]"},
		{name: "HTTP 429", reply: llmtest.HTTPError(429, "Number of request tokens has exceeded your per-minute rate limit"), kind: agents.ErrorHTTP, status: 429, retryable: true, message: "HTTP 429 Too Many Requests: Number of request tokens"},
		{name: "HTTP 500", reply: llmtest.HTTPError(500, "Internal server error"), kind: agents.ErrorHTTP, status: 500, retryable: true, message: "HTTP 500 Internal Server Error: Internal server error"},
		{name: "HTTP 529 overloaded", reply: llmtest.HTTPError(529, "Overloaded"), kind: agents.ErrorHTTP, status: 529, retryable: true, message: "HTTP 529: Overloaded"},
		{name: "HTTP 400", reply: llmtest.HTTPError(400, "max_tokens: Field required"), kind: agents.ErrorHTTP, status: 400, message: "max_tokens: Field required"},
		{name: "HTTP 502 with a non-JSON body", reply: llmtest.Reply{Status: 502, Body: "<html>bad gateway</html>"}, kind: agents.ErrorHTTP, status: 502, retryable: true, message: "HTTP 502 Bad Gateway: <html>bad gateway</html>"},
		{name: "overloaded in the stream", reply: llmtest.Text("Hel").WithStreamError("overloaded_error", "Overloaded"), kind: agents.ErrorServer, retryable: true, message: "in the stream: overloaded_error: Overloaded"},
		{name: "invalid request in the stream", reply: llmtest.Text("Hel").WithStreamError("invalid_request_error", "bad "+testKey), kind: agents.ErrorServer, message: "invalid_request_error: bad [REDACTED]"},
		{name: "garbage event", reply: llmtest.Text("a").WithGarbage("event: content_block_delta", `data: {"type": "content_block_delta", "index": [`, ""), kind: agents.ErrorProtocol, message: "invalid JSON"},
		{name: "truncated stream", reply: llmtest.Text("Hello", " wor").Truncated(), kind: agents.ErrorProtocol, retryable: true, message: "truncated", is: io.ErrUnexpectedEOF},
		{name: "deadline before the headers", reply: llmtest.Text("late").WithDelay(5 * time.Second), timeout: 100 * time.Millisecond, kind: agents.ErrorTimeout, retryable: true, message: "deadline", is: context.DeadlineExceeded},
		{name: "server silent past the request timeout", reply: llmtest.Text("a", "b").WithChunkDelay(5 * time.Second), spec: func(s *agents.ModelSpec) { s.RequestTimeout = 150 * time.Millisecond }, kind: agents.ErrorTimeout, retryable: true, message: "sent nothing for 150ms", is: context.DeadlineExceeded},
	})
}

// Two turns over the same history send the same bytes up to the new turn,
// and the cache breakpoint sits at the end of the stable system prefix.
func TestAnthropicRequestIsByteStable(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text("one"), llmtest.Text("two"), llmtest.Text("three"))
	m := anthropicModel(t, srv)
	stable := "You are alice, an assistant in a Matrix chat room.\n\nBe brief."
	system := stable + "\n\n<hookroom_system_context>volatile 1</hookroom_system_context>"
	history := []agents.Message{
		{Role: agents.RoleUser, Content: "first"},
		{Role: agents.RoleAssistant, ToolCalls: []agents.ToolCall{{ID: "toolu_1", Name: "clock", Arguments: `{"b":1,  "a":2}`}}},
		{Role: agents.RoleTool, ToolCallID: "toolu_1", Content: "12:00"},
		{Role: agents.RoleAssistant, Content: "It is noon."},
	}
	turn := func(sys, prompt string) *agents.Request {
		msgs := append([]agents.Message{{Role: agents.RoleSystem, Content: sys, StablePrefix: len(stable)}}, history...)
		return &agents.Request{Messages: append(msgs, agents.Message{Role: agents.RoleUser, Content: prompt}),
			Tools: []agents.ToolSpec{{Name: "clock", Parameters: json.RawMessage(`{"type":"object","properties":{"z":{},"a":{}}}`)}}}
	}
	for _, prompt := range []string{"second", "third"} {
		if _, err := agents.Complete(t.Context(), m, turn(system, prompt), nil); err != nil {
			t.Fatal(err)
		}
	}
	// The volatile part of the system prompt changes; what is before the
	// breakpoint does not.
	if _, err := agents.Complete(t.Context(), m, turn(stable+"\n\n<hookroom_system_context>volatile 2</hookroom_system_context>", "third"), nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, r := range reqs {
		if got := r.CacheBreakpoints(); !reflect.DeepEqual(got, []string{"system[0]"}) {
			t.Errorf("request %d: cache breakpoints at %q, want system[0]", i, got)
		}
		sys := r.Anthropic.System
		if len(sys) != 2 || sys[0].Text != stable || sys[0].CacheControl == nil || sys[0].CacheControl.Type != "ephemeral" || sys[1].CacheControl != nil {
			t.Errorf("request %d: system blocks = %+v", i, sys)
		}
		if r.Anthropic.System.Text() != r.System() || !strings.HasPrefix(r.System(), stable+"\n\n<hookroom_system_context>volatile") {
			t.Errorf("request %d: the system text changed: %q", i, r.System())
		}
	}
	// Turns 1 and 2 differ only in the last user message: everything
	// before it is byte-identical.
	a, b := string(reqs[0].Raw), string(reqs[1].Raw)
	cut := strings.Index(a, `"second"`)
	if cut < 0 || a[:cut] != b[:cut] || !strings.HasPrefix(b[cut:], `"third"`) {
		t.Errorf("requests differ before the new turn:\n%s\n%s", a, b)
	}
	// The tool call's arguments and the tool schema go out verbatim.
	if !strings.Contains(a, `"input":{"b":1,  "a":2}`) && !strings.Contains(a, `"input":{"b":1,"a":2}`) {
		t.Errorf("tool_use input not verbatim: %s", a)
	}
	if !strings.Contains(a, `"properties":{"z":{},"a":{}}`) {
		t.Errorf("tool schema reordered: %s", a)
	}
	// Turn 3 differs from turn 2 only after the breakpoint.
	c := string(reqs[2].Raw)
	p := strings.Index(c, "volatile 2")
	if p < 0 || c[:p] != b[:p] {
		t.Errorf("the cached prefix changed with the volatile part")
	}
	if !bytes.Contains(reqs[2].Raw, []byte(`"cache_control":{"type":"ephemeral"}`)) {
		t.Errorf("no ephemeral cache_control: %s", c)
	}
}

// At most four breakpoints, the last ones; none without StablePrefix.
func TestAnthropicCacheBreakpoints(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text("a"), llmtest.Text("b"))
	m := anthropicModel(t, srv)
	var msgs []agents.Message
	msgs = append(msgs, agents.Message{Role: agents.RoleSystem, Content: "sys", StablePrefix: 3})
	for _, s := range []string{"u1", "u2", "u3", "u4"} {
		msgs = append(msgs, agents.Message{Role: agents.RoleUser, Content: s, StablePrefix: len(s)}, agents.Message{Role: agents.RoleAssistant, Content: "ok"})
	}
	msgs = append(msgs, agents.Message{Role: agents.RoleUser, Content: "now"})
	if _, err := agents.Complete(t.Context(), m, &agents.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.LastRequest(t).CacheBreakpoints()
	want := []string{"messages[0].content[0]", "messages[2].content[0]", "messages[4].content[0]", "messages[6].content[0]"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("breakpoints = %q, want %q", got, want)
	}
	if _, err := agents.Complete(t.Context(), m, userPrompt("plain"), nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.LastRequest(t).CacheBreakpoints(); len(got) != 0 {
		t.Errorf("breakpoints without StablePrefix: %q", got)
	}
}

// The configured max_tokens, the request's own bound, temperature and an
// image.
func TestAnthropicRequestWire(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text("a"), llmtest.Text("b"))
	m := anthropicModel(t, srv, func(s *agents.ModelSpec) { s.MaxTokens = 1000; s.BaseURL = srv.RootURL + "/v1/" })
	temp := float32(0.5)
	req := userPrompt("look")
	req.Messages[1].Images = []agents.Image{{MimeType: "image/png", Data: []byte("PNG")}}
	req.Temperature = &temp
	if _, err := agents.Complete(t.Context(), m, req, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.LastRequest(t)
	if got.Anthropic.MaxTokens != 1000 || got.Anthropic.Temperature == nil || *got.Anthropic.Temperature != 0.5 {
		t.Errorf("max_tokens %d, temperature %v", got.Anthropic.MaxTokens, got.Anthropic.Temperature)
	}
	blocks := got.Anthropic.Messages[0].Content
	if len(blocks) != 2 || blocks[0].Text != "look" || blocks[1].Type != "image" || blocks[1].Source == nil ||
		blocks[1].Source.MediaType != "image/png" || blocks[1].Source.Data != "UE5H" {
		t.Errorf("blocks = %+v", blocks)
	}
	if _, err := agents.Complete(t.Context(), m, &agents.Request{Messages: userPrompt("x").Messages, MaxTokens: 20}, nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.LastRequest(t); got.Anthropic.MaxTokens != 20 || got.Method != http.MethodPost {
		t.Errorf("max_tokens %d", got.Anthropic.MaxTokens)
	}
}

// models.<name>.max_tokens bounds replies when the request sets no bound;
// the request's own bound wins.
func TestMaxTokensFromSpec(t *testing.T) {
	cases := []struct {
		name     string
		provider string
		spec     int
		request  int
		want     int
	}{
		{name: "openai without a bound", provider: agents.ProviderOpenAI},
		{name: "openai with the model's bound", provider: agents.ProviderOpenAI, spec: 300, want: 300},
		{name: "openai request wins", provider: agents.ProviderOpenAI, spec: 300, request: 20, want: 20},
		{name: "anthropic default", provider: agents.ProviderAnthropic, want: agents.DefaultAnthropicMaxTokens},
		{name: "anthropic with the model's bound", provider: agents.ProviderAnthropic, spec: 300, want: 300},
		{name: "anthropic request wins", provider: agents.ProviderAnthropic, spec: 300, request: 20, want: 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Text("ok"))
			base := srv.URL
			if tc.provider == agents.ProviderAnthropic {
				base = srv.RootURL
			}
			m, err := agents.NewModel(agents.ModelSpec{Provider: tc.provider, BaseURL: base, Model: "m", MaxTokens: tc.spec})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := agents.Complete(t.Context(), m, &agents.Request{Messages: userPrompt("hi").Messages, MaxTokens: tc.request}, nil); err != nil {
				t.Fatal(err)
			}
			if got := srv.LastRequest(t).Body.MaxTokens; got != tc.want {
				t.Errorf("max_tokens = %d, want %d", got, tc.want)
			}
		})
	}
}

// The provider takes nothing from the SDK's environment variables: the key
// and URL are config.yaml's alone.
func TestAnthropicIgnoresEnvironment(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-0123456789")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "token-from-env-0123456789")
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:1")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-From-Env: yes")
	srv := llmtest.NewServer(t, llmtest.Text("a"), llmtest.Text("b"))
	for _, key := range []string{testKey, ""} {
		m := anthropicModel(t, srv, func(s *agents.ModelSpec) { s.APIKey = key })
		if _, err := agents.Complete(t.Context(), m, userPrompt("hi"), nil); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		h := srv.LastRequest(t).Header
		for name, vs := range h {
			for _, v := range vs {
				if strings.Contains(v, "from-env") || name == "X-From-Env" {
					t.Errorf("key %q: header %s: %s comes from the environment", key, name, v)
				}
			}
		}
		if auth := h.Get("Authorization") + h.Get("X-Api-Key"); (key == "") != (auth == "") {
			t.Errorf("key %q: sent credentials %q", key, auth)
		}
	}
}

// A tool_use block whose input comes whole in content_block_start (as some
// proxies send it) rather than in input_json_delta pieces.
func TestAnthropicToolInputInBlockStart(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Reply{}.WithGarbage(
		`event: content_block_start`,
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_9","name":"clock","input":{"timezone":"UTC"}}}`, ``,
		`event: content_block_stop`, `data: {"type":"content_block_stop","index":0}`, ``,
		`event: content_block_start`,
		`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_10","name":"room_info","input":{}}}`, ``,
		`event: content_block_stop`, `data: {"type":"content_block_stop","index":1}`, ``,
		`event: message_delta`, `data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`, ``,
		`event: message_stop`, `data: {"type":"message_stop"}`, ``,
	))
	c, err := agents.Complete(t.Context(), anthropicModel(t, srv), userPrompt("hi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []agents.ToolCall{{ID: "toolu_9", Name: "clock", Arguments: `{"timezone":"UTC"}`}, {ID: "toolu_10", Name: "room_info", Arguments: `{}`}}
	if !reflect.DeepEqual(c.ToolCalls, want) || c.FinishReason != agents.FinishToolCalls || c.Usage.CompletionTokens != 9 {
		t.Errorf("completion = %+v", c)
	}
}

// A server that cannot be reached is a retryable network error named by
// its origin: the base URL's path and query may hold a gateway token, and
// neither they nor the key show in the error or its cause.
func TestNetworkErrorHidesTheURL(t *testing.T) {
	for _, provider := range []string{agents.ProviderOpenAI, agents.ProviderAnthropic} {
		for _, path := range []string{"/v1", "/gw/tok-SECRET-0123456789/v1?q=querytoken456"} {
			t.Run(provider+path, func(t *testing.T) {
				addr := refusedAddr(t)
				m, err := agents.NewModel(agents.ModelSpec{Provider: provider, BaseURL: "http://" + addr + path, Model: "m", APIKey: testKey})
				if err != nil {
					t.Fatal(err)
				}
				_, err = agents.Complete(t.Context(), m, userPrompt("hi"), nil)
				var me *agents.ModelError
				if !errors.As(err, &me) || me.Kind != agents.ErrorNetwork || !me.Retryable {
					t.Fatalf("error = %v, want a retryable network *ModelError", err)
				}
				if !strings.Contains(me.Message, "http://"+addr+":") || !strings.Contains(me.Message, "connection refused") {
					t.Errorf("error does not say which server failed how: %v", me.Message)
				}
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("error %v does not unwrap to ECONNREFUSED", err)
				}
				for e := error(me); e != nil; e = errors.Unwrap(e) {
					if s := e.Error(); strings.Contains(s, "SECRET") || strings.Contains(s, "/gw/") || strings.Contains(s, "querytoken456") || strings.Contains(s, testKey) {
						t.Errorf("error shows the URL's path or query or the key: %v", e)
					}
				}
			})
		}
	}
}

// rawAnthropic serves every request with status, content type and body
// as given, and records the last request's headers and body.
type rawAnthropic struct {
	srv    *httptest.Server
	mu     sync.Mutex
	header http.Header
	body   []byte
}

func newRawAnthropic(t *testing.T, status int, contentType, body string) *rawAnthropic {
	t.Helper()
	ra := &rawAnthropic{}
	ra.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ra.mu.Lock()
		ra.header, ra.body = r.Header.Clone(), b
		ra.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			http.Error(w, "wrong endpoint "+r.Method+" "+r.URL.Path, http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ra.srv.Close)
	return ra
}

// model returns an anthropic model talking to ra.
func (ra *rawAnthropic) model(t *testing.T) agents.Model {
	t.Helper()
	m, err := agents.NewModel(agents.ModelSpec{Provider: agents.ProviderAnthropic, BaseURL: ra.srv.URL, Model: "claude-test", APIKey: testKey, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sseEv is one server-sent event named name with data (one data: line).
func sseEv(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

// Events of a plain Messages API stream, for the framing tests.
var (
	evMessageStart = sseEv("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`)
	evTextStart    = sseEv("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	evBlockStop    = sseEv("content_block_stop", `{"type":"content_block_stop","index":0}`)
	evMessageDelta = sseEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`)
	evMessageStop  = sseEv("message_stop", `{"type":"message_stop"}`)
)

// evText is a text_delta of block 0.
func evText(text string) string {
	b, _ := json.Marshal(text)
	return sseEv("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(b)+`}}`)
}

// textStream is a whole stream whose reply is the text pieces.
func textStream(pieces ...string) string {
	s := evMessageStart + evTextStart
	for _, p := range pieces {
		s += evText(p)
	}
	return s + evBlockStop + evMessageDelta + evMessageStop
}

// The server-sent-events framing: line endings, multi-line data,
// comments, pings, error events, and streams that end early.
func TestAnthropicSSEFraming(t *testing.T) {
	okUsage := agents.Usage{PromptTokens: 10, CompletionTokens: 3, TotalTokens: 13}
	hello := streamed{text: []string{"Hel", "lo"}, finish: agents.FinishStop, usage: okUsage}
	cases := []struct {
		name string
		body string
		want streamed
		// When message is set the stream fails with a *ModelError of
		// kind, retryable, whose text holds message (and is is, if set).
		message   string
		kind      agents.ErrorKind
		retryable bool
		is        error
	}{
		{name: "LF", body: textStream("Hel", "lo"), want: hello},
		{name: "CRLF", body: strings.ReplaceAll(textStream("Hel", "lo"), "\n", "\r\n"), want: hello},
		{name: "CR alone", body: strings.ReplaceAll(textStream("Hel", "lo"), "\n", "\r"), want: hello},
		{name: "mixed line endings", body: strings.Replace(strings.ReplaceAll(textStream("Hel", "lo"), "\n\n", "\r\n\r\n"), "\n", "\r", 3), want: hello},
		{
			name: "data over several lines",
			body: evMessageStart + evTextStart +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\ndata: \"index\":0,\ndata:\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n" +
				evText("lo") + evBlockStop + evMessageDelta + evMessageStop,
			want: hello,
		},
		{
			// The lines are joined with a newline, which a JSON string
			// may not hold.
			name: "data lines joined with a newline",
			body: evMessageStart + evTextStart + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"He\ndata: l\"}}\n\n" +
				evBlockStop + evMessageDelta + evMessageStop,
			kind: agents.ErrorProtocol, message: "invalid JSON",
		},
		{
			name: "comments, pings, id and retry fields, blank lines between events",
			body: ": keep-alive\n\n\n" + evMessageStart + "id: 7\nretry: 100\n" + evTextStart + sseEv("ping", `{"type": "ping"}`) +
				": a comment\n" + evText("Hel") + "event: ping\n\n" + evText("lo") + evBlockStop + evMessageDelta + evMessageStop + "\n\n",
			want: hello,
		},
		{
			// As the SDK did: a nameless event is not one of the API's.
			name: "events without a name are skipped",
			body: evMessageStart + evTextStart + evText("Hel") + "data: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"XX"}}` + "\n\n" +
				evText("lo") + evBlockStop + evMessageDelta + evMessageStop,
			want: hello,
		},
		{name: "event without data", body: evMessageStart + "event: content_block_delta\n\n" + textStream("Hel", "lo")[len(evMessageStart):], want: hello},
		{
			name: "overloaded error event mid-stream",
			body: evMessageStart + evTextStart + evText("Hel") +
				sseEv("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`) + evText("lo") + evMessageStop,
			kind: agents.ErrorServer, retryable: true, message: "the server reported an error in the stream: overloaded_error: Overloaded",
		},
		{
			name: "api_error event mid-stream, CRLF",
			body: strings.ReplaceAll(evMessageStart+evTextStart+evText("Hel")+sseEv("error", `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`), "\n", "\r\n"),
			kind: agents.ErrorServer, retryable: true, message: "api_error: Internal server error",
		},
		{
			name: "invalid request error event",
			body: evMessageStart + sseEv("error", `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`),
			kind: agents.ErrorServer, message: "invalid_request_error: bad",
		},
		{
			name: "error event that is not JSON",
			body: evMessageStart + sseEv("error", `upstream went away`),
			kind: agents.ErrorServer, message: "in the stream: upstream went away",
		},
		{
			name: "no message_stop",
			body: evMessageStart + evTextStart + evText("Hel") + evBlockStop + evMessageDelta,
			kind: agents.ErrorProtocol, retryable: true, message: "truncated", is: io.ErrUnexpectedEOF,
		},
		{
			// The last event has no blank line after it: it is dropped,
			// not half-parsed, and the reply is incomplete.
			name: "message_stop without its blank line",
			body: textStream("Hel", "lo")[:len(textStream("Hel", "lo"))-1],
			kind: agents.ErrorProtocol, retryable: true, message: "truncated", is: io.ErrUnexpectedEOF,
		},
		{
			name: "cut in the middle of a data line",
			body: evMessageStart + evTextStart + "event: content_block_delta\ndata: {\"type\":\"content_blo",
			kind: agents.ErrorProtocol, retryable: true, message: "truncated", is: io.ErrUnexpectedEOF,
		},
		{name: "no message_start", body: evTextStart + evText("Hel") + evMessageDelta + evMessageStop, kind: agents.ErrorProtocol, message: "not a message stream"},
		{name: "empty body", body: "", kind: agents.ErrorProtocol, message: "not a message stream"},
		{name: "JSON message instead of a stream", body: `{"type":"message","content":[{"type":"text","text":"hi"}]}`, kind: agents.ErrorProtocol, message: "not a message stream"},
		{name: "invalid JSON", body: evMessageStart + sseEv("content_block_delta", `{"type":"content_block_delta","index":[`), kind: agents.ErrorProtocol, message: "invalid JSON"},
		{name: "JSON of the wrong shape", body: evMessageStart + sseEv("content_block_delta", `{"type":"content_block_delta","index":"zero"}`), kind: agents.ErrorProtocol, message: "invalid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ra := newRawAnthropic(t, http.StatusOK, "text/event-stream; charset=utf-8", tc.body)
			evs, err := collectStream(t, ra.model(t), userPrompt("hi"))
			if tc.message == "" {
				if err != nil {
					t.Fatalf("Recv: %v", err)
				}
				gather(t, evs).check(t, tc.want)
				return
			}
			t.Logf("error: %v", err)
			var me *agents.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v (%T), want a *ModelError", err, err)
			}
			if me.Kind != tc.kind || me.Retryable != tc.retryable || !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error = kind %q retryable %v %q, want %q %v %q", me.Kind, me.Retryable, err, tc.kind, tc.retryable, tc.message)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}

// Tool input streamed in many input_json_delta pieces is gathered per
// content block index, even when the pieces of two blocks interleave;
// usage counts cache reads and writes into the prompt.
func TestAnthropicToolInputPieces(t *testing.T) {
	piece := func(index int, s string) string {
		b, _ := json.Marshal(s)
		return sseEv("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, index, b))
	}
	start := func(index int, id, name string) string {
		return sseEv("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, index, id, name))
	}
	args := `{"city":"K\u00f6ln \"Dom\"","days":[1,2,3],"note":"ü🌍"}`
	// Pieces of three characters: escapes and the JSON's structure are
	// cut anywhere.
	var pieces string
	for r := []rune(args); len(r) > 0; r = r[min(3, len(r)):] {
		pieces += piece(1, string(r[:min(3, len(r))]))
	}
	body := sseEv("message_start", `{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":20,"cache_creation_input_tokens":30,"output_tokens":1}}}`) +
		evTextStart + evText("Checking.") + evBlockStop +
		start(1, "toolu_a", "weather") + pieces + sseEv("content_block_stop", `{"type":"content_block_stop","index":1}`) +
		start(2, "toolu_b", "clock") + start(3, "toolu_c", "room") +
		piece(3, `{"ro`) + piece(2, `{"tz":`) + piece(3, `om":"lobby"}`) + piece(2, `"UTC"}`) + piece(9, `{"lost":true}`) +
		sseEv("content_block_stop", `{"type":"content_block_stop","index":2}`) + sseEv("content_block_stop", `{"type":"content_block_stop","index":3}`) +
		sseEv("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":42}}`) + evMessageStop
	ra := newRawAnthropic(t, http.StatusOK, "text/event-stream", body)
	evs, err := collectStream(t, ra.model(t), userPrompt("weather?"))
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	gather(t, evs).check(t, streamed{
		text: []string{"Checking."},
		calls: []agents.ToolCall{
			{ID: "toolu_a", Name: "weather", Arguments: args},
			{ID: "toolu_b", Name: "clock", Arguments: `{"tz":"UTC"}`},
			{ID: "toolu_c", Name: "room", Arguments: `{"room":"lobby"}`},
		},
		finish: agents.FinishToolCalls,
		usage:  agents.Usage{PromptTokens: 60, CachedTokens: 20, CompletionTokens: 42, TotalTokens: 102},
	})
}

// Every error status becomes an ErrorHTTP *ModelError: the provider's
// message (error.message, else the body) clipped, the key never shown,
// retryable for rate limits, overload and server errors only.
func TestAnthropicErrorBodies(t *testing.T) {
	errBody := func(typ, msg string) string {
		b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
		return string(b)
	}
	long := strings.Repeat("ü", 400) // 800 bytes, clipped on a character boundary
	cases := []struct {
		name      string
		status    int
		body      string
		retryable bool
		message   string
	}{
		{name: "400 invalid request", status: 400, body: errBody("invalid_request_error", "max_tokens: Field required"), message: "the server answered HTTP 400 Bad Request: max_tokens: Field required"},
		{name: "400 prompt too long", status: 400, body: errBody("invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum"), message: "HTTP 400 Bad Request: prompt is too long: 212345 tokens > 200000 maximum"},
		{name: "401 authentication", status: 401, body: errBody("authentication_error", "invalid x-api-key"), message: "HTTP 401 Unauthorized: invalid x-api-key"},
		{name: "401 echoing the key", status: 401, body: errBody("authentication_error", "invalid key "+testKey), message: "invalid key [REDACTED]"},
		{name: "403 permission", status: 403, body: errBody("permission_error", "not allowed"), message: "HTTP 403 Forbidden: not allowed"},
		{name: "404 not found", status: 404, body: errBody("not_found_error", "model: claude-nope"), message: "HTTP 404 Not Found: model: claude-nope"},
		{name: "408 timeout", status: 408, body: errBody("timeout_error", "Request timed out"), retryable: true, message: "HTTP 408 Request Timeout: Request timed out"},
		{name: "413 too large", status: 413, body: errBody("request_too_large", "Request exceeds the maximum size"), message: "HTTP 413 Request Entity Too Large: Request exceeds"},
		{name: "429 rate limit", status: 429, body: errBody("rate_limit_error", "slow down"), retryable: true, message: "HTTP 429 Too Many Requests: slow down"},
		{name: "500 api error", status: 500, body: errBody("api_error", "Internal server error"), retryable: true, message: "HTTP 500 Internal Server Error: Internal server error"},
		{name: "501 not implemented", status: 501, body: errBody("api_error", "no"), message: "HTTP 501 Not Implemented: no"},
		{name: "503 HTML", status: 503, body: "<html>down</html>", retryable: true, message: "HTTP 503 Service Unavailable: <html>down</html>"},
		{name: "529 overloaded", status: 529, body: errBody("overloaded_error", "Overloaded"), retryable: true, message: "the server answered HTTP 529: Overloaded"},
		{name: "502 empty body", status: 502, body: "", retryable: true, message: "HTTP 502 Bad Gateway: (empty body)"},
		{name: "JSON without error.message", status: 400, body: `{"detail":"bad input"}`, message: `HTTP 400 Bad Request: {"detail":"bad input"}`},
		{name: "long message clipped", status: 400, body: errBody("invalid_request_error", long), message: strings.Repeat("ü", 150) + "…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ra := newRawAnthropic(t, tc.status, "application/json", tc.body)
			_, err := agents.Complete(t.Context(), ra.model(t), userPrompt("hi"), nil)
			t.Logf("error: %v", err)
			var me *agents.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v (%T), want a *ModelError", err, err)
			}
			if me.Kind != agents.ErrorHTTP || me.StatusCode != tc.status || me.Retryable != tc.retryable {
				t.Errorf("error = kind %q status %d retryable %v, want http %d %v", me.Kind, me.StatusCode, me.Retryable, tc.status, tc.retryable)
			}
			if !strings.Contains(me.Message, tc.message) || !utf8.ValidString(me.Message) {
				t.Errorf("message %q does not hold %q (or is not UTF-8)", me.Message, tc.message)
			}
			for e := error(me); e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), testKey) || strings.Contains(e.Error(), "SECRET") {
					t.Errorf("error leaks the API key: %v", e)
				}
			}
		})
	}
}

// The request as it goes on the wire: the headers, and a body
// byte-identical to the one the official SDK sent before hookroom spoke
// the API itself (field order, cache_control, tool_use input compacted,
// HTML characters escaped, temperature as a float64 of the float32).
func TestAnthropicRequestBody(t *testing.T) {
	ra := newRawAnthropic(t, http.StatusOK, "text/event-stream", textStream("ok"))
	temp := float32(0.7)
	stable := "You are alice.\n\nBe brief."
	req := &agents.Request{
		Messages: []agents.Message{
			{Role: agents.RoleSystem, Content: stable + "\n\nvolatile <&> ü \u2028", StablePrefix: len(stable)},
			{Role: agents.RoleSystem, Content: "summary"},
			{Role: agents.RoleUser, Content: "first", StablePrefix: 5},
			{Role: agents.RoleUser, Content: "look", Images: []agents.Image{{MimeType: "image/jpeg", Data: []byte("JPEGDATA")}}},
			{Role: agents.RoleAssistant, Content: "checking", ToolCalls: []agents.ToolCall{{ID: "t1", Name: "clock", Arguments: `{"b":1,  "a":"<x>"}`}, {ID: "t2", Name: "room", Arguments: `not json`}, {ID: "t3", Name: "room", Arguments: ``}}},
			{Role: agents.RoleTool, ToolCallID: "t1", Content: "12:00", StablePrefix: 5},
			{Role: agents.RoleTool, ToolCallID: "t2", Content: ""},
			{Role: agents.RoleAssistant, Content: "It is noon."},
			{Role: agents.RoleUser, Content: ""},
			{Role: agents.RoleUser, Content: "more", StablePrefix: 2},
		},
		Tools:       []agents.ToolSpec{{Name: "clock", Description: "The <time>", Parameters: json.RawMessage(`{"type":"object", "properties":{"z":{},"a":{}}}`)}, {Name: "room"}},
		MaxTokens:   77,
		Temperature: &temp,
	}
	if _, err := agents.Complete(t.Context(), ra.model(t), req, nil); err != nil {
		t.Fatal(err)
	}
	want := `{"max_tokens":77,"messages":[{"content":[{"text":"first","cache_control":{"type":"ephemeral"},"type":"text"},{"text":"look","type":"text"},{"source":{"data":"SlBFR0RBVEE=","media_type":"image/jpeg","type":"base64"},"type":"image"}],"role":"user"},{"content":[{"text":"checking","type":"text"},{"id":"t1","input":{"b":1,"a":"\u003cx\u003e"},"name":"clock","type":"tool_use"},{"id":"t2","input":{},"name":"room","type":"tool_use"},{"id":"t3","input":{},"name":"room","type":"tool_use"}],"role":"assistant"},{"content":[{"tool_use_id":"t1","cache_control":{"type":"ephemeral"},"content":[{"text":"12:00","type":"text"}],"type":"tool_result"},{"tool_use_id":"t2","type":"tool_result"}],"role":"user"},{"content":[{"text":"It is noon.","type":"text"}],"role":"assistant"},{"content":[{"text":"mo","cache_control":{"type":"ephemeral"},"type":"text"},{"text":"re","type":"text"}],"role":"user"}],"model":"claude-test","system":[{"text":"You are alice.\n\nBe brief.","cache_control":{"type":"ephemeral"},"type":"text"},{"text":"\n\nvolatile \u003c\u0026\u003e ü \u2028","type":"text"},{"text":"summary","type":"text"}],"tools":[{"input_schema":{"type":"object","properties":{"z":{},"a":{}}},"name":"clock","description":"The \u003ctime\u003e"},{"input_schema":{"type":"object","properties":{}},"name":"room"}],"temperature":0.699999988079071,"stream":true}`
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if string(ra.body) != want {
		t.Errorf("body:\n%s\nwant:\n%s", ra.body, want)
	}
	h := ra.header
	if h.Get("X-Api-Key") != testKey || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Content-Type") != "application/json" || h.Get("Authorization") != "" {
		t.Errorf("headers = %v", h)
	}
}

// Cancelling the request or closing the stream in the middle of a reply
// ends it at once: the connection closes, which the server sees.
func TestAnthropicStopMidStream(t *testing.T) {
	cases := []struct {
		name string
		stop func(cancel context.CancelFunc, s agents.Stream)
		// kind is the error the next Recv returns; "" when it is io.EOF…
		// or any error of a closed stream.
		kind agents.ErrorKind
	}{
		{name: "cancel", stop: func(cancel context.CancelFunc, _ agents.Stream) { cancel() }, kind: agents.ErrorCancelled},
		{name: "close", stop: func(_ context.CancelFunc, s agents.Stream) { _ = s.Close() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, evMessageStart+evTextStart+evText("Hel"))
				w.(http.Flusher).Flush()
				<-r.Context().Done() // the client went away
				close(gone)
			}))
			defer srv.Close()
			m, err := agents.NewModel(agents.ModelSpec{Provider: agents.ProviderAnthropic, BaseURL: srv.URL, Model: "claude-test", RequestTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s, err := m.Stream(ctx, userPrompt("hi"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if ev, err := s.Recv(); err != nil || ev.Text != "Hel" {
				t.Fatalf("first event = %+v, %v", ev, err)
			}
			tc.stop(cancel, s)
			_, err = s.Recv()
			var me *agents.ModelError
			if tc.kind != "" && (!errors.As(err, &me) || me.Kind != tc.kind || !errors.Is(err, context.Canceled)) {
				t.Errorf("Recv after %s = %v, want a %s *ModelError", tc.name, err, tc.kind)
			}
			if err == nil {
				t.Errorf("Recv after %s returned an event", tc.name)
			}
			select {
			case <-gone:
			case <-time.After(5 * time.Second):
				t.Fatal("the server still holds the connection")
			}
		})
	}
}
