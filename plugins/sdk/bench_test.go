package sdk_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/process"
)

// BenchmarkHookRoundTrip measures one message:before_response emission with
// the test plugin's single "footer" hook: built in, and as a process speaking
// the protocol through this SDK. It reports the median and the 99th
// percentile of the individual emissions next to ns/op.
func BenchmarkHookRoundTrip(b *testing.B) {
	settings, err := hooks.NewSettings(testSettings)
	if err != nil {
		b.Fatal(err)
	}
	only := func(hs []hooks.Hook) []hooks.Hook {
		i := slices.IndexFunc(hs, func(h hooks.Hook) bool { return h.Name() == "footer" })
		return hs[i : i+1]
	}
	b.Run("in-process", func(b *testing.B) {
		inst, err := testPlugin.Builtin().New(context.Background(), plugins.Env{Name: "sdk-test", Settings: settings})
		if err != nil {
			b.Fatal(err)
		}
		reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "sdk-test", Hooks: only(inst.Hooks()), Settings: settings}}, hooks.Options{})
		if err != nil {
			b.Fatal(err)
		}
		benchEmit(b, reg)
	})
	b.Run("go-sdk-process", func(b *testing.B) {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		p, err := process.Start(context.Background(), process.Spec{
			Name: "sdk-test", Command: []string{exe}, Env: benchEnv(),
			StateDir: b.TempDir(), Settings: settings,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "sdk-test", Hooks: only(p.Hooks()), Settings: settings}}, hooks.Options{})
		if err != nil {
			b.Fatal(err)
		}
		benchEmit(b, reg)
	})
}

// benchEmit emits message:before_response b.N times and reports p50/p99.
func benchEmit(b *testing.B, reg *hooks.Registry) {
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
		if c.Draft.Text != "Hello\n-- sent by hookroom" {
			b.Fatalf("draft = %q", c.Draft.Text)
		}
	}
	if s := reg.Stats(); s[0].Errors+s[0].Timeouts+s[0].Panics > 0 {
		b.Fatalf("hook failures during the benchmark: %+v", s[0])
	}
	ReportPercentiles(b, samples)
}

// ReportPercentiles adds p50-µs and p99-µs metrics.
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

// benchEnv is the plugin's environment; HOOKROOM_BENCH_CHILD_GOMAXPROCS
// passes GOMAXPROCS on to it, to compare scheduler settings.
func benchEnv() []string {
	env := []string{"HOOKROOM_SDK_TEST=1"}
	if v := os.Getenv("HOOKROOM_BENCH_CHILD_GOMAXPROCS"); v != "" {
		env = append(env, "GOMAXPROCS="+v)
	}
	return env
}
