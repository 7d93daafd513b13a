package bot

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// arrivals runs u's sync loop and reports every message event that
// arrives, by sender.
func arrivals(tb testing.TB, u *hstest.User) <-chan *event.Event {
	ch := make(chan *event.Event, 1024)
	syncer := mautrix.NewDefaultSyncer()
	syncer.FilterJSON = &mautrix.Filter{Room: &mautrix.RoomFilter{Timeline: &mautrix.FilterPart{Limit: 1000}}}
	syncer.OnEventType(event.EventMessage, func(_ context.Context, ev *event.Event) { ch <- ev })
	u.Client.Syncer = syncer
	u.Client.Store = mautrix.NewMemorySyncStore()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = u.Client.SyncWithContext(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return ch
}

// waitFrom returns when a message from sender arrives.
func waitFrom(tb testing.TB, ch <-chan *event.Event, sender id.UserID) {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Sender == sender {
				return
			}
		case <-timeout:
			tb.Fatalf("no message from %s within 30s", sender)
		}
	}
}

func percentile(d []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

// BenchmarkTurnLatency measures hookroom's own overhead: with an instant
// scripted model, the time from a person's send to the reply arriving in
// their sync, over 100 turns, next to the bare homeserver round trip (one
// person's send arriving in another person's sync) in the same run.
//
//	go test -run XXX -bench TurnLatency -benchtime 1x ./bot/
func BenchmarkTurnLatency(b *testing.B) {
	const turns = 100
	e := newEnv(b)
	llm := llmtest.NewServerWith(b, []llmtest.Option{llmtest.Instant(), llmtest.WithFallback(llmtest.Text("ok"))})
	alice := e.hs.RegisterUser(b, "alice")
	bob := e.hs.RegisterUser(b, "bob")
	room := createRoom(b, alice, e.userID("router"), e.userID("helper"), bob.UserID)
	if _, err := bob.Client.JoinRoomByID(context.Background(), room); err != nil {
		b.Fatal(err)
	}
	cfg := e.config(fmt.Sprintf(`models:
  agent:
    provider: openai
    base_url: %s
    model: m
rooms:
  main:
    id: "%s"
authorization:
  global_users: ["%s"]
agents:
  helper:
    username: %s
    rooms: [main]
`, llm.URL, room, alice.UserID, e.localpart("helper")))
	var rec events
	e.start(cfg, &rec, Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
		return hooks.NewRegistry([]hooks.Plugin{rec.plugin()}, hooks.Options{Services: s})
	}})
	aliceIn, bobIn := arrivals(b, alice), arrivals(b, bob)
	agent := e.userID("helper")
	ctx := context.Background()
	time.Sleep(500 * time.Millisecond) // let the sync loops settle
	for b.Loop() {
		var rtt, turn []time.Duration
		for i := range turns {
			start := time.Now()
			if _, err := alice.Client.SendText(ctx, room, fmt.Sprintf("ping %d", i)); err != nil {
				b.Fatal(err)
			}
			waitFrom(b, bobIn, alice.UserID)
			rtt = append(rtt, time.Since(start))
			waitFrom(b, aliceIn, agent)
			turn = append(turn, time.Since(start))
		}
		b.ReportMetric(float64(percentile(rtt, 50).Microseconds())/1000, "rtt-p50-ms")
		b.ReportMetric(float64(percentile(rtt, 95).Microseconds())/1000, "rtt-p95-ms")
		b.ReportMetric(float64(percentile(turn, 50).Microseconds())/1000, "turn-p50-ms")
		b.ReportMetric(float64(percentile(turn, 95).Microseconds())/1000, "turn-p95-ms")
		b.ReportMetric(float64(percentile(turn, 50))/float64(percentile(rtt, 50)), "p50-ratio")
	}
}
