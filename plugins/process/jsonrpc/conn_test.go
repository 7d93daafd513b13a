package jsonrpc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
)

type syncBuffer = testkit.Buffer

// pair connects two Conns through in-memory pipes.
func pair(t *testing.T, ha, hb jsonrpc.Handler, opts jsonrpc.Options) (a, b *jsonrpc.Conn) {
	t.Helper()
	ar, bw := io.Pipe()
	br, aw := io.Pipe()
	a = jsonrpc.NewConn(ar, aw, ha, opts)
	b = jsonrpc.NewConn(br, bw, hb, opts)
	t.Cleanup(func() {
		a.Close()
		b.Close()
	})
	return a, b
}

func echo() jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		switch req.Method {
		case "echo":
			return req.Params, nil
		case "fail":
			return nil, jsonrpc.Errorf(-32000, "it failed")
		case "plain-error":
			return nil, errors.New("boom")
		case "block":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "no %s", req.Method)
	})
}

func TestCallBothDirectionsConcurrently(t *testing.T) {
	a, b := pair(t, echo(), echo(), jsonrpc.Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 100 {
		for _, c := range []*jsonrpc.Conn{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := fmt.Sprintf(`{"n":%d}`, i)
				got, err := c.Call(ctx, "echo", json.RawMessage(want))
				if err != nil {
					errs <- err
					return
				}
				if string(got) != want {
					errs <- fmt.Errorf("got %s, want %s", got, want)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestErrors(t *testing.T) {
	a, _ := pair(t, nil, echo(), jsonrpc.Options{})
	tests := []struct {
		name     string
		method   string
		wantCode int
	}{
		{"handler returns *Error", "fail", -32000},
		{"handler returns a plain error", "plain-error", jsonrpc.CodeInternalError},
		{"unknown method", "nope", jsonrpc.CodeMethodNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Call(context.Background(), tc.method, nil)
			var re *jsonrpc.Error
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *jsonrpc.Error", err)
			}
			if re.Code != tc.wantCode {
				t.Errorf("code = %d, want %d", re.Code, tc.wantCode)
			}
		})
	}
}

func TestNotifyInlineKeepsOrder(t *testing.T) {
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	h := jsonrpc.HandlerFunc(func(_ context.Context, req *jsonrpc.Request) (any, error) {
		var s string
		_ = json.Unmarshal(req.Params, &s)
		mu.Lock()
		got = append(got, s)
		if len(got) == 50 {
			close(done)
		}
		mu.Unlock()
		return nil, nil
	})
	a, _ := pair(t, nil, h, jsonrpc.Options{Inline: func(m string) bool { return m == "log" }})
	for i := range 50 {
		if err := a.Notify(context.Background(), "log", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("notifications did not arrive")
	}
	for i, s := range got {
		if s != fmt.Sprint(i) {
			t.Fatalf("notification %d = %q: order not kept (%v)", i, s, got)
		}
	}
}

// TestCancelReachesHandler runs in a synctest bubble: the call's deadline is
// a timer on the bubble's clock, so it fires only once the request reached
// the handler and everything is blocked, and Call must return at that very
// instant, not when the handler gives up.
func TestCancelReachesHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reached := make(chan struct{})
		cancelled := make(chan struct{})
		h := jsonrpc.HandlerFunc(func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
			close(reached)
			<-ctx.Done()
			close(cancelled)
			return nil, ctx.Err()
		})
		a, _ := pair(t, nil, h, jsonrpc.Options{})
		const timeout = 20 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		start := time.Now()
		_, err := a.Call(ctx, "block", nil)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		if d := time.Since(start); d != timeout {
			t.Errorf("Call returned after %v, want %v", d, timeout)
		}
		select {
		case <-reached:
		default:
			t.Fatal("the deadline passed before the request reached the handler")
		}
		synctest.Wait() // $/cancel sent, read and served
		select {
		case <-cancelled:
		default:
			t.Fatal("the handler's context was not cancelled by $/cancel")
		}
	})
}

