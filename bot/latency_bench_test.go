package bot

import (
	"context"
	"fmt"
	"sort"
	"sync"
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
	syncer := mautrix.NewDefaultSyncer()
	syncer.FilterJSON = &mautrix.Filter{Room: &mautrix.RoomFilter{Timeline: &mautrix.FilterPart{Limit: 1000}}}
	u.Client.Syncer = syncer
	return arrivalsKeepSyncer(tb, u)
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
// their sync, next to the bare homeserver round trip (the same send
// arriving in an observer's sync) in the same run. people=1: one person
// sends 100 messages one after the other; people=10: ten people, each in
// their own room with the agent, send 10 each at the same time. traces=off
// turns off recording the turn traces (traces.enabled: false), to compare
// what recording them costs.
//
//	go test -tags goolm -run XXX -bench TurnLatency -benchtime 1x ./bot/
func BenchmarkTurnLatency(b *testing.B) {
	for _, people := range []int{1, 10} {
		for _, traces := range []bool{false, true} {
			name := fmt.Sprintf("people=%d/traces=%s", people, map[bool]string{false: "off", true: "on"}[traces])
			b.Run(name, func(b *testing.B) { benchTurnLatency(b, people, 100/people, traces) })
		}
	}
}

func benchTurnLatency(b *testing.B, people, turnsEach int, traces bool) {
	e := newEnv(b)
	llm := llmtest.NewServerWith(b, []llmtest.Option{llmtest.Instant(), llmtest.WithFallback(llmtest.Text("ok"))})
	observer := e.hs.RegisterUser(b, "observer")
	var persons []*hstest.User
	var rooms []id.RoomID
	var admins []id.UserID
	for i := range people {
		p := e.hs.RegisterUser(b, fmt.Sprintf("person%d", i))
		room := createRoom(b, p, e.userID("router"), e.userID("helper"), observer.UserID)
		if _, err := observer.Client.JoinRoomByID(context.Background(), room); err != nil {
			b.Fatal(err)
		}
		persons, rooms = append(persons, p), append(rooms, room)
		admins = append(admins, p.UserID)
	}
	entries, names := roomsByID("main", rooms)
	top := ""
	if !traces {
		top = "traces:\n  enabled: false\n"
	}
	cfg := e.configAgents(agentSetup{LLM: llm.URL, Rooms: entries, AgentRooms: names, Admins: admins, Top: top})
	var rec events
	e.start(cfg, &rec, Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
		return hooks.NewRegistry([]hooks.Plugin{rec.plugin()}, hooks.Options{Services: s, Observer: traceObserver{}})
	}})
	// The observer sees every room; its arrivals are sorted by room.
	observed := map[id.RoomID]chan *event.Event{}
	for _, room := range rooms {
		observed[room] = make(chan *event.Event, 1024)
	}
	all := arrivals(b, observer)
	go func() {
		for ev := range all {
			if ch, ok := observed[ev.RoomID]; ok {
				ch <- ev
			}
		}
	}()
	var own []<-chan *event.Event
	for _, p := range persons {
		own = append(own, arrivals(b, p))
	}
	agent := e.userID("helper")
	ctx := context.Background()
	time.Sleep(500 * time.Millisecond) // let the sync loops settle
	for b.Loop() {
		var mu sync.Mutex
		var rtt, turn []time.Duration
		var wg sync.WaitGroup
		for i, p := range persons {
			wg.Go(func() {
				for j := range turnsEach {
					start := time.Now()
					if _, err := p.Client.SendText(ctx, rooms[i], fmt.Sprintf("ping %d", j)); err != nil {
						b.Error(err)
						return
					}
					waitFrom(b, observed[rooms[i]], p.UserID)
					r := time.Since(start)
					waitFrom(b, own[i], agent)
					mu.Lock()
					rtt, turn = append(rtt, r), append(turn, time.Since(start))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if b.Failed() {
			return
		}
		b.ReportMetric(float64(percentile(rtt, 50).Microseconds())/1000, "rtt-p50-ms")
		b.ReportMetric(float64(percentile(rtt, 95).Microseconds())/1000, "rtt-p95-ms")
		b.ReportMetric(float64(percentile(turn, 50).Microseconds())/1000, "turn-p50-ms")
		b.ReportMetric(float64(percentile(turn, 95).Microseconds())/1000, "turn-p95-ms")
		b.ReportMetric(float64(percentile(turn, 50))/float64(percentile(rtt, 50)), "p50-ratio")
	}
}
