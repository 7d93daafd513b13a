package auditlog_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/builtin/auditlog"
)

type instance interface {
	plugins.Instance
	Close() error
}

func newLog(t *testing.T, dir, js string) instance {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		t.Fatal(err)
	}
	s, err := hooks.NewSettings(m)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := auditlog.New(context.Background(), plugins.Env{Name: auditlog.Name, Settings: s, StateDir: dir})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l := inst.(instance)
	t.Cleanup(func() { l.Close() })
	return l
}

func registry(t *testing.T, dir string, extra []hooks.Hook, l instance) *hooks.Registry {
	return hooktest.Registry(t, []hooks.Plugin{
		{Name: "other", Hooks: extra},
		{Name: auditlog.Name, Hooks: l.Hooks(), StateRoot: dir},
	})
}

// readRecords reads every record of file, checking each line is complete
// JSON with a valid time, and returns them with the time removed.
func readRecords(t *testing.T, file string) []map[string]any {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", sc.Text(), err)
		}
		ts, _ := m["time"].(string)
		if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || !strings.HasSuffix(ts, "Z") {
			t.Fatalf("bad time %q in %s", ts, sc.Text())
		}
		delete(m, "time")
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTurnRecords(t *testing.T) {
	dir := t.TempDir()
	l := newLog(t, dir, `{"events":["message:received","message:after_response","message:cancelled","tool:after_call","config:reloaded","todo:item_completed"]}`)
	spam := hooks.Handle(hooks.MessageReceived, "spam", func(_ context.Context, c *hooks.MessageReceivedContext) error {
		c.Suppress = strings.Contains(c.Envelope.Body, "spam")
		return nil
	})
	reg := registry(t, dir, []hooks.Hook{spam}, l)

	rc := hooktest.MessageReceived("buy spam now")
	rc.CorrelationID = "corr-1"
	rc.Envelope.RequesterID = "@bob:localhost"
	hooktest.Emit(t, reg, hooks.MessageReceived, rc)

	tc := hooktest.ToolAfterCall("read_file", `{"path":"/srv/notes.txt","api_key":"k-123","opts":{"Password":"hunter2","depth":2},"note":"use Bearer abcdefghijklmnop please"}`, "file contents here")
	tc.CorrelationID = "corr-1"
	tc.Error = "upstream said token=sekr1t&x=1"
	tc.Duration = 1500 * time.Microsecond
	hooktest.Emit(t, reg, hooks.ToolAfterCall, tc)

	ar := hooktest.AfterResponse("Here you go")
	ar.CorrelationID = "corr-1"
	hooktest.Emit(t, reg, hooks.MessageAfterResponse, ar)

	cc := hooktest.Cancelled(hooks.CancelModelError)
	cc.CorrelationID = "corr-2"
	cc.Info.Detail = "401 from provider: Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz"
	hooktest.Emit(t, reg, hooks.MessageCancelled, cc)

	cr := &hooks.ConfigReloadedContext{AddedAgents: []hooks.AgentName{"ops"}, PluginChanges: []string{"added geo", "restarted audit_log"}}
	cr.CorrelationID = "corr-3"
	hooktest.Emit(t, reg, hooks.ConfigReloaded, cr)

	cu := hooktest.Custom(map[string]any{"item_id": "123", "secret": "x"})
	cu.CorrelationID = "corr-4"
	cu.SourcePlugin = "todo"
	hooktest.Emit(t, reg, hooks.MustCustomEvent("todo:item_completed"), cu)

	got := readRecords(t, filepath.Join(dir, auditlog.DefaultFile))
	want := []map[string]any{
		{"event": "message:received", "correlation_id": "corr-1", "agent": "assistant", "room_id": "!room:localhost",
			"thread_id": "$event:localhost", "event_id": "$event:localhost", "sender": "@alice:localhost",
			"requester": "@bob:localhost", "source_kind": "message", "suppressed": true, "chars": 12.0},
		{"event": "tool:after_call", "correlation_id": "corr-1", "agent": "assistant", "room_id": "!room:localhost",
			"thread_id": "$event:localhost", "requester": "@alice:localhost", "tool": "read_file",
			"arguments": map[string]any{"path": "/srv/notes.txt", "api_key": "REDACTED",
				"opts": map[string]any{"Password": "REDACTED", "depth": 2.0}, "note": "use Bearer REDACTED please"},
			"error": "upstream said token=REDACTED&x=1", "duration_ms": 1.5, "result_chars": 18.0},
		{"event": "message:after_response", "correlation_id": "corr-1", "agent": "assistant", "room_id": "!room:localhost",
			"thread_id": "$event:localhost", "event_id": "$event:localhost", "sender": "@alice:localhost", "source_kind": "message",
			"response_event_id": "$reply:localhost", "delivery": "sent", "kind": "ai", "chars": 11.0,
			"usage": map[string]any{"model": "test-model", "input_tokens": 120.0, "output_tokens": 8.0, "cached_tokens": 100.0, "total_tokens": 128.0, "model_calls": 1.0}},
		{"event": "message:cancelled", "correlation_id": "corr-2", "agent": "assistant", "room_id": "!room:localhost",
			"thread_id": "$event:localhost", "event_id": "$event:localhost", "sender": "@alice:localhost", "source_kind": "message",
			"reason": "model_error", "detail": "401 from provider: Authorization: Bearer REDACTED", "kind": "ai"},
		{"event": "config:reloaded", "correlation_id": "corr-3", "added_agents": []any{"ops"},
			"plugin_changes": []any{"added geo", "restarted audit_log"}},
		{"event": "todo:item_completed", "correlation_id": "corr-4", "source_plugin": "todo", "agent": "assistant",
			"room_id": "!room:localhost", "sender": "@alice:localhost", "payload": map[string]any{"item_id": "123", "secret": "REDACTED"}},
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("record %d:\n got %s\nwant %s", i, g, w)
		}
	}
	raw, _ := os.ReadFile(filepath.Join(dir, auditlog.DefaultFile))
	for _, secret := range []string{"k-123", "hunter2", "abcdefghijklmnop", "sekr1t", "buy spam", "file contents", "Here you go"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the log contains %q", secret)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, auditlog.DefaultFile)); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("log file mode: %v %v", st.Mode(), err)
	}
}