func TestGarbageIsSkipped(t *testing.T) {
	var logs syncBuffer
	log := zerolog.New(&logs)
	pr, pw := io.Pipe()
	outR, outW := io.Pipe()
	const secret = "sk-peer-secret-0123456789"
	redact := func(s string) string { return strings.ReplaceAll(s, secret, "[REDACTED]") }
	c := jsonrpc.NewConn(pr, outW, nil, jsonrpc.Options{Logger: &log, MaxLineBytes: 100, Redact: redact})
	defer c.Close()

	// A call whose response arrives after garbage lines.
	res := make(chan error, 1)
	go func() {
		got, err := c.Call(context.Background(), "x", nil)
		if err == nil && string(got) != `"ok"` {
			err = fmt.Errorf("result %s", got)
		}
		res <- err
	}()
	// The peer answers only once it read the request: the call is pending
	// then, so the garbage lines carrying its id are offered to it.
	sent, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sent, `"id":1,`) {
		t.Fatalf("request %q, want id 1", sent)
	}
	go io.Copy(io.Discard, outR)
	garbage := []string{
		"hello world",
		"my key is " + secret,             // a peer printing its secret to stdout by mistake
		strings.Repeat("y", 190) + secret, // masked before the line is cut for the log
		`{"jsonrpc":"1.0","id":1,"result":1}`,
		`{"jsonrpc":"2.0"}`,
		`{"jsonrpc":"2.0","id":"zz","result":1}`,
		`[1,2,3]`,
		`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("x", 200) + `"}`,
		"",
		"\r",
	}
	for _, g := range garbage {
		fmt.Fprintln(pw, g)
	}
	fmt.Fprintln(pw, `{"jsonrpc":"2.0","id":1,"result":"ok"}`)
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not complete after garbage")
	}
	out := logs.String()
	for _, want := range []string{"not a JSON object", "not JSON-RPC 2.0", "neither a request nor a response", "was never sent", "line too long", "my key is [REDACTED]"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sk-peer") {
		t.Errorf("the log shows (part of) the peer's secret:\n%s", out)
	}
	pw.Close()
}

func TestCloseFailsPendingCalls(t *testing.T) {
	reached := make(chan struct{})
	h := jsonrpc.HandlerFunc(func(ctx context.Context, req *jsonrpc.Request) (any, error) {
		if req.Method == "block" {
			close(reached)
		}
		return echo().ServeRPC(ctx, req)
	})
	a, b := pair(t, nil, h, jsonrpc.Options{})
	res := make(chan error, 1)
	go func() {
		_, err := a.Call(context.Background(), "block", nil)
		res <- err
	}()
	select { // the call is pending once its request is being served
	case <-reached:
	case err := <-res:
		t.Fatalf("the call returned before the peer closed: %v", err)
	}
	b.Close() // the other end goes away
	select {
	case err := <-res:
		if !errors.Is(err, jsonrpc.ErrClosed) {
			t.Fatalf("err = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("pending call hangs after the peer closed")
	}
	if _, err := a.Call(context.Background(), "echo", nil); !errors.Is(err, jsonrpc.ErrClosed) {
		t.Fatalf("call after close: err = %v, want ErrClosed", err)
	}
}

func TestWriteToPeerThatDoesNotReadIsBounded(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	idle, _ := io.Pipe()
	c := jsonrpc.NewConn(idle, w, nil, jsonrpc.Options{})
	defer c.Close()
	big := json.RawMessage(`"` + strings.Repeat("x", 1<<16) + `"`)
	start := time.Now()
	for range 8 { // fills the pipe buffer; nobody reads r
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err = c.Call(ctx, "x", big)
		cancel()
		if err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("writing to a full pipe never failed")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("calls took %v", d)
	}
}

func TestOverloaded(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	var served atomic.Int32
	h := jsonrpc.HandlerFunc(func(ctx context.Context, _ *jsonrpc.Request) (any, error) {
		if served.Add(1) > 2 {
			return "served", nil // a request beyond the limit must not get here
		}
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done(): // the test failed and closes the connection
		}
		return nil, nil
	})
	a, _ := pair(t, nil, h, jsonrpc.Options{MaxInFlight: 2})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = a.Call(context.Background(), "slow", nil)
		}()
	}
	<-entered // both requests are in flight
	<-entered
	_, err := a.Call(context.Background(), "slow", nil)
	var re *jsonrpc.Error
	if !errors.As(err, &re) || re.Code != jsonrpc.CodeOverloaded {
		t.Fatalf("third call: err = %v, want CodeOverloaded", err)
	}
	close(release)
	wg.Wait()
}
