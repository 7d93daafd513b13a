package agents_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

// oddTurn is a turn whose contents are easy to damage on the way through a
// database.
var oddTurn = []agents.Message{
	{Role: agents.RoleUser, Content: "line one\r\nline two  \n\ttabbed\x00nul ünïcödé 🧪 <b>&amp;</b>\n\n<hookroom_message_context>\n<item key=\"a\">x</item>\n</hookroom_message_context>", Name: "alice"},
	{Role: agents.RoleAssistant, Content: "", ToolCalls: []agents.ToolCall{
		{ID: "call_1", Name: "current_time", Arguments: `{"timezone": "Europe/Berlin",  "note":"<&>\u00e9"}`},
		{ID: "call_2", Name: "room_info", Arguments: `{}`},
	}},
	{Role: agents.RoleTool, Content: `{"time":"2026-01-01T00:00:00+01:00"}`, ToolCallID: "call_1"},
	{Role: agents.RoleTool, Content: "", ToolCallID: "call_2"},
	{Role: agents.RoleAssistant, Content: "  It is midnight.  \n"},
	{Role: agents.RoleUser, Content: "invalid utf-8: \xff\xfe end"},
}

func TestHistoryAppendLoadByteExact(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		h, _ := newHistoryOn(t, dialect)
		ctx := t.Context()
		scope := agents.NewScopeKey("!room:example.org", "$root")
		if scope != "!room:example.org/$root" {
			t.Fatalf("ScopeKey = %q", scope)
		}
		if msgs, err := h.Load(ctx, scope); err != nil || len(msgs) != 0 {
			t.Fatalf("Load of an unknown scope = %v, %v", msgs, err)
		}
		if _, err := h.Session(ctx, scope); !errors.Is(err, agents.ErrNoSession) {
			t.Fatalf("Session of an unknown scope = %v", err)
		}
		if n, err := h.Append(ctx, scope, "assistant"); err != nil || n {
			t.Fatalf("Append of nothing = %v, %v", n, err)
		}
		newSession, err := h.Append(ctx, scope, "assistant", oddTurn[:3]...)
		if err != nil || !newSession {
			t.Fatalf("first Append = %v, %v", newSession, err)
		}
		newSession, err = h.Append(ctx, scope, "other", oddTurn[3:]...)
		if err != nil || newSession {
			t.Fatalf("second Append = %v, %v", newSession, err)
		}
		got, err := h.Load(ctx, scope)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, oddTurn) {
			t.Fatalf("loaded\n%+v\nwant\n%+v", got, oddTurn)
		}
		s, err := h.Session(ctx, scope)
		if err != nil || s.ID == "" || s.Agent != "assistant" || s.ScopeKey != scope || s.CreatedAt.IsZero() {
			t.Fatalf("Session = %+v, %v", s, err)
		}
		if _, err := h.Append(ctx, scope, "x", agents.Message{Role: "robot"}); err == nil {
			t.Errorf("Append accepted an invalid role")
		}
	})
}

// TestHistoryReplayIsByteIdentical sends a prompt built from the original
// messages and one built from the loaded ones: the model must receive the
// same bytes.
func TestHistoryReplayIsByteIdentical(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		h, _ := newHistoryOn(t, dialect)
		ctx := t.Context()
		valid := oddTurn[:5] // the wire carries JSON, so only valid UTF-8 survives it
		if _, err := h.Append(ctx, "scope", "assistant", valid...); err != nil {
			t.Fatal(err)
		}
		loaded, err := h.Load(ctx, "scope")
		if err != nil {
			t.Fatal(err)
		}
		srv := llmtest.NewServer(t, llmtest.Text("a"), llmtest.Text("b"))
		m := testModel(t, srv)
		for _, msgs := range [][]agents.Message{valid, loaded} {
			prompt := append([]agents.Message{{Role: agents.RoleSystem, Content: "sys"}}, msgs...)
			if _, err := agents.Complete(ctx, m, &agents.Request{Messages: prompt}, nil); err != nil {
				t.Fatal(err)
			}
		}
		reqs := srv.Requests()
		if len(reqs[0].MessagesJSON()) == 0 || !bytes.Equal(reqs[0].MessagesJSON(), reqs[1].MessagesJSON()) {
			t.Fatalf("replayed prompt differs:\n%s\n%s", reqs[0].MessagesJSON(), reqs[1].MessagesJSON())
		}
		if !bytes.Equal(reqs[0].Raw, reqs[1].Raw) {
			t.Errorf("request bodies differ")
		}
	})
}

