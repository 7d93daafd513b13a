package bot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
	mem "github.com/hookroom/hookroom/memory"
	memplugin "github.com/hookroom/hookroom/plugins/builtin/memory"
	"github.com/hookroom/hookroom/tracking"
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
// what recording them costs. people=1/enrich=off and enrich=on load the
// plugins from config.yaml as a server does (traces on): off with none,
// on with memory (200 memories of the person, recalled every turn by
// full text) and knowledge (a small folder, its top passages in every
// turn), to compare what enrichment costs; their ratio is the overhead.
//
//	go test -tags goolm -run XXX -bench TurnLatency -benchtime 1x ./bot/
func BenchmarkTurnLatency(b *testing.B) {
	for _, people := range []int{1, 10} {
		for _, traces := range []bool{false, true} {
			name := fmt.Sprintf("people=%d/traces=%s", people, map[bool]string{false: "off", true: "on"}[traces])
			b.Run(name, func(b *testing.B) { benchTurnLatency(b, people, 100/people, traces) })
		}
	}
	for _, enrich := range []bool{false, true} {
		name := fmt.Sprintf("people=1/enrich=%s", map[bool]string{false: "off", true: "on"}[enrich])
		b.Run(name, func(b *testing.B) {
			benchTurnLatencyWith(b, latencySetup{people: 1, turnsEach: 100, traces: true, configPlugins: true, enrich: enrich})
		})
	}
}

// latencySetup is one configuration of BenchmarkTurnLatency. With
// configPlugins the bot loads its plugins from config.yaml (memory and
// knowledge when enrich is set, none otherwise) instead of the test's
// recorder registry.
type latencySetup struct {
	people, turnsEach int
	traces            bool
	configPlugins     bool
	enrich            bool
}

// enrichPlugins is the plugins section of the enrich=on benchmark, with
// knowledge's folder dir.
func enrichPlugins(dir string) string {
	return fmt.Sprintf(`plugins:
  - builtin: memory
    settings:
      agents:
        helper: {scopes: [person], tools: false}
  - builtin: knowledge
    settings:
      bases:
        docs: {paths: [%q]}
      agents:
        helper: {bases: [docs], auto_enrich: true}
`, dir)
}

// seedEnrichment fills what enrich=on recalls: 200 memories per person
// (some sharing the words of the benchmark's messages) and a knowledge
// folder of 20 Markdown files, and waits until the folder is indexed.
func seedEnrichment(b *testing.B, e *testEnv, r *running, persons []*hstest.User, rooms []id.RoomID) {
	ctx := context.Background()
	inst, ok := r.bot.w().plugins.Instance(memplugin.Name)
	if !ok {
		b.Fatal("no memory plugin")
	}
	store := inst.(*memplugin.Plugin).Store()
	for i, p := range persons {
		who := mem.Who{Agent: "helper", Person: p.UserID, Room: rooms[i]}
		for j := range 200 {
			text := fmt.Sprintf("Fact %d: the person's favourite number is %d and they like topic %d.", j, j*7, j%13)
			if j%10 == 0 {
				text = fmt.Sprintf("Fact %d: the person answers ping %d with pong.", j, j)
			}
			if _, _, err := store.Remember(ctx, who, mem.ScopePerson, text, mem.SourceTool); err != nil {
				b.Fatal(err)
			}
		}
	}
	db, err := tracking.OpenSQLite(ctx, r.bot.w().cfg.Database.URI.Reveal())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	testkit.Eventually(b, 30*time.Second, "the knowledge folder is indexed", func() bool {
		var n int
		return db.QueryRow(ctx, `SELECT COUNT(*) FROM knowledge_chunk`).Scan(&n) == nil && n >= 20
	})
}

func benchTurnLatency(b *testing.B, people, turnsEach int, traces bool) {
	benchTurnLatencyWith(b, latencySetup{people: people, turnsEach: turnsEach, traces: traces})
}

func benchTurnLatencyWith(b *testing.B, s latencySetup) {
	people, turnsEach, traces := s.people, s.turnsEach, s.traces
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
	var extra string
	if s.enrich {
		dir := filepath.Join(e.dir, "docs")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := range 20 {
			text := fmt.Sprintf("# Topic %d\n\nHow to answer ping %d: reply with pong %d. Pings are health checks of topic %d.\n", i, i, i, i)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("topic%02d.md", i)), []byte(text), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		extra = enrichPlugins(dir)
	}
	cfg := e.configAgents(agentSetup{LLM: llm.URL, Rooms: entries, AgentRooms: names, Admins: admins, Top: top, Extra: extra})
	// enriched counts the model requests that hold the memory and the
	// knowledge block (the instant server keeps no requests to look at
	// later); the route never takes a request.
	var enriched atomic.Int32
	if s.configPlugins {
		llm.On(func(r *llmtest.Request) bool {
			all := strings.Join(messageContents(r.Body.Messages), "\n")
			if strings.Contains(all, "What you remember") && strings.Contains(all, "[docs] topic") {
				enriched.Add(1)
			}
			return false
		}, llmtest.Text("never sent"))
	}
	var r *running
	if s.configPlugins {
		var logs testkit.Buffer
		r = e.run(cfg, Options{}, zerolog.New(&logs).Level(zerolog.InfoLevel))
		testkit.Until(b, 60*time.Second, func() (bool, string) {
			return strings.Count(logs.String(), "account caught up") >= 2, "waiting until router and helper caught up:\n" + logs.String()
		})
		if s.enrich {
			seedEnrichment(b, e, r, persons, rooms)
		}
	} else {
		var rec events
		e.start(cfg, &rec, Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry([]hooks.Plugin{rec.plugin()}, hooks.Options{Services: s, Observer: traceObserver{}})
		}})
	}
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
	if s.configPlugins {
		// The turns measured were enriched (memories and passages reached
		// the model) with enrich=on, and not without.
		want := 0
		if s.enrich {
			want = people * turnsEach * b.N
		}
		if n := int(enriched.Load()); n != want {
			b.Fatalf("%d model requests held the memory and knowledge blocks, want %d", n, want)
		}
		// What the enrichment hooks took per turn (they run concurrently).
		for _, st := range r.bot.Registry().Stats() {
			switch st.Plugin + "/" + st.Hook {
			case "memory/recall":
				b.ReportMetric(float64(st.Mean().Microseconds())/1000, "recall-mean-ms")
			case "knowledge/passages":
				b.ReportMetric(float64(st.Mean().Microseconds())/1000, "passages-mean-ms")
			}
		}
	}
}
