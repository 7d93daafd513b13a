package agents_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/dbtest"
)

func user(s string) agents.Message { return agents.Message{Role: agents.RoleUser, Content: s} }
func assistant(s string) agents.Message {
	return agents.Message{Role: agents.RoleAssistant, Content: s}
}
func callTool(id, name, args string) agents.Message {
	return agents.Message{Role: agents.RoleAssistant, ToolCalls: []agents.ToolCall{{ID: id, Name: name, Arguments: args}}}
}
func toolResult(id, s string) agents.Message {
	return agents.Message{Role: agents.RoleTool, ToolCallID: id, Content: s}
}

// conversation returns four turns, two of them with tool calls.
func conversation() (turns [][]agents.Message, all []agents.Message) {
	pad := strings.Repeat("words and more words ", 10)
	turns = [][]agents.Message{
		{user("q1 about the weather " + pad), assistant("a1 sunny " + pad)},
		{user("q2 what time is it " + pad), callTool("c1", "current_time", `{"timezone":"Europe/Berlin"}`), toolResult("c1", `{"time":"12:00"}`), assistant("a2 noon " + pad)},
		{user("q3 tell me a joke " + pad), assistant("a3 a joke " + pad)},
		{user("q4 which room is this " + pad), callTool("c2", "room_info", `{}`), toolResult("c2", `{"name":"Lobby"}`), assistant("a4 the lobby " + pad)},
	}
	for _, t := range turns {
		all = append(all, t...)
	}
	return turns, all
}

func seed(t *testing.T, h *agents.History, scope agents.ScopeKey) (turns [][]agents.Message, all []agents.Message) {
	t.Helper()
	turns, all = conversation()
	for _, turn := range turns {
		if _, err := h.Append(t.Context(), scope, "assistant", turn...); err != nil {
			t.Fatal(err)
		}
	}
	return turns, all
}

// compactionHooks records both compaction events; before also notes how
// many model requests srv had seen when it ran.
type compactionHooks struct {
	before, after recorder[hooks.CompactionContext]
	countAtBefore int
}

func (c *compactionHooks) registry(t *testing.T, srv *llmtest.Server, during func(context.Context)) *hooks.Registry {
	return hooktest.NewRegistry(t,
		hooks.Handle(hooks.CompactionBefore, "before", func(ctx context.Context, hc *hooks.CompactionContext) error {
			if srv != nil {
				c.countAtBefore = srv.Count()
			}
			c.before.add(*hc)
			if during != nil {
				during(ctx)
			}
			return nil
		}),
		hooks.Handle(hooks.CompactionAfter, "after", func(_ context.Context, hc *hooks.CompactionContext) error {
			c.after.add(*hc)
			return nil
		}),
	)
}

func compactReq(reg *hooks.Registry, budget, keep int, summarizer agents.Model) agents.CompactRequest {
	return agents.CompactRequest{
		Scope: "scope", Budget: budget, Keep: keep, Summarizer: summarizer,
		Hooks: reg,
	}
}

// compactCtx is ctx carrying the correlation id and the Where of
// compactReq's compaction, as the turn sets them.
func compactCtx(ctx context.Context) context.Context {
	return hooks.WithWhere(hooks.WithCorrelationID(ctx, "corr-c"),
		hooks.Where{Agent: hooktest.Agent, RoomID: hooktest.Room, ThreadID: hooktest.EventID})
}

