package jsonrpc_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
)

// With HOOKROOM_JSONRPC_ECHO set, the test binary is an echo server on
// stdin/stdout.
func TestMain(m *testing.M) {
	if os.Getenv("HOOKROOM_JSONRPC_ECHO") != "" {
		in := os.Stdin
		if syscall.SetNonblock(0, true) == nil {
			in = os.NewFile(0, "/dev/stdin")
		}
		c := jsonrpc.NewConn(in, os.Stdout, echo(), jsonrpc.Options{})
		<-c.Done()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// BenchmarkCallChildProcess is the transport's floor: one call to a child
// process that echoes the params (about the size of a hook context).
func BenchmarkCallChildProcess(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{"HOOKROOM_JSONRPC_ECHO=1"}
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	inR.Close()
	outW.Close()
	c := jsonrpc.NewConn(outR, inW, nil, jsonrpc.Options{})
	defer func() {
		c.Close()
		cmd.Wait()
	}()
	params := json.RawMessage(`{"invocation":1,"hook":"footer","event":"message:before_response","context":{"draft":{"text":"Hello","kind":"ai","envelope":{"source_event_id":"$event:localhost","room_id":"!room:localhost","resolved_thread_id":"$event:localhost","session_id":"!room:localhost/$event:localhost","requester_id":"@alice:localhost","sender_id":"@alice:localhost","body":"hello","agent_name":"assistant","source_kind":"message"},"suppress":false}},"deadline_ms":200}`)
	ctx := context.Background()
	var samples []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := c.Call(ctx, "echo", params); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds())/1e3, "p99-µs")
}
