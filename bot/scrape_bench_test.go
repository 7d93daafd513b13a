package bot

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
)

// BenchmarkScrapeDuringTurns measures what a Prometheus scrape costs while
// hookroom is busy, and whether scraping slows turns down: rounds of 50
// concurrent turns (50 messages, each its own thread, answered by a
// streaming scripted model), after a warm-up round, alternately without
// and with /metrics scraped every 250 ms. It reports the scrape's duration and size and the
// turn p50 (send → message:after_response) with and without scraping.
//
//	go test -tags goolm -run XXX -bench ScrapeDuringTurns -benchtime 1x ./bot/
func BenchmarkScrapeDuringTurns(b *testing.B) {
	const turns, rounds = 50, 4
	e := newEnv(b)
	// A model that streams for ~200ms, like a short real answer.
	llm := llmtest.NewServerWith(b, []llmtest.Option{llmtest.WithFallback(
		llmtest.Text(llmtest.Split("This is a short streamed answer of a few words.", 10)...).
			WithChunkDelay(20*time.Millisecond).WithUsage(500, 12))})
	person := e.hs.RegisterUser(b, "alice")
	room := createRoom(b, person, e.userID("router"), e.userID("helper"))
	cfg := e.configAgents(agentSetup{LLM: llm.URL, Room: room, Admins: []id.UserID{person.UserID},
		Extra: "http:\n  listen: 127.0.0.1:0\n"})

	var mu sync.Mutex
	sent := map[string]time.Time{}
	answered := map[string]time.Duration{}
	done := make(chan struct{}, turns)
	after := hooks.Handle(hooks.MessageAfterResponse, "timing", func(_ context.Context, c *hooks.AfterResponseContext) error {
		mu.Lock()
		defer mu.Unlock()
		if at, ok := sent[c.Result.Envelope.Body]; ok {
			answered[c.Result.Envelope.Body] = time.Since(at)
			done <- struct{}{}
		}
		return nil
	})
	var rec events
	r := e.start(cfg, &rec, Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
		return hooks.NewRegistry([]hooks.Plugin{rec.plugin(), {Name: "bench", Hooks: []hooks.Hook{after}}}, hooks.Options{Services: s})
	}})
	metricsURL := "http://" + r.bot.HTTPAddr() + "/metrics"

	// round sends 50 messages at once and waits for their answers; it
	// returns each turn's latency.
	round := func(name string) []time.Duration {
		var wg sync.WaitGroup
		for i := range turns {
			body := fmt.Sprintf("%s question %d", name, i)
			wg.Go(func() {
				mu.Lock()
				sent[body] = time.Now()
				mu.Unlock()
				if _, err := person.Client.SendText(context.Background(), room, body); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		timeout := time.After(2 * time.Minute)
		for range turns {
			select {
			case <-done:
			case <-timeout:
				b.Fatalf("round %s: not every turn was answered within 2 minutes", name)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		var out []time.Duration
		for i := range turns {
			out = append(out, answered[fmt.Sprintf("%s question %d", name, i)])
		}
		return out
	}
	scrapeOnce := func() (time.Duration, int) {
		start := time.Now()
		resp, err := http.Get(metricsURL)
		if err != nil {
			b.Error(err)
			return 0, 0
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start), int(n)
	}

	for b.Loop() {
		var plain, scraped, scrapes []time.Duration
		var bytes int
		round("warm-up") // first sessions, connections, caches
		for k := range rounds {
			// Alternate which comes first, so that drift in the machine's
			// load hits both alike.
			if k%2 == 0 {
				plain = append(plain, round(fmt.Sprintf("plain-%d", k))...)
			}
			stop := make(chan struct{})
			var sw sync.WaitGroup
			sw.Go(func() {
				tick := time.NewTicker(250 * time.Millisecond)
				defer tick.Stop()
				for {
					d, n := scrapeOnce()
					mu.Lock()
					scrapes, bytes = append(scrapes, d), n
					mu.Unlock()
					select {
					case <-stop:
						return
					case <-tick.C:
					}
				}
			})
			scraped = append(scraped, round(fmt.Sprintf("scraped-%d", k))...)
			close(stop)
			sw.Wait()
			if k%2 == 1 {
				plain = append(plain, round(fmt.Sprintf("plain-%d", k))...)
			}
		}
		if b.Failed() {
			return
		}
		b.ReportMetric(float64(percentile(scrapes, 50).Microseconds())/1000, "scrape-p50-ms")
		b.ReportMetric(float64(percentile(scrapes, 95).Microseconds())/1000, "scrape-p95-ms")
		b.ReportMetric(float64(bytes), "scrape-bytes")
		b.ReportMetric(float64(len(scrapes)), "scrapes")
		b.ReportMetric(float64(percentile(plain, 50).Microseconds())/1000, "turn-p50-ms")
		b.ReportMetric(float64(percentile(scraped, 50).Microseconds())/1000, "turn-p50-scraped-ms")
		b.ReportMetric(float64(percentile(scraped, 50))/float64(percentile(plain, 50)), "p50-ratio")
	}
}