func TestCompactWithSummary(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		h, _ := newHistoryOn(t, dialect)
		ctx := hooktest.Context(t)
		turns, all := seed(t, h, "scope")
		srv := llmtest.NewServer(t, llmtest.Text("They talked about ", "the weather and the time."))
		var ch compactionHooks
		reg := ch.registry(t, srv, nil)
		kept := append(append([]agents.Message(nil), turns[2]...), turns[3]...)
		dropped := append(append([]agents.Message(nil), turns[0]...), turns[1]...)
		total := agents.EstimateTokens(all...)
		keep := agents.EstimateTokens(kept...)

		res, err := h.Compact(compactCtx(ctx), compactReq(reg, total-1, keep, testModel(t, srv)))
		if err != nil {
			t.Fatalf("Compact: %v", err)
		}
		summary := "They talked about the weather and the time."
		compacted := append([]agents.Message{{Role: agents.RoleSystem, Content: agents.SummaryHeader + summary}}, kept...)
		want := agents.CompactResult{
			Compacted: true, Summarized: true, Summary: summary, TokensBefore: total,
			TokensAfter: agents.EstimateTokens(compacted...), Dropped: len(dropped), Kept: len(kept),
		}
		if *res != want {
			t.Errorf("result = %+v, want %+v", *res, want)
		}
		got, err := h.Load(ctx, "scope")
		if err != nil || !reflect.DeepEqual(got, compacted) {
			t.Fatalf("stored history =\n%+v\nwant\n%+v (%v)", got, compacted, err)
		}

		// The summary request carries the dropped turns, not the kept ones.
		sreq := srv.LastRequest(t)
		if len(sreq.Body.Messages) != 2 || sreq.Body.Messages[0].Role != "system" || !strings.Contains(sreq.System(), "running summary") {
			t.Fatalf("summary request = %+v", sreq.Body.Messages)
		}
		transcript := sreq.LastUser()
		if transcript != agents.Transcript(dropped) {
			t.Errorf("transcript = %q", transcript)
		}
		for _, s := range []string{"[user]\nq1 about the weather", "[assistant]\na1 sunny", `(calls tool current_time with {"timezone":"Europe/Berlin"})`, "[tool result]\n{\"time\":\"12:00\"}"} {
			if !strings.Contains(transcript, s) {
				t.Errorf("transcript lacks %q", s)
			}
		}
		if strings.Contains(transcript, "q3") || len(sreq.Body.Tools) != 0 {
			t.Errorf("summary request includes kept turns or tools")
		}

		sess, _ := h.Session(ctx, "scope")
		if sess.Compactions != 1 {
			t.Errorf("compactions = %d", sess.Compactions)
		}
		wantHook := hooks.CompactionContext{
			Agent: hooktest.Agent, SessionID: "scope", HistoryID: sess.ID, RoomID: hooktest.Room, ThreadID: hooktest.EventID,
			Messages: hookMessages(t, dropped), TokensBefore: total,
		}
		wantHook.CorrelationID = "corr-c"
		bs, as := ch.before.all(), ch.after.all()
		if len(bs) != 1 || len(as) != 1 {
			t.Fatalf("hooks ran before %d, after %d times", len(bs), len(as))
		}
		if ch.countAtBefore != 0 {
			t.Errorf("compaction:before ran after the summary request")
		}
		if !sameCompaction(bs[0], wantHook) {
			t.Errorf("compaction:before = %+v\nwant %+v", bs[0], wantHook)
		}
		wantHook.TokensAfter, wantHook.Summary = want.TokensAfter, summary
		if !sameCompaction(as[0], wantHook) {
			t.Errorf("compaction:after = %+v\nwant %+v", as[0], wantHook)
		}

		// A second compaction folds the earlier summary into the new one.
		srv.Script(llmtest.Text("Summary of everything."))
		res, err = h.Compact(compactCtx(ctx), compactReq(nil, agents.EstimateTokens(compacted...)-1, agents.EstimateTokens(turns[3]...), testModel(t, srv)))
		if err != nil || !res.Compacted || res.Dropped != 1+len(turns[2]) {
			t.Fatalf("second Compact = %+v, %v", res, err)
		}
		if tr := srv.LastRequest(t).LastUser(); !strings.HasPrefix(tr, "[system]\n"+agents.SummaryHeader+summary) {
			t.Errorf("second transcript = %q", tr)
		}
		got, _ = h.Load(ctx, "scope")
		if len(got) != 1+len(turns[3]) || got[0].Content != agents.SummaryHeader+"Summary of everything." {
			t.Errorf("after the second compaction: %+v", got)
		}
	})
}

