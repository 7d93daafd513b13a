package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
)

func TestOpenAIStreams(t *testing.T) {
	usage := agents.Usage{PromptTokens: 11, CompletionTokens: 7, TotalTokens: 18}
	testStreams(t, agents.ProviderOpenAI, []streamCase{
		{
			name:  "plain text in chunks",
			reply: llmtest.Text("Hel", "lo, ", "wörld 🌍").WithUsage(11, 7),
			want:  streamed{text: []string{"Hel", "lo, ", "wörld 🌍"}, finish: agents.FinishStop, usage: usage},
		},
		{
			name:  "tool call split across chunks",
			reply: llmtest.Calls(llmtest.ToolCall("call_a", "current_time", `{"timezone":"Europe/Berlin"}`).WithPieces(5)).WithUsage(11, 7),
			want:  streamed{calls: []agents.ToolCall{{ID: "call_a", Name: "current_time", Arguments: `{"timezone":"Europe/Berlin"}`}}, finish: agents.FinishToolCalls, usage: usage},
		},
		{
			name: "parallel tool calls",
			reply: llmtest.Calls(
				llmtest.ToolCall("call_1", "current_time", `{"timezone":"Asia/Tokyo"}`).WithPieces(3),
				llmtest.ToolCall("call_2", "room_info", `{}`),
				llmtest.ToolCall("call_3", "current_time", `{"timezone":"UTC"}`).WithPieces(7),
			).WithUsage(11, 7),
			want: streamed{
				calls: []agents.ToolCall{
					{ID: "call_1", Name: "current_time", Arguments: `{"timezone":"Asia/Tokyo"}`},
					{ID: "call_2", Name: "room_info", Arguments: `{}`},
					{ID: "call_3", Name: "current_time", Arguments: `{"timezone":"UTC"}`},
				},
				finish: agents.FinishToolCalls,
				usage:  usage,
			},
		},
		{
			name:  "text then tool call",
			reply: llmtest.Calls(llmtest.ToolCall("c", "room_info", "")).WithText("Let me ", "look.").WithUsage(11, 7),
			want:  streamed{text: []string{"Let me ", "look."}, calls: []agents.ToolCall{{ID: "c", Name: "room_info", Arguments: "{}"}}, finish: agents.FinishToolCalls, usage: usage},
		},
		{
			name:  "tool call without id",
			reply: llmtest.Calls(llmtest.ToolCall("", "room_info", "{}")).WithUsage(11, 7),
			want:  streamed{calls: []agents.ToolCall{{ID: "call_0", Name: "room_info", Arguments: "{}"}}, finish: agents.FinishToolCalls, usage: usage},
		},
		{
			name:  "length limit",
			reply: llmtest.Text("cut").WithFinish("length").WithUsage(11, 7),
			want:  streamed{text: []string{"cut"}, finish: agents.FinishLength, usage: usage},
		},
	}, nil)
}

// The cached part of the prompt (usage.prompt_tokens_details.cached_tokens)
// reaches Usage.CachedTokens; Run sums it over a turn's model calls.
func TestOpenAICachedTokens(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text("hi").WithCachedUsage(100, 64, 5))
	evs, err := collectStream(t, testModel(t, srv), userPrompt("hi"))
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	var got agents.Usage
	for _, ev := range evs {
		if ev.Kind == agents.EventUsage {
			got = ev.Usage
		}
	}
	if want := (agents.Usage{PromptTokens: 100, CompletionTokens: 5, TotalTokens: 105, CachedTokens: 64}); got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}

	srv = llmtest.NewServer(t,
		llmtest.Calls(llmtest.ToolCall("c1", "missing_tool", "{}")).WithCachedUsage(50, 10, 3),
		llmtest.Text("done").WithCachedUsage(70, 40, 4))
	res, err := agents.Run(t.Context(), agents.RunRequest{Model: testModel(t, srv), Messages: userPrompt("hi").Messages})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if want := (agents.Usage{PromptTokens: 120, CompletionTokens: 7, TotalTokens: 127, CachedTokens: 50}); res.Usage != want {
		t.Errorf("run usage = %+v, want %+v", res.Usage, want)
	}
}

