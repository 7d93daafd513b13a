package bot

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkWarmStart measures a restart with 10, 100 and 1,000 configured
// rooms: each sub-benchmark provisions its rooms once (a cold start,
// reported as cold-s), then every iteration is a warm restart on the same
// database, timed from New and Run to every account caught up (bot:ready
// for the router and the agents). The 1000:10 ratio of the warm times is
// logged at the end. Creating 1,000 rooms on Dendrite takes minutes, so
// run it on its own (benchmarks never run in a plain go test):
//
//	go test -tags goolm -run XXX -bench WarmStart -benchtime 5x -timeout 30m ./bot/
func BenchmarkWarmStart(b *testing.B) {
	warm := map[int]time.Duration{}
	sizes := []int{10, 100, 1000}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("rooms=%d", n), func(b *testing.B) {
			e := newEnv(b)
			var body strings.Builder
			body.WriteString("rooms:\n")
			var keys []string
			for i := range n {
				key := fmt.Sprintf("r%04d", i)
				keys = append(keys, key)
				fmt.Fprintf(&body, "  %s:\n    alias: %s\n", key, e.localpart(key))
			}
			// One agent in every room, one in ten of them.
			fmt.Fprintf(&body, "agents:\n  helper:\n    username: %s\n    rooms: [%s]\n", e.localpart("helper"), strings.Join(keys, ", "))
			fmt.Fprintf(&body, "  other:\n    username: %s\n    rooms: [%s]\n", e.localpart("other"), strings.Join(keys[:max(1, n/10)], ", "))
			cfg := e.config(body.String())
			var rec events
			start := time.Now()
			r := e.startWithin(cfg, &rec, Options{}, 30*time.Minute)
			cold := time.Since(start)
			if got := len(r.bot.w().rooms); got != n {
				b.Fatalf("%d rooms provisioned, want %d", got, n)
			}
			r.stop(b)
			var samples []time.Duration
			for b.Loop() {
				start := time.Now()
				r := e.start(cfg, &rec, Options{})
				samples = append(samples, time.Since(start))
				b.StopTimer()
				if fresh := r.bot.w().fresh; len(fresh) != 0 {
					b.Fatalf("a warm restart provisioned %d rooms again", len(fresh))
				}
				r.stop(b)
				b.StartTimer()
			}
			warm[n] = percentile(samples, 50)
			b.ReportMetric(cold.Seconds(), "cold-s")
			b.ReportMetric(float64(warm[n].Microseconds())/1000, "warm-p50-ms")
		})
	}
	if warm[10] > 0 && warm[1000] > 0 {
		b.Logf("warm restart p50: 10 rooms %v, 100 rooms %v, 1000 rooms %v; ratio 1000:10 = %.2f",
			warm[10], warm[100], warm[1000], float64(warm[1000])/float64(warm[10]))
	}
}