func sameCompaction(a, b hooks.CompactionContext) bool {
	return a.Agent == b.Agent && a.SessionID == b.SessionID && a.HistoryID == b.HistoryID && a.RoomID == b.RoomID &&
		a.ThreadID == b.ThreadID && a.TokensBefore == b.TokensBefore && a.TokensAfter == b.TokensAfter &&
		a.Summary == b.Summary && a.CorrelationID == b.CorrelationID && reflect.DeepEqual(a.Messages, b.Messages)
}

// pairsIntact checks that msgs starts a turn and that every tool result
// follows the assistant message that called it.
func pairsIntact(t *testing.T, msgs []agents.Message) {
	t.Helper()
	if len(msgs) > 0 && msgs[0].Role != agents.RoleUser && msgs[0].Role != agents.RoleSystem {
		t.Errorf("history starts with a %s message", msgs[0].Role)
	}
	open := map[string]bool{}
	for i, m := range msgs {
		switch {
		case m.Role == agents.RoleAssistant && len(m.ToolCalls) > 0:
			for id := range open {
				t.Errorf("message %d: call %s has no result", i, id)
			}
			open = map[string]bool{}
			for _, tc := range m.ToolCalls {
				open[tc.ID] = true
			}
		case m.Role == agents.RoleTool:
			if !open[m.ToolCallID] {
				t.Errorf("message %d: result for %s without its call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		}
	}
	for id := range open {
		t.Errorf("call %s has no result", id)
	}
}

func TestCompactTruncates(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		turns, all := conversation()
		total := agents.EstimateTokens(all...)
		last := agents.EstimateTokens(turns[3]...)
		lastTwo := last + agents.EstimateTokens(turns[2]...)
		cases := []struct {
			name        string
			keep        int
			wantDropped int // turns
		}{
			{name: "keep room for one turn", keep: last, wantDropped: 3},
			{name: "keep less than the newest turn", keep: 1, wantDropped: 3},
			{name: "keep room that ends inside a tool pair", keep: lastTwo + 6, wantDropped: 2},
			{name: "keep room for all but the oldest turn", keep: total - agents.EstimateTokens(turns[0]...), wantDropped: 1},
			{name: "default keep is half the budget", keep: 0, wantDropped: 2},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				h, _ := newHistoryOn(t, dialect)
				ctx := hooktest.Context(t)
				seed(t, h, "scope")
				var ch compactionHooks
				budget := total - 1
				if tc.keep == 0 {
					budget = lastTwo * 2
				}
				res, err := h.Compact(compactCtx(ctx), compactReq(ch.registry(t, nil, nil), budget, tc.keep, nil))
				if err != nil {
					t.Fatal(err)
				}
				var kept, dropped []agents.Message
				for i, turn := range turns {
					if i < tc.wantDropped {
						dropped = append(dropped, turn...)
					} else {
						kept = append(kept, turn...)
					}
				}
				got, _ := h.Load(ctx, "scope")
				if !reflect.DeepEqual(got, kept) {
					t.Fatalf("kept %d messages, want the last %d turns (%d messages)", len(got), len(turns)-tc.wantDropped, len(kept))
				}
				pairsIntact(t, got)
				if !res.Compacted || res.Summarized || res.Summary != "" || res.Dropped != len(dropped) || res.TokensAfter != agents.EstimateTokens(kept...) {
					t.Errorf("result = %+v", res)
				}
				as := ch.after.all()
				if len(as) != 1 || as[0].Summary != "" || !reflect.DeepEqual(as[0].Messages, hookMessages(t, dropped)) || as[0].TokensAfter != res.TokensAfter {
					t.Errorf("compaction:after = %+v", as)
				}
			})
		}
	})
}