func TestIncludeTextAndResults(t *testing.T) {
	dir := t.TempDir()
	l := newLog(t, dir, `{"include_text":true,"include_tool_results":true,"include_tool_arguments":false,"max_text_chars":10,"file":"turns.log"}`)
	reg := registry(t, dir, nil, l)
	hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hello"))
	hooktest.Emit(t, reg, hooks.MessageAfterResponse, hooktest.AfterResponse("a reply that is longer than ten"))
	hooktest.Emit(t, reg, hooks.ToolAfterCall, hooktest.ToolAfterCall("t", `{"a":1}`, "my key is syt_abcdefghijkl_1234"))
	got := readRecords(t, filepath.Join(dir, "turns.log"))
	if got[0]["text"] != "hello" || got[1]["text"] != "a reply th…" || got[1]["chars"] != 31.0 {
		t.Errorf("texts: %v / %v", got[0], got[1])
	}
	if got[2]["result"] != "my key is …" || got[2]["arguments"] != nil {
		t.Errorf("tool record: %v", got[2])
	}
	// The token is masked before the cut, so no prefix of it survives either.
	l2 := newLog(t, dir, `{"include_tool_results":true,"file":"t2.log"}`)
	reg2 := registry(t, dir, nil, l2)
	hooktest.Emit(t, reg2, hooks.ToolAfterCall, hooktest.ToolAfterCall("t", `{}`, "my key is syt_abcdefghijkl_1234"))
	if got := readRecords(t, filepath.Join(dir, "t2.log")); got[0]["result"] != "my key is REDACTED" {
		t.Errorf("result %q", got[0]["result"])
	}
}

func TestRotation(t *testing.T) {
	dir := t.TempDir()
	// About 600 bytes per file: a handful of records each.
	l := newLog(t, dir, `{"max_size_mb":0.0006,"max_files":2,"events":["config:reloaded"]}`)
	reg := registry(t, dir, nil, l)
	const n = 40
	for i := range n {
		hooktest.Emit(t, reg, hooks.ConfigReloaded, &hooks.ConfigReloadedContext{PluginChanges: []string{fmt.Sprintf("change %03d", i)}})
	}
	file := filepath.Join(dir, auditlog.DefaultFile)
	var seen []string
	for _, name := range []string{file + ".2", file + ".1", file} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatalf("missing %s: %v", name, err)
		}
		if st.Size() > 629 {
			t.Errorf("%s has %d bytes, over the limit", name, st.Size())
		}
		for _, r := range readRecords(t, name) {
			seen = append(seen, r["plugin_changes"].([]any)[0].(string))
		}
	}
	if _, err := os.Stat(file + ".3"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s.3 exists beyond max_files: %v", file, err)
	}
	// The kept files hold the newest records, in order, without gaps.
	if len(seen) == 0 || len(seen) >= n || seen[len(seen)-1] != fmt.Sprintf("change %03d", n-1) {
		t.Fatalf("kept records %q", seen)
	}
	for i := 1; i < len(seen); i++ {
		var a, b int
		fmt.Sscanf(seen[i-1], "change %d", &a)
		fmt.Sscanf(seen[i], "change %d", &b)
		if b != a+1 {
			t.Fatalf("records out of order or missing: %q", seen)
		}
	}
}