func TestHistoryConcurrentAppends(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		h, _ := newHistoryOn(t, dialect)
		ctx := t.Context()
		const (
			scopes  = 3
			writers = 8
			appends = 5
		)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			news = map[agents.ScopeKey]int{}
			errs []error
		)
		for s := range scopes {
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					scope := agents.ScopeKey(fmt.Sprintf("scope-%d", s))
					for i := range appends {
						turn := []agents.Message{
							{Role: agents.RoleUser, Content: fmt.Sprintf("w%d-i%d-q", w, i)},
							{Role: agents.RoleAssistant, Content: fmt.Sprintf("w%d-i%d-a", w, i)},
						}
						n, err := h.Append(ctx, scope, "assistant", turn...)
						mu.Lock()
						if err != nil {
							errs = append(errs, err)
						}
						if n {
							news[scope]++
						}
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d appends failed, first: %v", len(errs), errs[0])
		}
		for s := range scopes {
			scope := agents.ScopeKey(fmt.Sprintf("scope-%d", s))
			if news[scope] != 1 {
				t.Errorf("%s: newSession reported %d times, want 1", scope, news[scope])
			}
			msgs, err := h.Load(ctx, scope)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != writers*appends*2 {
				t.Fatalf("%s: %d messages, want %d", scope, len(msgs), writers*appends*2)
			}
			// Each append's messages are adjacent and in order, and each
			// writer's appends keep their order.
			next := map[int]int{}
			for i := 0; i < len(msgs); i += 2 {
				var w, n int
				if _, err := fmt.Sscanf(msgs[i].Content, "w%d-i%d-q", &w, &n); err != nil {
					t.Fatalf("message %d = %q", i, msgs[i].Content)
				}
				if msgs[i+1].Content != fmt.Sprintf("w%d-i%d-a", w, n) || next[w] != n {
					t.Fatalf("%s: messages %d, %d = %q, %q (writer %d expected #%d)", scope, i, i+1, msgs[i].Content, msgs[i+1].Content, w, next[w])
				}
				next[w]++
			}
		}
	})
}

func TestHistoryReopen(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		h, path := newHistoryOn(t, dialect)
		ctx := t.Context()
		if _, err := h.Append(ctx, "s", "assistant", oddTurn...); err != nil {
			t.Fatal(err)
		}
		before, err := h.Session(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		db := dialect.Open(t, path)
		defer db.Close()
		h2 := agents.NewHistory(db)
		if err := h2.Upgrade(ctx); err != nil {
			t.Fatalf("Upgrade on reopen: %v", err)
		}
		got, err := h2.Load(ctx, "s")
		if err != nil || !reflect.DeepEqual(got, oddTurn) {
			t.Fatalf("after reopen: %+v, %v", got, err)
		}
		after, err := h2.Session(ctx, "s")
		if err != nil || after.ID != before.ID {
			t.Fatalf("session after reopen = %+v, %v; before %+v", after, err, before)
		}
		if n, err := h2.Append(ctx, "s", "assistant", agents.Message{Role: agents.RoleUser, Content: "more"}); err != nil || n {
			t.Fatalf("Append after reopen = %v, %v", n, err)
		}
		var version int
		if err := db.QueryRow(ctx, "SELECT version FROM agents_version").Scan(&version); err != nil || version != 2 {
			t.Errorf("agents_version = %d, %v", version, err)
		}
	})
}

func TestHistoryDelete(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		h, _ := newHistoryOn(t, dialect)
		ctx := t.Context()
		if _, err := h.Append(ctx, "s", "a", oddTurn[:1]...); err != nil {
			t.Fatal(err)
		}
		first, _ := h.Session(ctx, "s")
		if err := h.Delete(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if msgs, _ := h.Load(ctx, "s"); len(msgs) != 0 {
			t.Fatalf("after Delete: %v", msgs)
		}
		n, err := h.Append(ctx, "s", "b", oddTurn[:1]...)
		second, _ := h.Session(ctx, "s")
		if err != nil || !n || second.ID == first.ID || second.Agent != "b" {
			t.Fatalf("Append after Delete = %v, %v; session %+v (was %+v)", n, err, second, first)
		}
		if err := h.Delete(ctx, "unknown"); err != nil {
			t.Errorf("Delete of an unknown scope: %v", err)
		}
	})
}

// hookMessages is what the compaction hooks should see for msgs: every
// message as its JSON form has it, since that is what a hook plugin gets.
func hookMessages(t *testing.T, msgs []agents.Message) []hooks.ChatMessage {
	t.Helper()
	raw, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var out []hooks.ChatMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A message's images belong to its request only: the stored turn is its
// text, which is what every later request sends.
func TestHistoryDoesNotStoreImages(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		h, _ := newHistoryOn(t, dialect)
		ctx := t.Context()
		msg := agents.Message{Role: agents.RoleUser, Content: `[Image "cat.png" (image/png, 3 B) attached]`,
			Images: []agents.Image{{MimeType: "image/png", Data: []byte{1, 2, 3}}}}
		if _, err := h.Append(ctx, "scope", "assistant", msg); err != nil {
			t.Fatal(err)
		}
		loaded, err := h.Load(ctx, "scope")
		if err != nil {
			t.Fatal(err)
		}
		want := msg
		want.Images = nil
		if len(loaded) != 1 || !reflect.DeepEqual(loaded[0], want) {
			t.Errorf("loaded %+v, want the text only %+v", loaded, want)
		}
	})
}
