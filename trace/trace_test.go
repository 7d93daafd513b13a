package trace

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Every method of a nil Recorder does nothing, and a context without one
// yields nil.
func TestRecorderNil(t *testing.T) {
	r := From(context.Background())
	if r != nil {
		t.Fatalf("From of a bare context = %v, want nil", r)
	}
	r.Stage(StageRouted)
	r.Hook(HookRun{Event: "e", Effect: EffectChanged})
	r.Model(ModelCall{Model: "m", PromptTokens: 1})
	r.Tool(ToolCall{Name: "t"})
	r.Approval(Approval{ID: "a"})
	r.Delivered(DeliveryMessage, "$x")
	if d := r.Since(); d != 0 {
		t.Errorf("Since = %v, want 0", d)
	}
	if tr := r.Finish(OutcomeResponded, ""); tr != nil {
		t.Errorf("Finish = %+v, want nil", tr)
	}
	if got := From(WithRecorder(context.Background(), nil)); got != nil {
		t.Errorf("From(WithRecorder(nil)) = %v, want nil", got)
	}
}

func TestRecorderRecords(t *testing.T) {
	start := time.Now()
	r := NewRecorder(Trace{EventID: "$m", Agent: "helper", RoomID: "!r", Sender: "@a:x"}, start)
	if got := From(WithRecorder(context.Background(), r)); got != r {
		t.Fatalf("From(WithRecorder(r)) = %p, want %p", got, r)
	}
	r.Stage(StageRouted)
	r.Stage(StageReceived) // recorded by NewRecorder: not again
	r.Stage(StageRouted)   // not again either
	r.Hook(HookRun{Event: "message:received", Plugin: "p", Hook: "h", Effect: EffectUnchanged})
	r.Model(ModelCall{Model: "m", PromptTokens: 10, CompletionTokens: 5})
	r.Model(ModelCall{Model: "m", PromptTokens: 1, CompletionTokens: 2})
	r.Tool(ToolCall{Name: "search"})
	r.Approval(Approval{ID: "a1", Decision: "approved"})
	r.Delivered(DeliveryPlaceholder, "$p")
	tr := r.Finish(OutcomeResponded, "fine")

	if tr.Started != start || tr.Ended.Before(start) || tr.Duration() < 0 {
		t.Errorf("Started %v, Ended %v", tr.Started, tr.Ended)
	}
	if len(tr.Stages) != 2 || tr.Stages[0] != (Stage{Name: StageReceived}) || tr.Stages[1].Name != StageRouted {
		t.Errorf("Stages = %+v; want received at 0, routed", tr.Stages)
	}
	if tr.Tokens != 18 || len(tr.Models) != 2 {
		t.Errorf("Tokens %d, models %d; want 18, 2", tr.Tokens, len(tr.Models))
	}
	if len(tr.Hooks) != 1 || len(tr.Tools) != 1 || len(tr.Approvals) != 1 || len(tr.Delivery) != 1 || tr.Dropped != 0 {
		t.Errorf("trace = %+v", tr)
	}
	if tr.Delivery[0] != (Delivery{Kind: DeliveryPlaceholder, EventID: "$p", At: tr.Delivery[0].At}) {
		t.Errorf("Delivery = %+v", tr.Delivery)
	}
	if tr.Outcome != OutcomeResponded || tr.Detail != "fine" || tr.EventID != "$m" || tr.Agent != "helper" {
		t.Errorf("trace = %+v", tr)
	}
}

