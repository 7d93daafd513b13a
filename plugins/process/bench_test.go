package process_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins/process"
)

// BenchmarkRoundTrip measures one message:before_response emission to the
// fake plugin's footer hook: the host's share of a round trip (the fake
// plugin speaks the protocol with the jsonrpc package and no SDK).
func BenchmarkRoundTrip(b *testing.B) {
	spec := process.Spec{Name: "bench", Command: []string{must(testExecutableB())}, Env: []string{"HOOKROOM_TEST_PLUGIN=ok"}, StateDir: b.TempDir()}
	p, err := process.Start(context.Background(), spec)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	hs := p.Hooks()
	i := slices.IndexFunc(hs, func(h hooks.Hook) bool { return h.Name() == "footer" })
	reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "bench", Hooks: hs[i : i+1]}}, hooks.Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var samples []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		c := hooktest.BeforeResponse("Hello")
		start := time.Now()
		if err := hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
		if c.Draft.Text != "Hello\n-- footer" {
			b.Fatalf("draft = %q", c.Draft.Text)
		}
	}
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds())/1e3, "p99-µs")
}
