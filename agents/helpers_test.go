package agents_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/dbtest"
)

const testKey = "sk-test-SECRET-0123456789"

// testSpec is the spec of a model of provider (openai or anthropic)
// talking to srv: "test-model" or "claude-test", with testKey.
func testSpec(provider string, srv *llmtest.Server) agents.ModelSpec {
	spec := agents.ModelSpec{Provider: provider, BaseURL: srv.URL, APIKey: testKey, Model: "test-model", RequestTimeout: 10 * time.Second}
	if provider == agents.ProviderAnthropic {
		spec.BaseURL, spec.Model = srv.RootURL, "claude-test"
	}
	return spec
}

// newTestModel returns the model spec describes, after mod changed it.
func newTestModel(t testing.TB, spec agents.ModelSpec, mod ...func(*agents.ModelSpec)) agents.Model {
	t.Helper()
	for _, f := range mod {
		f(&spec)
	}
	m, err := agents.NewModel(spec)
	if err != nil {
		t.Fatalf("NewModel: %v", err)
	}
	return m
}

// testModel returns an openai model talking to srv.
func testModel(t testing.TB, srv *llmtest.Server, mod ...func(*agents.ModelSpec)) agents.Model {
	t.Helper()
	return newTestModel(t, testSpec(agents.ProviderOpenAI, srv), mod...)
}

// anthropicModel returns an anthropic model talking to srv.
func anthropicModel(t testing.TB, srv *llmtest.Server, mod ...func(*agents.ModelSpec)) agents.Model {
	t.Helper()
	return newTestModel(t, testSpec(agents.ProviderAnthropic, srv), mod...)
}

func userPrompt(text string) *agents.Request {
	return &agents.Request{Messages: []agents.Message{
		{Role: agents.RoleSystem, Content: "You are a test."},
		{Role: agents.RoleUser, Content: text},
	}}
}

// collect reads a stream to its end.
func collect(t *testing.T, s agents.Stream) ([]agents.Event, error) {
	t.Helper()
	defer s.Close()
	var evs []agents.Event
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return evs, nil
		} else if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// collectStream streams req from m and reads the stream to its end.
func collectStream(t *testing.T, m agents.Model, req *agents.Request) ([]agents.Event, error) {
	t.Helper()
	s, err := m.Stream(t.Context(), req)
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	return collect(t, s)
}

// streamed is what the events of a stream carried.
type streamed struct {
	text   []string
	calls  []agents.ToolCall
	usage  agents.Usage
	finish agents.FinishReason
}

// streamCase is a reply and what its stream must carry.
type streamCase struct {
	name  string
	reply llmtest.Reply
	want  streamed
}

// testStreams streams each case's reply from a model of provider and
// checks what the stream carried and that it ends with io.EOF; then
// request, when set, checks the request srv got.
func testStreams(t *testing.T, provider string, cases []streamCase, request func(t *testing.T, srv *llmtest.Server)) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, tc.reply)
			s, err := newTestModel(t, testSpec(provider, srv)).Stream(t.Context(), userPrompt("hi"))
			if err != nil {
				t.Fatalf("Stream: %v", err)
			}
			evs, err := collect(t, s)
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			gather(t, evs).check(t, tc.want)
			if _, err := s.Recv(); !errors.Is(err, io.EOF) {
				t.Errorf("Recv after end = %v, want io.EOF", err)
			}
			if request != nil {
				request(t, srv)
			}
		})
	}
}

// gather sums up evs; it fails t unless the last event is the finish.
func gather(t *testing.T, evs []agents.Event) streamed {
	t.Helper()
	var got streamed
	for _, ev := range evs {
		switch ev.Kind {
		case agents.EventText:
			got.text = append(got.text, ev.Text)
		case agents.EventToolCalls:
			got.calls = append(got.calls, ev.ToolCalls...)
		case agents.EventUsage:
			got.usage = ev.Usage
		case agents.EventFinish:
			got.finish = ev.FinishReason
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Kind != agents.EventFinish {
		t.Errorf("events = %+v, want the finish last", evs)
	}
	return got
}

// check compares every part of got with want.
func (got streamed) check(t *testing.T, want streamed) {
	t.Helper()
	if !reflect.DeepEqual(got.text, want.text) {
		t.Errorf("text deltas = %q, want %q", got.text, want.text)
	}
	if !reflect.DeepEqual(got.calls, want.calls) {
		t.Errorf("tool calls = %+v, want %+v", got.calls, want.calls)
	}
	if got.finish != want.finish {
		t.Errorf("finish = %q, want %q", got.finish, want.finish)
	}
	if got.usage != want.usage {
		t.Errorf("usage = %+v, want %+v", got.usage, want.usage)
	}
}

// modelErrorCase is a reply (or a timeout) that makes a model request
// fail, and the *ModelError it must fail with.
type modelErrorCase struct {
	name      string
	reply     llmtest.Reply
	spec      func(*agents.ModelSpec)
	timeout   time.Duration
	kind      agents.ErrorKind
	status    int
	retryable bool
	message   string
	is        error
}

// testModelErrors runs every case against a model of provider.
func testModelErrors(t *testing.T, provider string, cases []modelErrorCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, tc.reply)
			spec := testSpec(provider, srv)
			if tc.spec != nil {
				tc.spec(&spec)
			}
			m := newTestModel(t, spec)
			ctx := t.Context()
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			start := time.Now()
			_, err := agents.Complete(ctx, m, userPrompt("hi"), nil)
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("failing took %v", elapsed)
			}
			t.Logf("error: %v", err)
			var me *agents.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v (%T), want *ModelError", err, err)
			}
			if me.Kind != tc.kind || me.StatusCode != tc.status || me.Retryable != tc.retryable {
				t.Errorf("error = kind %q status %d retryable %v, want %q %d %v (%v)", me.Kind, me.StatusCode, me.Retryable, tc.kind, tc.status, tc.retryable, err)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q does not mention %q", err, tc.message)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			// Neither the message nor the wrapped cause holds the key.
			for e := error(me); e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), testKey) || strings.Contains(e.Error(), "SECRET") {
					t.Errorf("error leaks the API key: %v", e)
				}
			}
			if me.Model != spec.Model {
				t.Errorf("error model = %q, want %q", me.Model, spec.Model)
			}
			// No retries inside the SDK: hookroom has its own back-off.
			if n := srv.Count(); n != 1 {
				t.Errorf("the server got %d requests, want 1", n)
			}
		})
	}
}

// refusedAddr returns a local address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// newHistory returns an upgraded History on a fresh SQLite database, and
// its path.
func newHistory(t testing.TB) (*agents.History, string) {
	t.Helper()
	return newHistoryOn(t, dbtest.SQLite)
}

func zlog(w io.Writer) zerolog.Logger { return zerolog.New(w) }

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