// Each list keeps Limits.Entries entries and counts the rest in Dropped;
// tokens count even from dropped model calls; texts are cut.
func TestRecorderLimits(t *testing.T) {
	r := NewRecorder(Trace{}, time.Now())
	r.limits = Limits{Entries: 2, Text: 8}
	long := "ab€cdefghij" // € is 3 bytes at 2..4
	for range 3 {
		r.Hook(HookRun{Change: long, Error: long})
		r.Model(ModelCall{PromptTokens: 1, CompletionTokens: 1, Error: long})
		r.Tool(ToolCall{Arguments: long, Result: long, Reason: long, Error: long})
		r.Approval(Approval{})
		r.Delivered(DeliveryEdit, "")
	}
	tr := r.Finish("error", long)
	if len(tr.Hooks) != 2 || len(tr.Models) != 2 || len(tr.Tools) != 2 || len(tr.Approvals) != 2 || len(tr.Delivery) != 2 {
		t.Errorf("lists hold %d %d %d %d %d; want 2 each", len(tr.Hooks), len(tr.Models), len(tr.Tools), len(tr.Approvals), len(tr.Delivery))
	}
	if tr.Dropped != 5 {
		t.Errorf("Dropped = %d, want 5", tr.Dropped)
	}
	if tr.Tokens != 6 {
		t.Errorf("Tokens = %d, want 6 (dropped calls count)", tr.Tokens)
	}
	const cut = "ab€…" // 5+3 bytes
	for _, s := range []string{tr.Hooks[0].Change, tr.Hooks[1].Error, tr.Models[0].Error,
		tr.Tools[0].Arguments, tr.Tools[0].Result, tr.Tools[0].Reason, tr.Tools[1].Error, tr.Detail} {
		if s != cut {
			t.Errorf("text %q, want %q", s, cut)
		}
	}
}

func TestCut(t *testing.T) {
	cases := []struct {
		s    string
		n    int
		want string
	}{
		{"", 5, ""},
		{"hello", 5, "hello"},
		{"hello", 10, "hello"},
		{"hello world", 8, "hello…"},
		{"héllo", 6, "héllo"},  // exactly 6 bytes
		{"héllo", 5, "h…"},     // é would end at byte 3, … needs 3 more
		{"ééééé", 7, "éé…"},    // 2+2+3 bytes
		{"ééééé", 8, "éé…"},    // a third é would split at byte 5
		{"👋👋👋", 8, "👋…"},       // 4+3 bytes: one wave fits
		{"x👋👋", 7, "x…"},       // the wave would need 1+4+3
		{"日本語のテキスト", 9, "日本…"}, // 3-byte runes
		{"…………", 6, "……"},      // the cut mark itself
	}
	for _, tc := range cases {
		got := Cut(tc.s, tc.n)
		if got != tc.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if !utf8.ValidString(got) || len(got) > tc.n {
			t.Errorf("Cut(%q, %d) = %q: invalid UTF-8 or over %d bytes", tc.s, tc.n, got, tc.n)
		}
	}
	// Every cut of a mixed text at every length is valid UTF-8 within the limit.
	s := strings.Repeat("aé日👋", 20)
	for n := len("…"); n <= len(s)+1; n++ {
		got := Cut(s, n)
		if !utf8.ValidString(got) || len(got) > n || (n < len(s) && !strings.HasSuffix(got, "…")) {
			t.Fatalf("Cut(s, %d) = %q", n, got)
		}
		if !strings.HasPrefix(s, strings.TrimSuffix(got, "…")) {
			t.Fatalf("Cut(s, %d) = %q: not a prefix", n, got)
		}
	}
}

// After Finish nothing changes the trace, nothing is counted as dropped,
// and a second Finish returns the same trace.
func TestRecorderFinishFreezes(t *testing.T) {
	r := NewRecorder(Trace{EventID: "$m"}, time.Now())
	r.Hook(HookRun{Event: "e"})
	first := r.Finish(OutcomeResponded, "first")
	r.Stage(StageFinal)
	r.Hook(HookRun{Event: "late"})
	r.Model(ModelCall{PromptTokens: 100})
	r.Tool(ToolCall{Name: "late"})
	r.Approval(Approval{ID: "late"})
	r.Delivered(DeliveryRedact, "$late")
	second := r.Finish("error", "second")
	if second.Outcome != OutcomeResponded || second.Detail != "first" || !second.Ended.Equal(first.Ended) {
		t.Errorf("second Finish = %s %q %v; want the first %s %q %v", second.Outcome, second.Detail, second.Ended, first.Outcome, first.Detail, first.Ended)
	}
	if len(second.Stages) != 1 || len(second.Hooks) != 1 || len(second.Models) != 0 || len(second.Tools) != 0 ||
		len(second.Approvals) != 0 || len(second.Delivery) != 0 || second.Tokens != 0 || second.Dropped != 0 {
		t.Errorf("trace changed after Finish: %+v", second)
	}
	if second == first {
		t.Error("Finish returned the same pointer twice; want a copy each time")
	}
}

