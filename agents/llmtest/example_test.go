package llmtest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
)

// A script is a queue of replies; a route answers the requests its matcher
// picks, so two callers can be scripted independently. The client under
// test is pointed at srv.URL. Tests use NewServer(t, …), which also closes
// the server and fails the test on requests nothing answered.
func Example() {
	srv := llmtest.New()
	defer srv.Close()
	// Requests that offer the current_time tool get a tool call, then text.
	srv.On(llmtest.HasTool("current_time"),
		llmtest.Calls(llmtest.ToolCall("call_1", "current_time", `{"timezone":"UTC"}`).WithPieces(3)),
		llmtest.Text("It is ", "noon."),
	)
	// Everything else (here: a router asking which agent should answer).
	srv.Script(llmtest.Text("assistant"))

	model, _ := agents.NewModel(agents.ModelSpec{BaseURL: srv.URL, Model: "test"})
	ctx := context.Background()

	route, _ := agents.Complete(ctx, model, &agents.Request{Messages: []agents.Message{
		{Role: agents.RoleUser, Content: "Which agent should answer?"},
	}}, nil)
	fmt.Println("router:", route.Text)

	tools, _ := agents.NewToolset(agents.CurrentTime{})
	res, err := agents.Run(ctx, agents.RunRequest{
		Model:    model,
		Messages: []agents.Message{{Role: agents.RoleUser, Content: "What time is it?"}},
		Tools:    tools,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("agent:", res.Text, "after", res.ToolTrace[0].Tool)

	reqs := srv.Requests()
	fmt.Println("requests:", len(reqs))
	last := reqs[len(reqs)-1]
	fmt.Println("last request ends with a", last.Body.Messages[len(last.Body.Messages)-1].Role, "message")
	// Output:
	// router: assistant
	// agent: It is noon. after current_time
	// requests: 3
	// last request ends with a tool message
}

// The server speaks the wire format itself: any HTTP client can use it.
func Example_wireFormat() {
	srv := llmtest.New()
	defer srv.Close()
	srv.Script(llmtest.Text("Hi", "!").WithUsage(5, 2))

	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`
	resp, err := http.Post(srv.URL+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	fmt.Print(string(out))
	// Output:
	// data: {"id":"chatcmpl-llmtest-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}
	//
	// data: {"id":"chatcmpl-llmtest-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}
	//
	// data: {"id":"chatcmpl-llmtest-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{"content":"!"},"finish_reason":null}],"usage":null}
	//
	// data: {"id":"chatcmpl-llmtest-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}
	//
	// data: {"id":"chatcmpl-llmtest-1","object":"chat.completion.chunk","created":1767225600,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}
	//
	// data: [DONE]
}

// The same script answers an Anthropic client: give it RootURL.
func Example_anthropic() {
	srv := llmtest.New()
	defer srv.Close()
	srv.Script(
		llmtest.Calls(llmtest.ToolCall("toolu_1", "current_time", `{"timezone":"UTC"}`).WithPieces(2)),
		llmtest.Text("It is ", "noon."),
	)
	model, _ := agents.NewModel(agents.ModelSpec{Provider: agents.ProviderAnthropic, BaseURL: srv.RootURL, Model: "claude-test"})
	tools, _ := agents.NewToolset(agents.CurrentTime{})
	res, err := agents.Run(context.Background(), agents.RunRequest{
		Model:    model,
		Messages: []agents.Message{{Role: agents.RoleUser, Content: "What time is it?"}},
		Tools:    tools,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("agent:", res.Text, "after", res.ToolTrace[0].Tool)
	last := srv.Requests()[1]
	fmt.Println(last.Format, last.Path)
	result := last.Anthropic.Messages[2].Content[0]
	fmt.Println("the tool's result went back as a", result.Type, "for", result.ToolUseID)
	// Output:
	// agent: It is noon. after current_time
	// anthropic /v1/messages
	// the tool's result went back as a tool_result for toolu_1
}
