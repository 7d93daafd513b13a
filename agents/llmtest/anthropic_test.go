package llmtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/agents/llmtest"
)

// postMessages posts a request to the Messages API of the server at root.
func postMessages(t *testing.T, root, body string) (*http.Response, []byte) {
	t.Helper()
	return postTo(t, root+"/v1/messages", body)
}

const messagesBody = `{"model":"claude","max_tokens":100,"stream":true,"system":[{"type":"text","text":"sys","cache_control":{"type":"ephemeral"}}],` +
	`"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"clock","input_schema":{"type":"object"}}]}`

// The Anthropic side of the same scripts, byte for byte.
func TestAnthropicWireGolden(t *testing.T) {
	calls := llmtest.Calls(
		llmtest.ToolCall("toolu_1", "clock", `{"timezone":"Europe/Berlin"}`).WithPieces(3),
		llmtest.ToolCall("", "room_info", `{}`),
	).WithText("Checking.").WithCachedUsage(30, 20, 12)
	testWire(t, func(srv *llmtest.Server) string { return srv.RootURL + "/v1/messages" }, []wireCase{
		{name: "anthropic_stream_tool_use", reply: calls, body: messagesBody, status: 200, ctype: "text/event-stream"},
		{name: "anthropic_stream_text", reply: llmtest.Text("a", "b").WithFinish("length").WithUsage(5, 2), body: messagesBody, status: 200, ctype: "text/event-stream"},
		{name: "anthropic_stream_error", reply: llmtest.Text("a").WithStreamError("overloaded_error", "Overloaded"), body: messagesBody, status: 200, ctype: "text/event-stream"},
		{name: "anthropic_stream_truncated", reply: llmtest.Text("a").Truncated(), body: messagesBody, status: 200, ctype: "text/event-stream"},
		{name: "anthropic_complete_tool_use", reply: calls, body: `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`, status: 200, ctype: "application/json"},
		{name: "anthropic_error_401", reply: llmtest.HTTPError(401, "invalid x-api-key"), body: messagesBody, status: 401, ctype: "application/json"},
		{name: "anthropic_error_529", reply: llmtest.HTTPError(529, "Overloaded"), body: messagesBody, status: 529, ctype: "application/json"},
	})
}

// Every event is an "event:" line naming its type, one "data:" line of
// JSON with the same "type", and a blank line; the stream opens with
// message_start and closes with message_stop; the input_json_delta pieces
// join to the arguments.
func TestAnthropicStreamIsValidSSE(t *testing.T) {
	args := `{"a":"` + strings.Repeat("x", 50) + `"}`
	srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("c", "clock", args).WithPieces(9)).WithText(llmtest.Split("héllo wörld 🌍", 5)...))
	_, body := postMessages(t, srv.RootURL, messagesBody)
	events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	var types []string
	var got strings.Builder
	for i, ev := range events {
		name, data, ok := strings.Cut(ev, "\n")
		name, ok1 := strings.CutPrefix(name, "event: ")
		data, ok2 := strings.CutPrefix(data, "data: ")
		if !ok || !ok1 || !ok2 || strings.Contains(data, "\n") {
			t.Fatalf("event %d is not an event line and one data line: %q", i, ev)
		}
		var e struct {
			Type  string `json:"type"`
			Delta struct {
				Type        string `json:"type"`
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil || e.Type != name {
			t.Fatalf("event %d: type %q under event %q (%v)", i, e.Type, name, err)
		}
		if e.Delta.Type == "input_json_delta" {
			got.WriteString(e.Delta.PartialJSON)
		}
		types = append(types, name)
	}
	if got.String() != args {
		t.Errorf("arguments reassembled = %q", got.String())
	}
	if types[0] != "message_start" || types[len(types)-1] != "message_stop" || types[len(types)-2] != "message_delta" {
		t.Errorf("event order %q", types)
	}
	// start + text block (start, ping, 5 deltas, stop) + tool block (start, 9 deltas, stop) + delta + stop
	if n := len(events); n != 1+(1+1+5+1)+(1+9+1)+1+1 {
		t.Errorf("%d events: %q", n, types)
	}
}

// An anthropic request is recorded as sent and in the common form, so the
// matchers work on it.
func TestAnthropicRequestTranslation(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.On(llmtest.SystemContains("You are claude"), llmtest.Text("routed"))
	body := `{"model":"claude","max_tokens":100,"stream":true,"temperature":0.5,` +
		`"system":[{"type":"text","text":"You are claude.","cache_control":{"type":"ephemeral"}},{"type":"text","text":" Volatile."}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"time?"}]},` +
		`{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"t1","name":"clock","input":{"tz":"UTC"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"12:00"}],"cache_control":{"type":"ephemeral"}},{"type":"text","text":"and?"}]}],` +
		`"tools":[{"name":"clock","description":"time","input_schema":{"type":"object"}}]}`
	resp, _ := postMessages(t, srv.RootURL, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	r := srv.LastRequest(t)
	if r.Format != llmtest.FormatAnthropic || r.Route != 0 || r.Body.Model != "claude" || r.Body.MaxTokens != 100 || !r.Body.Stream || *r.Body.Temperature != 0.5 {
		t.Errorf("request %+v", r)
	}
	if r.System() != "You are claude. Volatile." || r.LastUser() != "and?" || !r.HasTool("clock") {
		t.Errorf("system %q, last user %q", r.System(), r.LastUser())
	}
	msgs := r.Body.Messages
	if len(msgs) != 5 || msgs[2].Role != "assistant" || msgs[2].Content != "Checking." || msgs[2].ToolCalls[0].Function.Arguments != `{"tz":"UTC"}` ||
		msgs[3].Role != "tool" || msgs[3].ToolCallID != "t1" || msgs[3].Content != "12:00" || msgs[4].Content != "and?" {
		t.Errorf("common form %+v", msgs)
	}
	if bps := r.CacheBreakpoints(); len(bps) != 2 || bps[0] != "system[0]" || bps[1] != "messages[2].content[0]" {
		t.Errorf("breakpoints %q", bps)
	}
	if !bytes.Equal(r.MessagesJSON(), json.RawMessage(body[strings.Index(body, `[{"role":"user"`):strings.Index(body, `,"tools"`)])) {
		t.Errorf("messages JSON not as sent: %s", r.MessagesJSON())
	}
}
