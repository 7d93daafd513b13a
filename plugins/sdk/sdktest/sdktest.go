package sdktest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// emit emits c in reg, failing the test on error.
func emit[T any, P hooks.ContextOf[T]](t *testing.T, ctx context.Context, reg *hooks.Registry, ev hooks.Event[T], c P) {
	t.Helper()
	if err := hooks.Emit(ctx, reg, ev, c); err != nil {
		t.Fatalf("emit %s: %v", ev.Name(), err)
	}
}

// RunShared runs, as subtests of t, the checks every SDK's test plugin
// passes once registered in reg: its "guard" gate declines reading
// secret.txt and, failing on unreadable arguments, fails closed; its
// claim answers "ping" with "pong"; its schedule hook rewrites a fired
// task's text. ctx is the emissions' context (it carries the logger).
func RunShared(t *testing.T, ctx context.Context, reg *hooks.Registry) {
	t.Run("gate", func(t *testing.T) {
		c := hooktest.ToolBeforeCall("read_file", `{"path":"secret.txt"}`)
		emit(t, ctx, reg, hooks.ToolBeforeCall, c)
		if !c.Declined || c.DeclineReason != "secrets stay unread" {
			t.Errorf("declined=%v reason=%q", c.Declined, c.DeclineReason)
		}
		// Unreadable arguments make the guard fail; it fails closed.
		c = hooktest.ToolBeforeCall("read_file", `[1]`)
		emit(t, ctx, reg, hooks.ToolBeforeCall, c)
		if !c.Declined || !strings.Contains(c.DeclineReason, "was unavailable (failed)") {
			t.Errorf("declined=%v reason=%q", c.Declined, c.DeclineReason)
		}
	})
	t.Run("claim", func(t *testing.T) {
		c := hooktest.MessageClaim("ping")
		emit(t, ctx, reg, hooks.MessageClaim, c)
		if c.Claimed == nil || c.Claimed.Text != "pong" {
			t.Errorf("claimed = %+v", c.Claimed)
		}
	})
	t.Run("schedule", func(t *testing.T) {
		c := &hooks.ScheduleFiredContext{TaskID: "t", RoomID: hooktest.Room, MessageText: "standup"}
		emit(t, ctx, reg, hooks.ScheduleFired, c)
		if c.MessageText != "rewritten: standup" {
			t.Errorf("message_text = %q", c.MessageText)
		}
	})
}

// Only returns the hook named name of hs (as a one-hook slice), for a
// registry that benchmarks it alone. It fails tb when there is none.
func Only(tb testing.TB, hs []hooks.Hook, name string) []hooks.Hook {
	tb.Helper()
	i := slices.IndexFunc(hs, func(h hooks.Hook) bool { return h.Name() == name })
	if i < 0 {
		tb.Fatalf("no hook %q", name)
	}
	return hs[i : i+1]
}

// BenchEmit emits message:before_response with the draft "Hello" in reg
// b.N times (b.Loop), failing b unless each emission turns the draft into
// want and the registry's first hook never failed, and reports the median
// and 99th percentile of the emissions (ReportPercentiles).
func BenchEmit(b *testing.B, reg *hooks.Registry, want string) {
	b.Helper()
	ctx := context.Background()
	var samples []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		c := &hooks.BeforeResponseContext{Draft: hooks.ResponseDraft{Text: "Hello", Kind: hooks.ResponseAI, Envelope: hooks.Envelope{
			RoomID: "!room:localhost", Body: "hi", AgentName: "assistant", RequesterID: "@alice:localhost", SenderID: "@alice:localhost",
		}}}
		c.CorrelationID = "bench"
		start := time.Now()
		if err := hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
		if c.Draft.Text != want {
			b.Fatalf("draft = %q", c.Draft.Text)
		}
	}
	if s := reg.Stats(); s[0].Errors+s[0].Timeouts+s[0].Panics > 0 {
		b.Fatalf("hook failures during the benchmark: %+v", s[0])
	}
	ReportPercentiles(b, samples)
}

// ReportPercentiles adds the p50-µs and p99-µs metrics of samples (sorted
// in place) to b.
func ReportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[int(q*float64(len(samples)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
