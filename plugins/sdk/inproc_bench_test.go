package sdk_test

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
	"github.com/hookroom/hookroom/plugins/sdk"
	"github.com/hookroom/hookroom/plugins/sdk/sdktest"
)

// BenchmarkServeInMemory is the SDK's own cost per hook call: the protocol
// over in-memory pipes, no process boundary.
func BenchmarkServeInMemory(b *testing.B) {
	hr, pw := io.Pipe()
	pr, hw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go sdk.ServeStreams(ctx, testPlugin, pr, pw)
	host := jsonrpc.NewConn(hr, hw, nil, jsonrpc.Options{})
	defer host.Close()
	settings, _ := json.Marshal(testSettings)
	if _, err := host.Call(ctx, protocol.MethodInitialize, protocol.InitializeParams{APIVersion: 1, Plugin: "sdk-test", Settings: settings, StateDir: b.TempDir()}); err != nil {
		b.Fatal(err)
	}
	c, _ := json.Marshal(hooktest.BeforeResponse("Hello"))
	params := protocol.HookInvokeParams{Invocation: 1, Hook: "footer", Event: "message:before_response", Context: c, DeadlineMS: 200}
	var samples []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := host.Call(ctx, protocol.MethodHookInvoke, params); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	sdktest.ReportPercentiles(b, samples)
}
