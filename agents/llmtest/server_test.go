package llmtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents/llmtest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// postTo posts body to url and returns the response and its body.
func postTo(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

// post posts a chat completion request to the OpenAI-style API at url.
func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	return postTo(t, url+"/chat/completions", body)
}

// wireCase is a scripted reply, the request body that fetches it, and
// what the answer must be: its status, content type and the bytes in
// testdata/<name>.golden.
type wireCase struct {
	name   string
	reply  llmtest.Reply
	body   string
	status int
	ctype  string
}

// testWire posts each case's body to endpoint (of a server scripted with
// the case's reply) and compares the answer with its golden file; -update
// rewrites the golden files.
func testWire(t *testing.T, endpoint func(*llmtest.Server) string, cases []wireCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, tc.reply)
			resp, got := postTo(t, endpoint(srv), tc.body)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.ctype {
				t.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("body differs from %s:\n%s", path, got)
			}
		})
	}
}

const streamBody = `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"clock","parameters":{"type":"object"}}}]}`

func TestWireGolden(t *testing.T) {
	calls := llmtest.Calls(
		llmtest.ToolCall("call_1", "clock", `{"timezone":"Europe/Berlin"}`).WithPieces(3),
		llmtest.ToolCall("call_2", "room_info", `{}`),
	).WithText("Checking.").WithUsage(30, 12)
	testWire(t, func(srv *llmtest.Server) string { return srv.URL + "/chat/completions" }, []wireCase{
		{name: "stream_tool_calls", reply: calls, body: streamBody, status: 200, ctype: "text/event-stream"},
		{name: "stream_without_usage", reply: llmtest.Text("a", "b"), body: `{"model":"m","stream":true,"messages":[]}`, status: 200, ctype: "text/event-stream"},
		{name: "stream_truncated", reply: llmtest.Text("a").Truncated(), body: streamBody, status: 200, ctype: "text/event-stream"},
		{name: "stream_garbage", reply: llmtest.Garbage("data: {oops", ": comment", "event: nonsense"), body: streamBody, status: 200, ctype: "text/event-stream"},
		{name: "complete_tool_calls", reply: calls, body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, status: 200, ctype: "application/json"},
		{name: "complete_text", reply: llmtest.Text("Hello", " there"), body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, status: 200, ctype: "application/json"},
		{name: "error_429", reply: llmtest.HTTPError(429, "slow down"), body: streamBody, status: 429, ctype: "application/json"},
	})
}

// TestStreamIsValidSSE checks the framing a client relies on: every event
// is one "data: " line followed by a blank line, each payload but the last
// is JSON, and the last is [DONE].
func TestStreamIsValidSSE(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("c", "clock", `{"a":"`+strings.Repeat("x", 50)+`"}`).WithPieces(9)).WithText(llmtest.Split("héllo wörld 🌍", 5)...))
	_, body := post(t, srv.URL, streamBody)
	events := strings.Split(strings.TrimSuffix(string(body), "\n\n"), "\n\n")
	var args strings.Builder
	for i, ev := range events {
		payload, ok := strings.CutPrefix(ev, "data: ")
		if !ok || strings.Contains(payload, "\n") {
			t.Fatalf("event %d is not one data line: %q", i, ev)
		}
		if i == len(events)-1 {
			if payload != "[DONE]" {
				t.Fatalf("last event = %q", payload)
			}
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int `json:"index"`
						Function struct {
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(payload), &c); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
		}
	}
	if args.String() != `{"a":"`+strings.Repeat("x", 50)+`"}` {
		t.Errorf("arguments reassembled = %q", args.String())
	}
	if n := len(events); n != 1+5+1+9+1+1+1 {
		t.Errorf("%d events, want role + 5 text + call head + 9 pieces + finish + usage + done", n)
	}
}

