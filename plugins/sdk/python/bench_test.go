package python_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process"
)

// BenchmarkHookRoundTrip measures one message:before_response emission with
// the Python test plugin's single "footer" hook, reporting the median and
// the 99th percentile. Compare with plugins/sdk's BenchmarkHookRoundTrip
// (in-process and Go SDK).
func BenchmarkHookRoundTrip(b *testing.B) {
	b.Run("python-sdk-process", func(b *testing.B) {
		p, err := process.Start(context.Background(), spec(b, "ok"))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		hs := p.Hooks()
		i := slices.IndexFunc(hs, func(h hooks.Hook) bool { return h.Name() == "footer" })
		reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "py-test", Hooks: hs[i : i+1]}}, hooks.Options{})
		if err != nil {
			b.Fatal(err)
		}
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
			if c.Draft.Text != "Hello\n-- sent by hookroom" {
				b.Fatalf("draft = %q", c.Draft.Text)
			}
		}
		if s := reg.Stats(); s[0].Errors+s[0].Timeouts > 0 {
			b.Fatalf("hook failures during the benchmark: %+v", s[0])
		}
		slices.Sort(samples)
		at := func(q float64) float64 { return float64(samples[int(q*float64(len(samples)-1))].Nanoseconds()) / 1e3 }
		b.ReportMetric(at(0.50), "p50-µs")
		b.ReportMetric(at(0.99), "p99-µs")
	})
}
