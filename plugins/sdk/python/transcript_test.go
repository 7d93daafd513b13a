package python_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/plugins/process"
)

// TestTranscript runs a short session with the Python test plugin through
// the real host, recording every protocol line: the transcript in
// docs/plugin-protocol.md comes from it. Write it out with
//
//	HOOKROOM_WRITE_TRANSCRIPT=/tmp/transcript.txt go test -run TestTranscript ./plugins/sdk/python
func TestTranscript(t *testing.T) {
	var trace lockedBuffer
	s := spec(t, "ok")
	s.Trace = &trace
	logs := &testkit.Buffer{}
	ctx := zerolog.New(logs).WithContext(context.Background())
	p, err := process.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	svc := &hooktest.Services{}
	reg := hooktest.Registry(t, []hooks.Plugin{p.RegistryPlugin("./plugins/py-test")}, hooks.Options{Services: svc.Bind()})

	enrich := hooktest.MessageEnrich("where am I?")
	enrich.CorrelationID = "$event:localhost"
	if err := hooks.Emit(ctx, reg, hooks.MessageEnrich, enrich); err != nil {
		t.Fatal(err)
	}
	gate := hooktest.ToolBeforeCall("read_file", `{"path":"secret.txt"}`)
	gate.CorrelationID = "$event:localhost"
	if err := hooks.Emit(ctx, reg, hooks.ToolBeforeCall, gate); err != nil {
		t.Fatal(err)
	}
	after := hooktest.AfterResponse("42")
	after.CorrelationID = "$event:localhost"
	if err := hooks.Emit(ctx, reg, hooks.MessageAfterResponse, after); err != nil {
		t.Fatal(err)
	}
	joined := hooktest.MemberJoined("@bob:localhost")
	joined.CorrelationID = "$join:localhost"
	if err := hooks.Emit(ctx, reg, hooks.RoomMemberJoined, joined); err != nil {
		t.Fatal(err)
	}
	// The slow hook ends at its deadline one way or the other: the SDK's
	// own deadline answers with an error, or the host cancels it with
	// $/cancel, whichever comes first.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got := trace.String(); strings.Contains(got, `"method":"$/cancel"`) || strings.Contains(got, `"code":-32007`) {
			break
		}
	}
	out, err := p.CallTool(ctx, "add", process.ToolCall{ToolCall: hooks.ToolCall{Arguments: json.RawMessage(`{"a":2,"b":40}`), Agent: "assistant"}})
	if err != nil || out != "42" {
		t.Fatalf("add = %q, %v", out, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	got := trace.String()
	if !strings.Contains(got, `"method":"$/cancel"`) && !strings.Contains(got, `"code":-32007`) {
		t.Errorf("the slow hook was neither cancelled nor timed out by the SDK")
	}
	for _, want := range []string{
		`--> {"jsonrpc":"2.0","id":1,"method":"initialize"`,
		`"method":"hook.invoke"`, `"method":"host.send_message"`, `"method":"host.room_state.put"`,
		`"method":"host.room_state.get"`, `"method":"host.emit"`, `"method":"host.log"`,
		`"error":{"code":-32003`, `"method":"tool.call"`, `"method":"shutdown"`,
		`"declined":true`, `"items":[{"key":"location"`,
		`"usage":{"model":"test-model","input_tokens":120,"output_tokens":8,"cached_tokens":100,"total_tokens":128,"model_calls":1}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("transcript lacks %s", want)
		}
	}
	if path := os.Getenv("HOOKROOM_WRITE_TRANSCRIPT"); path != "" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if t.Failed() {
		t.Logf("transcript:\n%s", got)
	}
}

type lockedBuffer = testkit.Buffer