// TestCompactKeepsToolPairsAtEveryBudget sweeps every keep size over a
// history made only of tool-calling turns.
func TestCompactKeepsToolPairsAtEveryBudget(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		var all []agents.Message
		for i := range 6 {
			id := string(rune('a' + i))
			all = append(all, user("question "+id), callTool("x"+id, "clock", `{}`), toolResult("x"+id, "noon"),
				agents.Message{Role: agents.RoleAssistant, ToolCalls: []agents.ToolCall{{ID: "y" + id, Name: "clock"}, {ID: "z" + id, Name: "clock"}}},
				toolResult("y"+id, "1"), toolResult("z"+id, "2"), assistant("answer "+id))
		}
		total := agents.EstimateTokens(all...)
		h, _ := newHistoryOn(t, dialect)
		ctx := t.Context()
		for keep := 1; keep < total; keep += 11 {
			scope := agents.ScopeKey(sprintf("scope-%d", keep))
			if _, err := h.Append(ctx, scope, "a", all...); err != nil {
				t.Fatal(err)
			}
			res, err := h.Compact(ctx, agents.CompactRequest{Scope: scope, Budget: total - 1, Keep: keep})
			if err != nil || !res.Compacted {
				t.Fatalf("keep %d: %+v, %v", keep, res, err)
			}
			got, _ := h.Load(ctx, scope)
			pairsIntact(t, got)
			if len(got) == 0 || len(got)%7 != 0 || !reflect.DeepEqual(got, all[len(all)-len(got):]) {
				t.Fatalf("keep %d: kept %d messages", keep, len(got))
			}
		}
	})
}

func TestCompactNothingToDo(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		cases := []struct {
			name   string
			msgs   []agents.Message
			budget int
		}{
			{name: "within budget", msgs: []agents.Message{user("hi"), assistant("hello")}, budget: 1000},
			{name: "one huge turn", msgs: []agents.Message{user(strings.Repeat("x", 4000)), assistant("ok")}, budget: 10},
			{name: "empty scope", budget: 0},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				h, _ := newHistoryOn(t, dialect)
				ctx := hooktest.Context(t)
				if _, err := h.Append(ctx, "scope", "a", tc.msgs...); err != nil {
					t.Fatal(err)
				}
				var ch compactionHooks
				res, err := h.Compact(compactCtx(ctx), compactReq(ch.registry(t, nil, nil), tc.budget, 0, nil))
				if err != nil || res.Compacted || res.TokensBefore != agents.EstimateTokens(tc.msgs...) {
					t.Fatalf("Compact = %+v, %v", res, err)
				}
				got, _ := h.Load(ctx, "scope")
				if len(got) != len(tc.msgs) || len(ch.before.all())+len(ch.after.all()) != 0 {
					t.Errorf("history changed or hooks ran")
				}
			})
		}
	})
}

func TestCompactFailures(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		_, all := conversation()
		budget := agents.EstimateTokens(all...) - 1
		cases := []struct {
			name    string
			reply   llmtest.Reply
			during  func(t *testing.T, h *agents.History) func(context.Context)
			wantErr error
			modelOK bool // the summary model is asked
		}{
			{name: "summary model fails", reply: llmtest.HTTPError(500, "down"), modelOK: true},
			{name: "summary is empty", reply: llmtest.Text("  \n"), modelOK: true},
			{name: "compacted by someone else meanwhile", reply: llmtest.Text("s"), wantErr: agents.ErrHistoryChanged, modelOK: true,
				during: func(t *testing.T, h *agents.History) func(context.Context) {
					return func(ctx context.Context) {
						if _, err := h.Compact(ctx, agents.CompactRequest{Scope: "scope", Budget: budget}); err != nil {
							t.Errorf("inner Compact: %v", err)
						}
					}
				}},
			{name: "deleted meanwhile", reply: llmtest.Text("s"), wantErr: agents.ErrHistoryChanged, modelOK: true,
				during: func(t *testing.T, h *agents.History) func(context.Context) {
					return func(ctx context.Context) {
						if err := h.Delete(ctx, "scope"); err != nil {
							t.Errorf("Delete: %v", err)
						}
					}
				}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				h, _ := newHistoryOn(t, dialect)
				ctx := hooktest.Context(t)
				seed(t, h, "scope")
				srv := llmtest.NewServer(t, tc.reply)
				var ch compactionHooks
				var during func(context.Context)
				if tc.during != nil {
					during = tc.during(t, h)
				}
				before, _ := h.Load(ctx, "scope")
				_, err := h.Compact(compactCtx(ctx), compactReq(ch.registry(t, srv, during), budget, 0, testModel(t, srv)))
				if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
					t.Fatalf("Compact error = %v, want %v", err, tc.wantErr)
				}
				t.Logf("error: %v", err)
				if tc.during == nil {
					if after, _ := h.Load(ctx, "scope"); !reflect.DeepEqual(after, before) {
						t.Errorf("history changed by a failed compaction")
					}
				}
				if len(ch.after.all()) != 0 {
					t.Errorf("compaction:after fired for a failed compaction")
				}
				if (srv.Count() == 1) != tc.modelOK {
					t.Errorf("summary requests = %d", srv.Count())
				}
			})
		}
	})
}

