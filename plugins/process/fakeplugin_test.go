package process_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// The test binary doubles as the plugins under test: with
// HOOKROOM_TEST_PLUGIN=<mode> in its environment it speaks the protocol
// (written against jsonrpc and protocol directly, not the SDK) and
// misbehaves as the mode says.
func TestMain(m *testing.M) {
	if mode := os.Getenv("HOOKROOM_TEST_PLUGIN"); mode != "" {
		os.Exit(fakePlugin(mode))
	}
	os.Exit(m.Run())
}

// The hooks the "ok" plugin declares.
var okHooks = []protocol.HookDecl{
	{Event: "message:received", Name: "suppress_spam"},
	{Event: "message:enrich", Name: "enrich", Priority: ptr(20)},
	{Event: "message:before_response", Name: "footer"},
	{Event: "tool:before_call", Name: "guard", FailurePolicy: "closed"},
	{Event: "message:claim", Name: "claim"},
	{Event: "schedule:fired", Name: "sched", TimeoutMS: 500},
	{Event: "test:callbacks", Name: "callbacks"},
	{Event: "test:emitted", Name: "emitted"},
	{Event: "message:after_response", Name: "attachments"},
}

func ptr[T any](v T) *T { return &v }

func fakePlugin(mode string) int {
	switch mode {
	case "exit_at_start":
		fmt.Fprintln(os.Stderr, "fatal: cannot read my configuration")
		return 1
	case "sleep":
		time.Sleep(time.Hour)
		return 0
	case "ignore_term":
		signal.Ignore(syscall.SIGTERM)
	case "flood":
		go func() {
			line := strings.Repeat("x", 100)
			for i := 0; ; i++ {
				fmt.Fprintf(os.Stderr, "flood line %d %s\n", i, line)
			}
		}()
	case "garbage":
		fmt.Println("Hello! I am a plugin that prints to stdout.")
		fmt.Println(`{"almost": "json-rpc"}`)
	case "spawn_child":
		child := exec.Command(os.Args[0])
		child.Env = []string{"HOOKROOM_TEST_PLUGIN=sleep"}
		if err := child.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = os.WriteFile("child.pid", []byte(fmt.Sprint(child.Process.Pid)), 0o600)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The handler can run before NewConn returns (the host writes first).
	var conn atomic.Pointer[jsonrpc.Conn]
	ready := make(chan struct{})
	h := jsonrpc.HandlerFunc(func(rctx context.Context, req *jsonrpc.Request) (any, error) {
		<-ready
		return fakeServe(rctx, conn.Load(), mode, req, cancel)
	})
	// A pollable stdin, as the SDK makes it (see plugins/sdk).
	in := os.Stdin
	if syscall.SetNonblock(0, true) == nil {
		in = os.NewFile(0, "/dev/stdin")
	}
	conn.Store(jsonrpc.NewConn(in, os.Stdout, h, jsonrpc.Options{}))
	close(ready)
	select {
	case <-conn.Load().Done():
	case <-ctx.Done():
	}
	if mode == "ignore_term" {
		time.Sleep(time.Hour) // ignores stdin EOF and SIGTERM alike
	}
	return 0
}

func fakeServe(ctx context.Context, conn *jsonrpc.Conn, mode string, req *jsonrpc.Request, stop func()) (any, error) {
	switch req.Method {
	case protocol.MethodInitialize:
		var p protocol.InitializeParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		if mode == "exit_after_init" {
			go func() {
				time.Sleep(20 * time.Millisecond)
				fmt.Fprintln(os.Stderr, "giving up right after start")
				os.Exit(1)
			}()
		}
		version := protocol.APIVersion
		if mode == "bad_version" {
			version = 2
		}
		return protocol.InitializeResult{
			APIVersion: version, Name: p.Plugin, Version: "0.0.1-" + mode, Hooks: okHooks,
			Tools: []protocol.ToolDecl{
				{Name: "echo", Description: "returns its arguments", Parameters: json.RawMessage(`{"type":"object"}`)},
				{Name: "emit_tool", Description: "emits test:emitted"},
				{Name: "env", Description: "reports the environment and working directory"},
				{Name: "read", Description: `reads {"path": …} and answers "ok" or the error`},
				{Name: "write", Description: `writes {"path": …} and answers "ok" or the error`},
			},
		}, nil
	case protocol.MethodShutdown:
		if mode != "ignore_term" {
			go func() {
				time.Sleep(10 * time.Millisecond)
				stop()
			}()
		}
		return struct{}{}, nil
	case protocol.MethodPing:
		return struct{}{}, nil
	case protocol.MethodHookInvoke:
		return fakeHook(ctx, conn, mode, req)
	case protocol.MethodToolCall:
		var p protocol.ToolCallParams
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		switch p.Tool {
		case "echo":
			return protocol.ToolCallResult{Content: string(p.Arguments)}, nil
		case "emit_tool":
			_, err := conn.Call(ctx, protocol.MethodEmit, protocol.EmitParams{Invocation: p.Invocation, Event: "test:emitted", Payload: json.RawMessage(`{"from":"tool"}`)})
			if err != nil {
				return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "emit: %v", err)
			}
			return protocol.ToolCallResult{Content: "emitted"}, nil
		case "read", "write":
			var a struct{ Path string }
			if err := json.Unmarshal(p.Arguments, &a); err != nil {
				return nil, err
			}
			var err error
			if p.Tool == "read" {
				_, err = os.ReadFile(a.Path)
			} else {
				err = os.WriteFile(a.Path, []byte("x"), 0o600)
			}
			if err != nil {
				return protocol.ToolCallResult{Content: err.Error()}, nil
			}
			return protocol.ToolCallResult{Content: "ok"}, nil
		case "env":
			wd, _ := os.Getwd()
			out, _ := json.Marshal(map[string]any{"env": os.Environ(), "wd": wd})
			return protocol.ToolCallResult{Content: string(out)}, nil
		}
		return nil, jsonrpc.Errorf(protocol.CodeUnknownHook, "no tool %s", p.Tool)
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no method %s", req.Method)
}

func fakeHook(ctx context.Context, conn *jsonrpc.Conn, mode string, req *jsonrpc.Request) (any, error) {
	var p protocol.HookInvokeParams
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, err
	}
	switch mode {
	case "crash", "crash_loop":
		fmt.Fprintln(os.Stderr, "panic: something broke in", p.Hook)
		os.Exit(3)
	case "hang":
		// Wedged: the whole process stops reading and answering anything,
		// pings included.
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		time.Sleep(time.Hour)
	case "late":
		time.Sleep(300 * time.Millisecond) // ignores $/cancel
	case "cancel_aware":
		select {
		case <-ctx.Done():
			fmt.Fprintln(os.Stderr, "hook cancelled by host:", ctx.Err())
			return nil, ctx.Err()
		case <-time.After(5 * time.Second):
		}
	case "garbage":
		fmt.Println("debug: handling", p.Hook)
		fmt.Println(`{"jsonrpc":"2.0","id":"nope","result":{}}`)
	case "error":
		return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "KeyError: 'dawarich_url'")
	}
	var c map[string]json.RawMessage
	if err := json.Unmarshal(p.Context, &c); err != nil {
		return nil, err
	}
	var result any = map[string]any{}
	switch p.Hook {
	case "suppress_spam":
		var env struct{ Body string }
		_ = json.Unmarshal(c["envelope"], &env)
		result = map[string]any{"suppress": strings.Contains(env.Body, "spam")}
	case "enrich":
		result = map[string]any{"items": []map[string]any{{"key": "location", "text": "User is at home", "cache_policy": "stable"}}}
	case "footer":
		var d struct{ Text string }
		_ = json.Unmarshal(c["draft"], &d)
		result = map[string]any{"draft": map[string]any{"text": d.Text + "\n-- footer"}}
	case "guard":
		var args struct{ Path string }
		_ = json.Unmarshal(c["arguments"], &args)
		if strings.Contains(args.Path, "secret") {
			result = map[string]any{"declined": true, "decline_reason": "secrets stay unread"}
		}
	case "claim":
		var env struct{ Body string }
		_ = json.Unmarshal(c["envelope"], &env)
		if env.Body == "ping" {
			result = map[string]any{"claimed": map[string]any{"text": "pong"}}
		}
	case "sched":
		result = map[string]any{"message_text": "rewritten by plugin"}
	case "callbacks":
		return fakeCallbacks(ctx, conn, p)
	case "attachments":
		var r struct {
			Envelope struct {
				AttachmentIDs []string `json:"attachment_ids"`
			} `json:"envelope"`
		}
		_ = json.Unmarshal(c["result"], &r)
		return fakeAttachments(ctx, conn, p, r.Envelope.AttachmentIDs)
	case "emitted":
		var payload struct{ From string }
		_ = json.Unmarshal(c["payload"], &payload)
		_ = conn.Notify(ctx, protocol.MethodLog, protocol.LogParams{Invocation: p.Invocation, Level: "info", Message: "saw test:emitted from " + payload.From})
	}
	return map[string]any{"context": result}, nil
}

