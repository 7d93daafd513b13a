package hooks_test

import (
	"context"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

// BenchmarkModelEventsUnsubscribed is what the model events cost a turn
// when no plugin subscribes to them: the checks a turn with one tool call
// makes (model:resolve once, model:request and model:response per round,
// tool:result per call, the usage:budget_reached lookup), against a
// registry holding hooks for other events, as a real configuration does.
// The figure (ns/turn) is compared with the turn latency benchmark's
// p50 (bot: BenchmarkTurnLatency) in docs/hooks.md §3.
func BenchmarkModelEventsUnsubscribed(b *testing.B) {
	noop := func(context.Context, *hooks.MessageReceivedContext) error { return nil }
	var hs []hooks.Hook
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		hs = append(hs, hooks.Handle(hooks.MessageReceived, name, noop))
	}
	reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "others", Hooks: hs}}, hooks.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var n int
	b.ReportAllocs()
	for b.Loop() {
		c := &hooks.ModelResolveContext{}
		if err := hooks.Emit(ctx, reg, hooks.ModelResolve, c); err != nil {
			b.Fatal(err)
		}
		for round := 0; round < 2; round++ {
			if hooks.Subscribed(reg, hooks.ModelRequest) {
				n++
			}
			if hooks.Subscribed(reg, hooks.ModelResponse) {
				n++
			}
		}
		if hooks.Subscribed(reg, hooks.ToolResult) {
			n++
		}
		if reg.Has(hooks.UsageBudgetReached.Name()) {
			n++
		}
	}
	if n != 0 {
		b.Fatalf("%d checks found a subscriber", n)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/turn")
}