func TestCompactKeepsMessagesAppendedMeanwhile(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		h, _ := newHistoryOn(t, dialect)
		ctx := hooktest.Context(t)
		turns, all := seed(t, h, "scope")
		late := []agents.Message{user("q5 arrived during compaction"), assistant("a5")}
		srv := llmtest.NewServer(t, llmtest.Text("summary"))
		var ch compactionHooks
		reg := ch.registry(t, srv, func(ctx context.Context) {
			if _, err := h.Append(ctx, "scope", "assistant", late...); err != nil {
				t.Errorf("Append during compaction: %v", err)
			}
		})
		res, err := h.Compact(compactCtx(ctx), compactReq(reg, agents.EstimateTokens(all...)-1, agents.EstimateTokens(turns[3]...), testModel(t, srv)))
		if err != nil || !res.Compacted {
			t.Fatalf("Compact = %+v, %v", res, err)
		}
		got, _ := h.Load(ctx, "scope")
		want := append(append([]agents.Message{{Role: agents.RoleSystem, Content: agents.SummaryHeader + "summary"}}, turns[3]...), late...)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("history =\n%+v\nwant\n%+v", got, want)
		}
		if _, err := h.Append(ctx, "scope", "assistant", user("q6")); err != nil {
			t.Fatal(err)
		}
		got, _ = h.Load(ctx, "scope")
		if got[len(got)-1].Content != "q6" {
			t.Errorf("append after compaction landed at the wrong place: %+v", got)
		}
	})
}

func TestHistoryBudget(t *testing.T) {
	cases := []struct {
		window   int
		fraction float64
		want     int
	}{
		{8192, 0, 4096},
		{8192, 0.75, 6144},
		{128000, 2, 64000},
		{1000, -1, 500},
	}
	for _, tc := range cases {
		if got := agents.HistoryBudget(tc.window, tc.fraction); got != tc.want {
			t.Errorf("HistoryBudget(%d, %v) = %d, want %d", tc.window, tc.fraction, got, tc.want)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	cases := []struct {
		name string
		text string
		want int
	}{
		{"empty", "", 0},
		{"ascii rounds up", "abcde", 2},
		{"four ascii bytes", "abcd", 1},
		{"cjk counts per character", "日本語", 3},
		{"mixed: four ASCII bytes and one other", "héllo", 1 + 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := agents.EstimateTextTokens(tc.text); got != tc.want {
				t.Errorf("EstimateTextTokens(%q) = %d, want %d", tc.text, got, tc.want)
			}
		})
	}
	msg := agents.Message{Role: agents.RoleAssistant, Content: "abcd", ToolCalls: []agents.ToolCall{{ID: "c1", Name: "time", Arguments: "{}"}}}
	if got, want := agents.EstimateTokens(msg), agents.MessageOverheadTokens+1+agents.MessageOverheadTokens+1+1+1; got != want {
		t.Errorf("EstimateTokens = %d, want %d", got, want)
	}
}