// Concurrent turns, and two instances sharing the file (old and new during a
// reload), append whole lines.
func TestConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	l1 := newLog(t, dir, `{}`)
	l2 := newLog(t, dir, `{"include_text":true}`)
	regs := []*hooks.Registry{registry(t, dir, nil, l1), registry(t, dir, nil, l2)}
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				c := hooktest.MessageReceived(strings.Repeat("x", 500) + fmt.Sprint(w, i))
				if err := hooks.Emit(context.Background(), regs[w%2], hooks.MessageReceived, c); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	file := filepath.Join(dir, auditlog.DefaultFile)
	if got := len(readRecords(t, file)); got != workers*each {
		t.Fatalf("%d records, want %d", got, workers*each)
	}
	// Closing one instance leaves the file open for the other.
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	hooktest.Emit(t, regs[1], hooks.MessageReceived, hooktest.MessageReceived("after close"))
	recs := readRecords(t, file)
	if len(recs) != workers*each+1 || recs[len(recs)-1]["text"] != "after close" {
		t.Fatalf("after closing one instance: %d records, last %v", len(recs), recs[len(recs)-1])
	}
}

func TestHooks(t *testing.T) {
	l := newLog(t, t.TempDir(), `{"events":["tool:after_call","todo:item_completed"]}`)
	var got []string
	for _, h := range l.Hooks() {
		got = append(got, h.Event()+" "+h.Name())
	}
	if want := []string{"tool:after_call log_tool_after_call", "todo:item_completed log_todo_item_completed"}; !slices.Equal(got, want) {
		t.Errorf("hooks %q, want %q", got, want)
	}
	reg := hooktest.Registry(t, []hooks.Plugin{{Name: auditlog.Name, Hooks: l.Hooks()}})
	for _, h := range reg.Hooks() {
		if h.Priority != auditlog.Priority {
			t.Errorf("%s priority %d", h.Hook, h.Priority)
		}
	}
}

func TestInvalidSettings(t *testing.T) {
	tests := []struct{ settings, want string }{
		{`{"file":"../escape.jsonl"}`, `settings.file: "../escape.jsonl" must be a file name (the file lives in the plugin's state directory)`},
		{`{"file":"sub/a.jsonl"}`, `settings.file: "sub/a.jsonl" must be a file name (the file lives in the plugin's state directory)`},
		{`{"max_size_mb":-1}`, "settings.max_size_mb: must be positive, not -1"},
		{`{"max_files":-2}`, "settings.max_files: must be positive, not -2"},
		{`{"events":["tool:after_call","message:enrich"]}`, "settings.events[1]: message:enrich is not logged (supported: message:received, message:after_response, message:cancelled, tool:after_call, config:reloaded, memory:extracted, and custom events)"},
		{`{"events":["Bad Event"]}`, `settings.events[0]: invalid event name "Bad Event": want lowercase segments of [a-z0-9_.-] joined by ':', e.g. "todo:item_completed"`},
		{`{"events":["tool:after_call","tool:after_call"]}`, "settings.events[1]: tool:after_call is listed twice"},
		{`{"rotate":true}`, "settings.rotate: unknown setting"},
	}
	for _, tt := range tests {
		var m map[string]any
		if err := json.Unmarshal([]byte(tt.settings), &m); err != nil {
			t.Fatal(err)
		}
		s, _ := hooks.NewSettings(m)
		_, err := auditlog.New(context.Background(), plugins.Env{Settings: s, StateDir: t.TempDir()})
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s: error %v\nwant %s", tt.settings, err, tt.want)
		}
	}
}

// memory:extracted, when named, is logged after the hooks before the
// audit log changed it: the count always, the texts only with include_text.
func TestMemoryExtractedRecords(t *testing.T) {
	drop := hooks.Handle(hooks.MemoryExtracted, "drop_second", func(_ context.Context, c *hooks.MemoryExtractedContext) error {
		c.Memories = c.Memories[:1]
		return nil
	})
	for _, includeText := range []bool{false, true} {
		dir := t.TempDir()
		l := newLog(t, dir, fmt.Sprintf(`{"events":["memory:extracted"],"include_text":%v}`, includeText))
		reg := registry(t, dir, []hooks.Hook{drop}, l)
		c := &hooks.MemoryExtractedContext{
			Where: hooks.Where{Agent: "helper", RoomID: "!r:example.org", RequesterID: "@alice:example.org"},
			Memories: []hooks.ExtractedMemory{
				{Text: "Alice has a dog called Rex.", Scope: "person", Person: "@alice:example.org", Agent: "helper"},
				{Text: "Alice is in Lisbon.", Scope: "person", Person: "@alice:example.org", Agent: "helper"},
			},
		}
		hooktest.Emit(t, reg, hooks.MemoryExtracted, c)
		got := readRecords(t, filepath.Join(dir, auditlog.DefaultFile))
		if len(got) != 1 || got[0]["event"] != "memory:extracted" || got[0]["memories"] != 1.0 ||
			got[0]["agent"] != "helper" || got[0]["requester"] != "@alice:example.org" {
			t.Fatalf("include_text %v: records %v, want one memory:extracted record of 1 memory", includeText, got)
		}
		texts, _ := got[0]["memory_texts"].([]any)
		switch {
		case includeText && (len(texts) != 1 || texts[0] != "person: Alice has a dog called Rex."):
			t.Errorf("with include_text the texts are %v", texts)
		case !includeText && texts != nil:
			t.Errorf("without include_text the record holds the texts %v", texts)
		}
	}
}