// Hooks report from their own goroutines: concurrent calls (and a Finish
// racing them) are safe under -race and lose nothing but what Finish cut off
// or the limit dropped.
func TestRecorderConcurrent(t *testing.T) {
	const goroutines, each = 16, 25
	r := NewRecorder(Trace{}, time.Now())
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				r.Hook(HookRun{Event: "e", Plugin: "p", Hook: "h", Effect: EffectChanged, Change: strings.Repeat("x", g+i)})
				r.Model(ModelCall{PromptTokens: 1})
				r.Stage(StageFirstToken)
				_ = r.Since()
			}
		})
	}
	wg.Wait()
	tr := r.Finish(OutcomeResponded, "")
	total := goroutines * each
	if len(tr.Hooks) != min(total, DefaultLimits.Entries) || len(tr.Models) != min(total, DefaultLimits.Entries) {
		t.Errorf("hooks %d, models %d; want %d each", len(tr.Hooks), len(tr.Models), min(total, DefaultLimits.Entries))
	}
	if want := 2 * max(0, total-DefaultLimits.Entries); tr.Dropped != want {
		t.Errorf("Dropped = %d, want %d", tr.Dropped, want)
	}
	if tr.Tokens != total {
		t.Errorf("Tokens = %d, want %d", tr.Tokens, total)
	}
	if len(tr.Stages) != 2 {
		t.Errorf("Stages = %+v; want received and first_token once", tr.Stages)
	}

	// Finish racing the reports.
	r = NewRecorder(Trace{}, time.Now())
	for range goroutines {
		wg.Go(func() {
			for range each {
				r.Hook(HookRun{Event: "e"})
				r.Delivered(DeliveryEdit, "$e")
			}
		})
	}
	wg.Go(func() { _ = r.Finish(OutcomeResponded, "") })
	wg.Wait()
	a := r.Finish("error", "")
	b := r.Finish("error", "")
	if a.Outcome != OutcomeResponded || len(a.Hooks) != len(b.Hooks) || len(a.Delivery) != len(b.Delivery) {
		t.Errorf("frozen traces differ: %d/%d hooks, %d/%d deliveries", len(a.Hooks), len(b.Hooks), len(a.Delivery), len(b.Delivery))
	}
}

func TestFork(t *testing.T) {
	start := time.Now().Add(-time.Second)
	pre := NewRecorder(Trace{}, start)
	pre.Hook(HookRun{Event: "message:received", Plugin: "p", Hook: "h", Effect: EffectChanged})
	pre.Model(ModelCall{Model: "router", PromptTokens: 10, CompletionTokens: 2})

	a := pre.Fork(Trace{Agent: "a"})
	b := pre.Fork(Trace{Agent: "b"})
	a.Hook(HookRun{Event: "message:enrich", Plugin: "p", Hook: "e"})
	ta, tb := a.Finish(OutcomeResponded, ""), b.Finish(OutcomeResponded, "")
	if !ta.Started.Equal(start) || ta.Agent != "a" || tb.Agent != "b" {
		t.Errorf("forks: %+v / %+v", ta, tb)
	}
	if len(ta.Hooks) != 2 || len(tb.Hooks) != 1 || ta.Hooks[0].Event != "message:received" || tb.Tokens != 12 {
		t.Errorf("fork a has %d hooks, fork b %d hooks and %d tokens; want 2, 1, 12", len(ta.Hooks), len(tb.Hooks), tb.Tokens)
	}
	if len(ta.Stages) != 1 || ta.Stages[0].Name != StageReceived {
		t.Errorf("fork stages %+v", ta.Stages)
	}
	if pre.Finish("", "").Hooks[0].Event != "message:received" || len(pre.Finish("", "").Hooks) != 1 {
		t.Error("forking changed the original")
	}
	if (*Recorder)(nil).Fork(Trace{}) != nil {
		t.Error("a nil recorder forked")
	}
}