func TestOpenAIRequestWire(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text("ok"))
	m := testModel(t, srv)
	temp := float32(0.5)
	req := &agents.Request{
		Messages: []agents.Message{
			{Role: agents.RoleSystem, Content: "sys"},
			{Role: agents.RoleUser, Content: "what time is it?", Name: "alice"},
			{Role: agents.RoleAssistant, ToolCalls: []agents.ToolCall{{ID: "call_1", Name: "current_time", Arguments: `{"timezone":"UTC"}`}}},
			{Role: agents.RoleTool, ToolCallID: "call_1", Content: `{"time":"now"}`},
		},
		Tools: []agents.ToolSpec{
			{Name: "current_time", Description: "time", Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string"}}}`)},
			{Name: "room_info"},
		},
		MaxTokens:   100,
		Temperature: &temp,
	}
	if _, err := agents.Complete(t.Context(), m, req, nil); err != nil {
		t.Fatal(err)
	}
	got := srv.LastRequest(t)
	if got.Path != "/v1/chat/completions" || got.Method != http.MethodPost {
		t.Errorf("request = %s %s", got.Method, got.Path)
	}
	if auth := got.Header.Get("Authorization"); auth != "Bearer "+testKey {
		t.Errorf("Authorization = %q", auth)
	}
	b := got.Body
	if b.Model != "test-model" || !b.Stream || b.StreamOptions == nil || !b.StreamOptions.IncludeUsage || b.MaxTokens != 100 {
		t.Errorf("body = %+v", b)
	}
	if b.Temperature == nil || *b.Temperature != 0.5 {
		t.Errorf("temperature = %v", b.Temperature)
	}
	if len(b.Messages) != 4 || b.Messages[1].Name != "alice" || b.Messages[2].ToolCalls[0].Function.Arguments != `{"timezone":"UTC"}` ||
		b.Messages[2].ToolCalls[0].Type != "function" || b.Messages[3].ToolCallID != "call_1" {
		t.Errorf("messages = %+v", b.Messages)
	}
	if len(b.Tools) != 2 || string(b.Tools[1].Function.Parameters) != `{"type":"object","properties":{}}` || b.Tools[0].Type != "function" {
		t.Errorf("tools = %+v", b.Tools)
	}
}