// fakeCallbacks exercises every host method from inside a hook.
func fakeCallbacks(ctx context.Context, conn *jsonrpc.Conn, p protocol.HookInvokeParams) (any, error) {
	steps := []struct {
		method string
		params any
	}{
		{protocol.MethodSendMessage, protocol.SendMessageParams{Invocation: p.Invocation, RoomID: "!room:localhost", Text: "hello from a plugin", ThreadID: "$thread:localhost"}},
		{protocol.MethodRoomStatePut, protocol.RoomStatePutParams{Invocation: p.Invocation, RoomID: "!room:localhost", EventType: "org.example.tags", StateKey: "", Content: json.RawMessage(`{"tags":["a"]}`)}},
		{protocol.MethodRoomStateGet, protocol.RoomStateGetParams{Invocation: p.Invocation, RoomID: "!room:localhost", EventType: "org.example.tags", StateKey: ptr("")}},
		{protocol.MethodRoomStateGet, protocol.RoomStateGetParams{Invocation: p.Invocation, RoomID: "!room:localhost", EventType: "org.example.tags"}},
		{protocol.MethodEmit, protocol.EmitParams{Invocation: p.Invocation, Event: "test:emitted", Payload: json.RawMessage(`{"from":"hook"}`)}},
		{protocol.MethodStateDir, struct{}{}},
	}
	var results []string
	for _, s := range steps {
		raw, err := conn.Call(ctx, s.method, s.params)
		if err != nil {
			return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "%s: %v", s.method, err)
		}
		results = append(results, string(raw))
	}
	// A missing state event and an unknown invocation are errors with codes.
	_, err := conn.Call(ctx, protocol.MethodRoomStateGet, protocol.RoomStateGetParams{Invocation: p.Invocation, RoomID: "!room:localhost", EventType: "nope", StateKey: ptr("")})
	results = append(results, fmt.Sprint(err))
	_, err = conn.Call(ctx, protocol.MethodEmit, protocol.EmitParams{Invocation: 999999, Event: "test:emitted"})
	results = append(results, fmt.Sprint(err))
	_ = conn.Notify(ctx, protocol.MethodLog, protocol.LogParams{Invocation: p.Invocation, Level: "warn", Message: "callbacks done", Fields: map[string]any{"results": results}})
	_ = os.WriteFile(filepath.Join(must(os.Getwd()), "callbacks.json"), must(json.Marshal(results)), 0o600)
	return map[string]any{"context": map[string]any{}}, nil
}

