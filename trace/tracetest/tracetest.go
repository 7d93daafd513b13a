package tracetest

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/trace"
)

// The spread of Sample's traces: 5 agents, 50 rooms, 200 senders.
const (
	Agents  = 5
	Rooms   = 50
	Senders = 200
)

// Agent, Room and Sender return the i-th (modulo their number) of the
// agents, rooms and senders Sample's traces have.
func Agent(i int) hooks.AgentName { return hooks.AgentName(fmt.Sprintf("agent%d", i%Agents)) }
func Room(i int) id.RoomID        { return id.RoomID(fmt.Sprintf("!room%02d:example.org", i%Rooms)) }
func Sender(i int) id.UserID      { return id.UserID(fmt.Sprintf("@user%03d:example.org", i%Senders)) }

// Sample returns trace i, a realistic turn that ended at ended (kept to
// the millisecond, as the store keeps it): 12 hook runs (a few changed,
// now and then one timed out), two model calls, a tool call now and then,
// streaming delivery; mostly responded, the rest suppressed, error,
// claimed or stopped. The same i gives the same trace; its ID is 0.
func Sample(i int, ended time.Time) *trace.Trace {
	rng := rand.New(rand.NewPCG(uint64(i), 0x7472616365))
	ended = time.UnixMilli(ended.UnixMilli())
	dur := time.Duration(500+rng.IntN(8000)) * time.Millisecond
	outcome := trace.OutcomeResponded
	switch r := rng.IntN(100); {
	case r < 5:
		outcome = "suppressed"
	case r < 9:
		outcome = "error"
	case r < 12:
		outcome = trace.OutcomeClaimed
	case r < 15:
		outcome = "stopped"
	}
	t := &trace.Trace{
		EventID: id.EventID(fmt.Sprintf("$ev%d_%x:example.org", i, rng.Uint64())),
		Agent:   Agent(rng.IntN(Agents)), RoomID: Room(rng.IntN(Rooms)), Sender: Sender(rng.IntN(Senders)),
		CorrelationID: fmt.Sprintf("%016x", rng.Uint64()),
		Started:       ended.Add(-dur), Ended: ended, Outcome: outcome, Tokens: 500 + rng.IntN(3000),
		Stages: []trace.Stage{{Name: trace.StageReceived}, {Name: trace.StageRouted, At: 2 * time.Millisecond},
			{Name: trace.StageFirstToken, At: dur / 3}, {Name: trace.StageFirstVisible, At: dur/3 + 50*time.Millisecond}, {Name: trace.StageFinal, At: dur}},
		Models: []trace.ModelCall{
			{Model: "gpt-4o-mini", At: 5 * time.Millisecond, Latency: dur / 2, PromptTokens: 1200, CompletionTokens: 80, FinishReason: "tool_calls"},
			{Model: "gpt-4o-mini", At: dur / 2, Latency: dur / 2, PromptTokens: 1400, CompletionTokens: 200, CachedTokens: 1024, FinishReason: "stop"},
		},
		Delivery: []trace.Delivery{{Kind: trace.DeliveryPlaceholder, EventID: "$ph:example.org", At: 20 * time.Millisecond},
			{Kind: trace.DeliveryEdit, EventID: "$ed:example.org", At: dur / 2}, {Kind: trace.DeliveryMessage, EventID: "$msg:example.org", At: dur}},
	}
	if rng.IntN(4) == 0 {
		t.ThreadID = id.EventID(fmt.Sprintf("$root%d:example.org", i))
	}
	events := []string{"message:received", "message:routing", "agent:before_model", "agent:after_model", "message:sending", "message:sent"}
	for h := range 12 {
		run := trace.HookRun{
			Event: events[h%len(events)], Plugin: fmt.Sprintf("plugin%d", h%4), Hook: fmt.Sprintf("hook%d", h),
			Mode: "modifying", At: time.Duration(h) * dur / 12, Duration: time.Duration(100+rng.IntN(5000)) * time.Microsecond,
			Effect: trace.EffectUnchanged,
		}
		switch r := rng.IntN(100); {
		case r < 10:
			run.Effect, run.Change = trace.EffectChanged, "response_text: 'Hello there, how can I help?' → 'Hi! How can I help you today?'"
		case r < 11:
			run.Effect, run.Error = trace.EffectTimedOut, "context deadline exceeded after 2s"
		}
		t.Hooks = append(t.Hooks, run)
	}
	if rng.IntN(3) == 0 {
		t.Tools = []trace.ToolCall{{Name: "web_search", Arguments: `{"query":"weather in Berlin tomorrow"}`,
			Result: `{"results":[{"title":"Berlin weather","snippet":"Cloudy, 7°C"}]}`, At: dur / 2, Duration: 300 * time.Millisecond}}
	}
	return t
}

// Fill adds n traces to s, an upgraded store on db: Sample(0, …) to
// Sample(n-1, …), ending one a second up to now (the last one now), in
// one transaction of multi-row inserts. On PostgreSQL it then runs VACUUM
// ANALYZE, what autovacuum does shortly after a bulk load (PostgreSQL 13+
// vacuums after inserts too, setting the visibility map). It returns the
// id of the newest trace, after checking that it reads back (s.Get) as
// the sample it wrote and that s.Count grew by n. It fails tb on any error.
func Fill(tb testing.TB, db *dbutil.Database, s *trace.Store, n int) (newest int64) {
	tb.Helper()
	ctx := tb.Context()
	before, err := s.Count(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now()
	ended := func(i int) time.Time { return now.Add(time.Duration(i-n+1) * time.Second) }
	const chunk = 1000 // traces in memory at a time
	for first := 0; first < n; first += chunk {
		batch := make([]*trace.Trace, 0, min(chunk, n-first))
		for i := first; i < min(first+chunk, n); i++ {
			batch = append(batch, Sample(i, ended(i)))
		}
		if err := s.SaveBatch(ctx, batch); err != nil {
			tb.Fatalf("failed to fill the trace store: %v", err)
		}
	}
	if db.Dialect == dbutil.Postgres {
		if _, err := db.Exec(ctx, "VACUUM ANALYZE trace_turn"); err != nil {
			tb.Fatal(err)
		}
	}
	if n == 0 {
		return 0
	}
	// The rows above are written the way trace.Store.Save writes them;
	// check that the store reads them so.
	top, err := s.List(ctx, trace.Filter{Limit: 1})
	if err != nil || len(top) != 1 {
		tb.Fatalf("newest trace after Fill: %v, %v", top, err)
	}
	got, err := s.Get(ctx, top[0].ID)
	if err != nil {
		tb.Fatal(err)
	}
	want := Sample(n-1, ended(n-1))
	want.ID = got.ID
	if !Equal(got, want) {
		tb.Fatalf("Fill wrote a trace the store reads differently (did trace_turn change? update tracetest's row):\ngot  %+v\nwant %+v", got, want)
	}
	if c, err := s.Count(ctx); err != nil || c != before+int64(n) {
		tb.Fatalf("Count after Fill of %d: %d, %v; want %d", n, c, err, before+int64(n))
	}
	return got.ID
}

// Equal reports whether traces a and b are the same (their times compared
// with time.Time.Equal).
func Equal(a, b *trace.Trace) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !a.Started.Equal(b.Started) || !a.Ended.Equal(b.Ended) {
		return false
	}
	x, y := *a, *b
	x.Started, x.Ended, y.Started, y.Ended = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}