// TestOpenAIResponseSchema: a request with ResponseSchema asks for
// structured output (response_format json_schema); one without sends none.
func TestOpenAIResponseSchema(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text(`{"a":1}`), llmtest.Text("free"))
	m := testModel(t, srv)
	schema := json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`)
	req := &agents.Request{
		Messages:       []agents.Message{{Role: agents.RoleUser, Content: "give a"}},
		ResponseSchema: &agents.ResponseSchema{Name: "answer", Schema: schema, Strict: true},
	}
	if _, err := agents.Complete(t.Context(), m, req, nil); err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(srv.LastRequest(t).Body.Fields["response_format"], &rf); err != nil {
		t.Fatalf("response_format: %v", err)
	}
	if rf.Type != "json_schema" || rf.JSONSchema.Name != "answer" || !rf.JSONSchema.Strict || string(rf.JSONSchema.Schema) != string(schema) {
		t.Errorf("response_format = %+v", rf)
	}
	req.ResponseSchema = nil
	if _, err := agents.Complete(t.Context(), m, req, nil); err != nil {
		t.Fatal(err)
	}
	if f, ok := srv.LastRequest(t).Body.Fields["response_format"]; ok {
		t.Errorf("response_format sent without a schema: %s", f)
	}
}

func TestOpenAIErrors(t *testing.T) {
	testModelErrors(t, agents.ProviderOpenAI, []modelErrorCase{
		{name: "HTTP 500", reply: llmtest.HTTPError(500, "the engine is on fire"), kind: agents.ErrorHTTP, status: 500, retryable: true, message: "HTTP 500 Internal Server Error: the engine is on fire"},
		{name: "HTTP 401", reply: llmtest.HTTPError(401, "Incorrect API key provided"), kind: agents.ErrorHTTP, status: 401, message: "HTTP 401 Unauthorized: Incorrect API key provided"},
		{name: "HTTP 401 echoing the key", reply: llmtest.HTTPError(401, "Incorrect API key provided: "+testKey), kind: agents.ErrorHTTP, status: 401, message: "Incorrect API key provided: [REDACTED]"},
		{name: "HTTP 403 echoing another credential", reply: llmtest.Reply{Status: 403, Body: `{"detail":"upstream refused Authorization: Bearer upstream-token-0123456789"}`}, kind: agents.ErrorHTTP, status: 403, message: "upstream refused Authorization: [REDACTED]"},
		{name: "HTTP 429", reply: llmtest.HTTPError(429, "Rate limit reached"), kind: agents.ErrorHTTP, status: 429, retryable: true, message: "HTTP 429 Too Many Requests: Rate limit reached"},
		{name: "HTTP 502 with a non-JSON body", reply: llmtest.Reply{Status: 502, Body: "<html>bad gateway</html>"}, kind: agents.ErrorHTTP, status: 502, retryable: true, message: "HTTP 502 Bad Gateway: <html>bad gateway</html>"},
		{name: "HTTP 400 with an empty body", reply: llmtest.Reply{Status: 400, Body: " "}, kind: agents.ErrorHTTP, status: 400, message: "HTTP 400 Bad Request: (empty body)"},
		{name: "deadline before the headers", reply: llmtest.Text("late").WithDelay(5 * time.Second), timeout: 100 * time.Millisecond, kind: agents.ErrorTimeout, retryable: true, message: "deadline", is: context.DeadlineExceeded},
		{name: "deadline during the stream", reply: llmtest.Text("a", "b", "c").WithChunkDelay(5 * time.Second), timeout: 200 * time.Millisecond, kind: agents.ErrorTimeout, retryable: true, message: "deadline", is: context.DeadlineExceeded},
		{name: "server silent past the request timeout", reply: llmtest.Text("a", "b").WithChunkDelay(5 * time.Second), spec: func(s *agents.ModelSpec) { s.RequestTimeout = 150 * time.Millisecond }, kind: agents.ErrorTimeout, retryable: true, message: "sent nothing for 150ms", is: context.DeadlineExceeded},
		{name: "invalid JSON chunk", reply: llmtest.Garbage(`data: {"id": "x", "choices": [`), kind: agents.ErrorProtocol, message: "invalid JSON"},
		{name: "chunk of the wrong shape", reply: llmtest.Garbage(`data: {"choices": "many"}`), kind: agents.ErrorProtocol, message: "invalid JSON"},
		{name: "not an event stream", reply: llmtest.Reply{EmptyChoices: true, Garbage: []string{"<html>", "<body>hello</body>", "</html>"}}, kind: agents.ErrorProtocol, message: "no choices"},
		{name: "truncated stream", reply: llmtest.Text("Hello", " wor").Truncated(), kind: agents.ErrorProtocol, retryable: true, message: "truncated", is: io.ErrUnexpectedEOF},
		{name: "empty choices", reply: llmtest.Reply{EmptyChoices: true}, kind: agents.ErrorProtocol, message: "no choices"},
		{name: "error object in the stream", reply: llmtest.Garbage(`data: {"error": {"message": "model overloaded", "type": "server_error"}}`), kind: agents.ErrorServer, retryable: true, message: "model overloaded"},
	})
}

func TestOpenAICancelAndClose(t *testing.T) {
	t.Run("cancelled mid-stream", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.Text("a", "b", "c").WithChunkDelay(5*time.Second))
		m := testModel(t, srv)
		ctx, cancel := context.WithCancel(t.Context())
		s, err := m.Stream(ctx, userPrompt("hi"))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Recv(); err != nil { // the first delta arrives at once
			t.Fatal(err)
		}
		cancel()
		_, err = collect(t, s)
		var me *agents.ModelError
		if !errors.As(err, &me) || me.Kind != agents.ErrorCancelled || !errors.Is(err, context.Canceled) || me.Retryable {
			t.Fatalf("error = %v, want a cancelled *ModelError", err)
		}
	})
	t.Run("server closed mid-stream", func(t *testing.T) {
		srv := llmtest.NewServer(t, llmtest.Text("a", "b").WithChunkDelay(5*time.Second))
		m := testModel(t, srv)
		s, err := m.Stream(t.Context(), userPrompt("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		_, err = collect(t, s)
		t.Logf("error: %v", err)
		var me *agents.ModelError
		if !errors.As(err, &me) || !me.Retryable {
			t.Fatalf("error = %v, want a retryable *ModelError", err)
		}
	})
}

// TestOpenAISlowConsumer checks that the request timeout measures the
// server's silence, not the time the caller takes between events.
func TestOpenAISlowConsumer(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text("a", "b", "c"))
	m := testModel(t, srv, func(s *agents.ModelSpec) { s.RequestTimeout = 50 * time.Millisecond })
	var text strings.Builder
	c, err := agents.Complete(t.Context(), m, userPrompt("hi"), func(d string) {
		time.Sleep(120 * time.Millisecond)
		text.WriteString(d)
	})
	if err != nil || c.Text != "abc" || text.String() != "abc" {
		t.Fatalf("Complete = %+v, %v", c, err)
	}
}

func TestNewModel(t *testing.T) {
	cases := []struct {
		name    string
		spec    agents.ModelSpec
		wantErr string
	}{
		{name: "openai", spec: agents.ModelSpec{Provider: "openai", Model: "gpt-4o-mini"}},
		{name: "provider defaults to openai", spec: agents.ModelSpec{Model: "llama3", BaseURL: "http://localhost:11434/v1"}},
		{name: "echo", spec: agents.ModelSpec{Provider: "echo"}},
		{name: "openai without model", spec: agents.ModelSpec{Provider: "openai"}, wantErr: "no model name"},
		{name: "bad base url", spec: agents.ModelSpec{Model: "m", BaseURL: "localhost:11434"}, wantErr: "not an http(s) URL"},
		{name: "anthropic", spec: agents.ModelSpec{Provider: "anthropic", Model: "claude-sonnet-4-5"}},
		{name: "anthropic without model", spec: agents.ModelSpec{Provider: "anthropic"}, wantErr: "no model name"},
		{name: "anthropic bad base url", spec: agents.ModelSpec{Provider: "anthropic", Model: "m", BaseURL: "api.anthropic.com"}, wantErr: "not an http(s) URL"},
		{name: "unknown provider", spec: agents.ModelSpec{Provider: "claude", Model: "m"}, wantErr: `unknown provider "claude"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := agents.NewModel(tc.spec)
			if tc.wantErr == "" {
				if err != nil || m == nil {
					t.Fatalf("NewModel = %v, %v", m, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestModelSpecNeverShowsKey(t *testing.T) {
	spec := agents.ModelSpec{Model: "m", APIKey: testKey}.WithDefaults()
	var b strings.Builder
	l := zlog(&b)
	l.Info().Object("model", spec).Msg("x")
	for _, s := range []string{spec.String(), b.String(), sprintf("%v", spec), sprintf("%+v", spec), sprintf("%#v", spec)} {
		if strings.Contains(s, "SECRET") {
			t.Errorf("spec shows its key: %s", s)
		}
	}
	if !strings.Contains(b.String(), `"api_key_set":true`) || spec.ContextWindow != agents.DefaultContextWindow || spec.BaseURL != agents.DefaultBaseURL {
		t.Errorf("log = %s, spec = %v", b.String(), spec)
	}

	// A gateway token in the base URL's path or query is not shown either.
	gw := agents.ModelSpec{Model: "m", BaseURL: "https://gw.example.org/acct-tok123/v1?k=qtok456"}.WithDefaults()
	b.Reset()
	l.Info().Object("model", gw).Msg("x")
	for _, s := range []string{gw.String(), b.String(), sprintf("%+v", gw), sprintf("%#v", gw)} {
		if strings.Contains(s, "tok123") || strings.Contains(s, "qtok456") {
			t.Errorf("spec shows its base URL's path or query: %s", s)
		}
	}
	if !strings.Contains(b.String(), `"base_url":"https://gw.example.org/…"`) {
		t.Errorf("log = %s", b.String())
	}
}

func TestOpenAIImageParts(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nnot really a png")
	tests := []struct {
		name      string
		msg       agents.Message
		wantParts []llmtest.Part // nil: content is a plain string
		wantText  string
	}{{
		name:     "text only stays a string",
		msg:      agents.Message{Role: agents.RoleUser, Content: "hello"},
		wantText: "hello",
	}, {
		name: "text and image",
		msg:  agents.Message{Role: agents.RoleUser, Content: "what is this?", Images: []agents.Image{{MimeType: "image/png", Data: png}}},
		wantParts: []llmtest.Part{
			{Type: "text", Text: "what is this?"},
			{Type: "image_url", ImageURL: "data:image/png;base64,iVBORw0KGgpub3QgcmVhbGx5IGEgcG5n"},
		},
		wantText: "what is this?",
	}, {
		name: "image without text, two images",
		msg: agents.Message{Role: agents.RoleUser, Images: []agents.Image{
			{MimeType: "image/jpeg", Data: []byte{0xff, 0xd8, 0xff}}, {MimeType: "image/webp", Data: []byte("RIFF")},
		}},
		wantParts: []llmtest.Part{
			{Type: "image_url", ImageURL: "data:image/jpeg;base64,/9j/"},
			{Type: "image_url", ImageURL: "data:image/webp;base64,UklGRg=="},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, llmtest.Text("ok"))
			m := testModel(t, srv)
			req := &agents.Request{Messages: []agents.Message{{Role: agents.RoleSystem, Content: "sys"}, tt.msg}}
			if _, err := agents.Complete(t.Context(), m, req, nil); err != nil {
				t.Fatal(err)
			}
			got := srv.LastRequest(t)
			if parts := got.LastUserParts(); !reflect.DeepEqual(parts, tt.wantParts) {
				t.Errorf("parts = %+v, want %+v", parts, tt.wantParts)
			}
			if got.LastUser() != tt.wantText {
				t.Errorf("text = %q, want %q", got.LastUser(), tt.wantText)
			}
			if len(tt.msg.Images) > 0 {
				if raw, _ := json.Marshal(tt.msg); strings.Contains(string(raw), "base64") || strings.Contains(string(raw), "Images") {
					t.Errorf("the message's JSON form carries its images: %s", raw)
				}
			}
		})
	}
}