// fakeAttachments reads every attachment of the hook's message in chunks of
// 4 bytes, then asks for one that is not the message's and for an offset
// past the end; it writes what it got to attachments.json.
func fakeAttachments(ctx context.Context, conn *jsonrpc.Conn, p protocol.HookInvokeParams, ids []string) (any, error) {
	results := map[string]string{}
	for _, attID := range ids {
		var data []byte
		var last protocol.AttachmentGetResult
		for calls := 0; !last.EOF; calls++ {
			raw, err := conn.Call(ctx, protocol.MethodAttachmentGet, protocol.AttachmentGetParams{Invocation: p.Invocation, AttachmentID: attID, Offset: int64(len(data)), Length: 4})
			if err != nil || calls > 100 {
				return nil, jsonrpc.Errorf(protocol.CodeHookFailed, "%s: %v", protocol.MethodAttachmentGet, err)
			}
			last = protocol.AttachmentGetResult{}
			if err := json.Unmarshal(raw, &last); err != nil {
				return nil, err
			}
			data = append(data, last.Data...)
		}
		results[attID] = fmt.Sprintf("%s %s %s %d %q", last.Kind, last.Name, last.MimeType, last.Size, data)
	}
	_, err := conn.Call(ctx, protocol.MethodAttachmentGet, protocol.AttachmentGetParams{Invocation: p.Invocation, AttachmentID: "mxc://localhost/not-mine"})
	results["not mine"] = fmt.Sprint(err)
	if len(ids) > 0 {
		_, err = conn.Call(ctx, protocol.MethodAttachmentGet, protocol.AttachmentGetParams{Invocation: p.Invocation, AttachmentID: ids[0], Offset: 1 << 40})
		results["past the end"] = fmt.Sprint(err)
	}
	_ = os.WriteFile(filepath.Join(must(os.Getwd()), "attachments.json"), must(json.Marshal(results)), 0o600)
	return map[string]any{"context": map[string]any{}}, nil
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
