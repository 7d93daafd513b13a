package hooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
)

func benchRegistry[T any](b *testing.B, ev hooks.Event[T], n int, inline bool, fn func(context.Context, *T) error) *hooks.Registry {
	b.Helper()
	var opts []hooks.Option
	if inline {
		opts = append(opts, hooks.Inline())
	}
	hs := make([]hooks.Hook, n)
	for i := range hs {
		hs[i] = hooks.Handle(ev, fmt.Sprintf("h%d", i), fn, opts...)
	}
	reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "bench", Hooks: hs}}, hooks.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

// reportPerHook adds the cost per hook per emission, the figure the
// targets are stated in.
func reportPerHook(b *testing.B, n int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/hook")
}

var sizes = []int{1, 10, 50}

// benchModes runs emit for every path (ordinary hooks on a worker, Inline
// hooks on the emitter) and size: sub-benchmarks PATH/hooks=N, the names
// scripts/bench-hooks.sh reads.
func benchModes[T any](b *testing.B, ev hooks.Event[T], fn func(context.Context, *T) error, emit func(*testing.B, *hooks.Registry, int)) {
	for _, path := range []string{"ordinary", "inline"} {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/hooks=%d", path, n), func(b *testing.B) {
				reg := benchRegistry(b, ev, n, path == "inline", fn)
				b.ReportAllocs()
				emit(b, reg, n)
				reportPerHook(b, n)
			})
		}
	}
}

func BenchmarkObserver(b *testing.B) {
	benchModes(b, hooks.MessageReceived, func(context.Context, *hooks.MessageReceivedContext) error { return nil },
		func(b *testing.B, reg *hooks.Registry, _ int) {
			ctx := context.Background()
			for b.Loop() {
				c := &hooks.MessageReceivedContext{Envelope: hooks.Envelope{Body: "hi", AgentName: "a"}}
				c.CorrelationID = "bench"
				if err := hooks.Emit(ctx, reg, hooks.MessageReceived, c); err != nil {
					b.Fatal(err)
				}
			}
		})
}

func BenchmarkClaim(b *testing.B) {
	benchModes(b, hooks.MessageClaim, func(context.Context, *hooks.MessageClaimContext) error { return nil },
		func(b *testing.B, reg *hooks.Registry, _ int) {
			ctx := context.Background()
			for b.Loop() {
				c := &hooks.MessageClaimContext{Envelope: hooks.Envelope{Body: "hi", AgentName: "a"}}
				c.CorrelationID = "bench"
				_ = hooks.Emit(ctx, reg, hooks.MessageClaim, c)
			}
		})
}

func BenchmarkTransformer(b *testing.B) {
	benchModes(b, hooks.MessageBeforeResponse, func(_ context.Context, c *hooks.BeforeResponseContext) error {
		c.Draft.Text = "x"
		return nil
	}, func(b *testing.B, reg *hooks.Registry, _ int) {
		ctx := context.Background()
		for b.Loop() {
			c := &hooks.BeforeResponseContext{Draft: hooks.ResponseDraft{Text: "hello", Kind: hooks.ResponseAI}}
			c.CorrelationID = "bench"
			_ = hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c)
			if c.Draft.Text != "x" {
				b.Fatalf("text = %q", c.Draft.Text)
			}
		}
	})
}

func BenchmarkGate(b *testing.B) {
	args := json.RawMessage(`{"path":"/tmp/x"}`)
	benchModes(b, hooks.ToolBeforeCall, func(context.Context, *hooks.ToolBeforeCallContext) error { return nil },
		func(b *testing.B, reg *hooks.Registry, _ int) {
			ctx := context.Background()
			for b.Loop() {
				c := &hooks.ToolBeforeCallContext{ToolCall: hooks.ToolCall{Tool: "read_file", Arguments: args, Agent: "a"}}
				c.CorrelationID = "bench"
				_ = hooks.Emit(ctx, reg, hooks.ToolBeforeCall, c)
			}
		})
}

func BenchmarkCollector(b *testing.B) {
	benchModes(b, hooks.MessageEnrich, func(_ context.Context, c *hooks.MessageEnrichContext) error {
		c.AddMetadata("k", "v")
		return nil
	}, func(b *testing.B, reg *hooks.Registry, n int) {
		ctx := context.Background()
		for b.Loop() {
			c := &hooks.MessageEnrichContext{Envelope: hooks.Envelope{Body: "hi", AgentName: "a"}}
			c.CorrelationID = "bench"
			_ = hooks.Emit(ctx, reg, hooks.MessageEnrich, c)
			if len(c.Items) != n {
				b.Fatalf("items = %d", len(c.Items))
			}
		}
	})
}

// BenchmarkCollectorSlowHooks runs 50 collector hooks that each take 100 ms
// (in real time): the emission takes about as long as one of them.
func BenchmarkCollectorSlowHooks(b *testing.B) {
	reg := benchRegistry(b, hooks.MessageEnrich, 50, false, func(_ context.Context, c *hooks.MessageEnrichContext) error {
		time.Sleep(100 * time.Millisecond)
		c.AddMetadata("k", "v")
		return nil
	})
	ctx := context.Background()
	var worst time.Duration
	for b.Loop() {
		c := &hooks.MessageEnrichContext{Envelope: hooks.Envelope{Body: "hi", AgentName: "a"}}
		start := time.Now()
		if err := hooks.Emit(ctx, reg, hooks.MessageEnrich, c); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(start))
		if len(c.Items) != 50 {
			b.Fatalf("items = %d", len(c.Items))
		}
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
}

// nopObserver is a RunObserver that does nothing.
type nopObserver struct{}

func (nopObserver) HookRan(context.Context, hooks.HookRun) {}

// BenchmarkRunObserver runs 10 transformer hooks with a RunObserver: the
// cost of HookRun.Effect (always computed when there is an observer) and,
// with WithRunDetail, of HookRun.Change.
func BenchmarkRunObserver(b *testing.B) {
	for _, detail := range []bool{false, true} {
		b.Run(fmt.Sprintf("detail=%v", detail), func(b *testing.B) {
			hs := make([]hooks.Hook, 10)
			for i := range hs {
				hs[i] = hooks.Handle(hooks.MessageBeforeResponse, fmt.Sprintf("h%d", i), func(_ context.Context, c *hooks.BeforeResponseContext) error {
					c.Draft.Text = "x"
					return nil
				})
			}
			reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "bench", Hooks: hs}}, hooks.Options{Observer: nopObserver{}})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if detail {
				ctx = hooks.WithRunDetail(ctx)
			}
			b.ReportAllocs()
			for b.Loop() {
				c := &hooks.BeforeResponseContext{Draft: hooks.ResponseDraft{Text: "hello", Kind: hooks.ResponseAI}}
				c.CorrelationID = "bench"
				_ = hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c)
			}
			reportPerHook(b, 10)
		})
	}
}
