// Command stdioserver is a tiny MCP stdio server for the mcp package's
// tests, written with the Go SDK. Its behaviour is chosen by flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type textArgs struct {
	Text string `json:"text,omitempty"`
}

type sleepArgs struct {
	MS int `json:"ms,omitempty"`
}

func main() {
	exitAtStart := flag.Bool("exit-at-start", false, "exit with status 3 before serving")
	flag.Parse()
	if *exitAtStart {
		fmt.Fprintln(os.Stderr, "stdioserver: told to exit at start")
		os.Exit(3)
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "stdioserver", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Returns the text."},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + a.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Reports an error."},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "failed: " + a.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleeps ms milliseconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a sleepArgs) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(a.MS) * time.Millisecond):
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "slept"}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exits the process."},
		func(context.Context, *mcp.CallToolRequest, textArgs) (*mcp.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "stdioserver: crashing on request")
			os.Exit(4)
			return nil, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool", Description: "Adds a tool named text (tools/list_changed)."},
		func(_ context.Context, _ *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: a.Text, Description: "added at run time"},
				func(context.Context, *mcp.CallToolRequest, textArgs) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added tool ran"}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added " + a.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "env", Description: "Returns the environment."},
		func(context.Context, *mcp.CallToolRequest, textArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "bad.name", Description: "A name models cannot call."},
		func(context.Context, *mcp.CallToolRequest, textArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "stdioserver:", err)
		os.Exit(1)
	}
}
