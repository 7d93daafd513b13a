package bot

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/matrixio/hstest"
)

// warmBenchDirEnv names a directory in which BenchmarkWarmStart keeps its
// homeserver (DIR/hs) and each size's configuration and database
// (DIR/rooms-N) between runs: the first run provisions, every later run
// starts warm at once. Empty: a fresh homeserver and database every run.
const warmBenchDirEnv = "HOOKROOM_WARM_BENCH_DIR"

// warmBenchRoomsEnv lists the sizes BenchmarkWarmStart measures
// (comma-separated, default "10,100,1000").
const warmBenchRoomsEnv = "HOOKROOM_WARM_BENCH_ROOMS"

// BenchmarkWarmStart measures a restart with 10, 100 and 1,000 configured
// rooms: each sub-benchmark provisions its rooms once (a cold start,
// reported as cold-s), then every iteration is a warm restart on the same
// database, timed from New and Run to every account caught up (bot:ready
// for the router and the agents). The ratio of the largest to the smallest
// size's warm p50 is logged at the end. Creating 1,000 rooms on Dendrite
// takes minutes, so run it on its own (benchmarks never run in a plain go
// test), and set HOOKROOM_WARM_BENCH_DIR to provision only once:
//
//	HOOKROOM_WARM_BENCH_DIR=/dev/shm/warm go test -tags goolm -run XXX -bench WarmStart -benchtime 5x -timeout 30m ./bot/
func BenchmarkWarmStart(b *testing.B) {
	sizes := []int{10, 100, 1000}
	if v := os.Getenv(warmBenchRoomsEnv); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("%s: bad size %q", warmBenchRoomsEnv, f)
			}
			sizes = append(sizes, n)
		}
	}
	keep := os.Getenv(warmBenchDirEnv)
	var keptHS = sync.OnceValue(func() *hstest.Server { return hstest.StartIn(b, filepath.Join(keep, "hs")) })
	warm := map[int]time.Duration{}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("rooms=%d", n), func(b *testing.B) {
			var e *testEnv
			if keep == "" {
				e = newEnv(b)
			} else {
				dir := filepath.Join(keep, fmt.Sprintf("rooms-%d", n))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					b.Fatal(err)
				}
				e = &testEnv{t: b, hs: keptHS(), suffix: fmt.Sprintf("warm%d", n), dir: dir}
			}
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
			// HOOKROOM_WARM_BENCH_LOG=PATH writes each size's log (info,
			// RFC 3339 timestamps with nanoseconds) to PATH.N.
			if path := os.Getenv("HOOKROOM_WARM_BENCH_LOG"); path != "" {
				f, err := os.OpenFile(fmt.Sprintf("%s.%d", path, n), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				e.logs = f
				// Timestamps fine enough to break a restart down.
				old := zerolog.TimeFieldFormat
				zerolog.TimeFieldFormat = time.RFC3339Nano
				defer func() { zerolog.TimeFieldFormat = old }()
			}
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
				if e.logs != nil {
					mark := zerolog.New(e.logs)
					mark.Info().Timestamp().Msg("benchmark: warm restart")
				}
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
	lo, hi := sizes[0], sizes[len(sizes)-1]
	if warm[lo] > 0 && warm[hi] > 0 {
		var parts []string
		for _, n := range sizes {
			parts = append(parts, fmt.Sprintf("%d rooms %v", n, warm[n]))
		}
		b.Logf("warm restart p50: %s; ratio %d:%d = %.2f", strings.Join(parts, ", "), hi, lo, float64(warm[hi])/float64(warm[lo]))
	}
}