func TestRoutesAndRecording(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text("default 1"), llmtest.Text("default 2"))
	srv.On(llmtest.SystemContains("You are the router"), llmtest.Text("route a"))
	srv.On(llmtest.HasTool("clock"), llmtest.Text("tools 1"), llmtest.Text("tools 2"))
	cases := []struct {
		name  string
		body  string
		want  string
		route int
	}{
		{name: "router route", body: `{"model":"m","messages":[{"role":"system","content":"You are the router."},{"role":"user","content":"x"}]}`, want: "route a", route: 0},
		{name: "router route is used up: default", body: `{"model":"m","messages":[{"role":"system","content":"You are the router."}]}`, want: "default 1", route: -1},
		{name: "tool route", body: streamBody, want: "tools 1", route: 1},
		{name: "no route matches", body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"multi"},{"type":"text","text":"part"}]}]}`, want: "default 2", route: -1},
		{name: "tool route again", body: streamBody, want: "tools 2", route: 1},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Replace(tc.body, `"stream":true,`, "", 1)
			_, out := post(t, srv.URL, body)
			var c struct {
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(out, &c); err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content != tc.want {
				t.Fatalf("reply = %s (%v), want %q", out, err, tc.want)
			}
			req := srv.Requests()[i]
			if req.Route != tc.route || string(req.Raw) != body || req.Path != "/v1/chat/completions" {
				t.Errorf("recorded %+v", req)
			}
		})
	}
	reqs := srv.Requests()
	if got := reqs[3].LastUser(); got != "multipart" {
		t.Errorf("multi-part content = %q", got)
	}
	if srv.Pending() != 0 || srv.Count() != 5 || srv.Unscripted() != 0 {
		t.Errorf("pending %d, count %d, unscripted %d", srv.Pending(), srv.Count(), srv.Unscripted())
	}
}

func TestUnscriptedAndBadRequests(t *testing.T) {
	srv := llmtest.New()
	defer srv.Close()
	resp, body := post(t, srv.URL, `{"model":"m","messages":[]}`)
	if resp.StatusCode != 500 || !strings.Contains(string(body), "no scripted reply") || srv.Unscripted() != 1 {
		t.Errorf("unscripted: %d %s, count %d", resp.StatusCode, body, srv.Unscripted())
	}
	srv.Script(llmtest.Text("kept"))
	resp, body = post(t, srv.URL, `{"model":`)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "not valid JSON") || srv.Pending() != 1 {
		t.Errorf("bad JSON: %d %s, pending %d", resp.StatusCode, body, srv.Pending())
	}
	if reqs := srv.Requests(); len(reqs) != 2 || reqs[1].DecodeErr == nil {
		t.Errorf("bad request not recorded: %+v", reqs)
	}
	r, err := http.Get(srv.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	models, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(models), `"id":"llmtest"`) {
		t.Errorf("models = %s", models)
	}
}

func TestInstantAndFallback(t *testing.T) {
	srv := llmtest.NewServerWith(t, []llmtest.Option{llmtest.Instant(), llmtest.WithFallback(llmtest.Text("again").WithDelay(time.Hour))})
	for range 3 {
		if _, body := post(t, srv.URL, streamBody); !bytes.Contains(body, []byte(`"again"`)) {
			t.Fatalf("body = %s", body)
		}
	}
	if srv.Count() != 3 || len(srv.Requests()) != 0 {
		t.Errorf("count %d, recorded %d", srv.Count(), len(srv.Requests()))
	}
}

func TestDelayEndsWithTheClient(t *testing.T) {
	srv := llmtest.NewServer(t, llmtest.Text("late").WithDelay(time.Hour))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/chat/completions", strings.NewReader(streamBody))
	start := time.Now()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("no error")
	}
	srv.Close() // waits for the handler: it must have given up
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("handler kept waiting for %v", d)
	}
}

// A held reply answers only once it is released; before that, the request
// is counted and waits.
func TestHoldUntilReleased(t *testing.T) {
	release := make(chan struct{})
	srv := llmtest.NewServer(t, llmtest.Text("released").WithHold(release))
	done := make(chan []byte, 1)
	go func() {
		_, body := post(t, srv.URL, streamBody)
		done <- body
	}()
	for srv.Count() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the held reply answered before it was released")
	default:
	}
	close(release)
	if body := <-done; !bytes.Contains(body, []byte(`"released"`)) {
		t.Errorf("body = %s", body)
	}
}

func TestSplit(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want []string
	}{
		{"abcdef", 3, []string{"ab", "cd", "ef"}},
		{"abc", 5, []string{"a", "b", "c"}},
		{"héllo", 2, []string{"hé", "llo"}},
		{"x", 0, []string{"x"}},
		{"", 3, []string{""}},
	}
	for _, tc := range cases {
		got := llmtest.Split(tc.s, tc.n)
		if strings.Join(got, "|") != strings.Join(tc.want, "|") || strings.Join(got, "") != tc.s {
			t.Errorf("Split(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
