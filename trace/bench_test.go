package trace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

// benchTraces is the number of traces the benchmarks' database holds.
const benchTraces = 100000

// Realistic spread: 5 agents, 50 rooms, 200 senders.
func benchAgent(i int) hooks.AgentName { return hooks.AgentName(fmt.Sprintf("agent%d", i%5)) }
func benchRoom(i int) id.RoomID        { return id.RoomID(fmt.Sprintf("!room%02d:example.org", i%50)) }
func benchSender(i int) id.UserID      { return id.UserID(fmt.Sprintf("@user%03d:example.org", i%200)) }

// benchTrace is a realistic trace of a turn that ended at ended: 12 hook
// runs (a few changed, now and then one failed), two model calls, a tool
// call now and then, streaming delivery.
func benchTrace(rng *rand.Rand, i int, ended time.Time) *Trace {
	dur := time.Duration(500+rng.IntN(8000)) * time.Millisecond
	outcome := OutcomeResponded
	switch r := rng.IntN(100); {
	case r < 5:
		outcome = "suppressed"
	case r < 9:
		outcome = "error"
	case r < 12:
		outcome = OutcomeClaimed
	case r < 15:
		outcome = "stopped"
	}
	t := &Trace{
		EventID: id.EventID(fmt.Sprintf("$ev%d_%x:example.org", i, rng.Uint64())),
		Agent:   benchAgent(rng.IntN(5)), RoomID: benchRoom(rng.IntN(50)), Sender: benchSender(rng.IntN(200)),
		CorrelationID: fmt.Sprintf("%016x", rng.Uint64()),
		Started:       ended.Add(-dur), Ended: ended, Outcome: outcome, Tokens: 500 + rng.IntN(3000),
		Stages: []Stage{{Name: StageReceived}, {Name: StageRouted, At: 2 * time.Millisecond},
			{Name: StageFirstToken, At: dur / 3}, {Name: StageFirstVisible, At: dur/3 + 50*time.Millisecond}, {Name: StageFinal, At: dur}},
		Models: []ModelCall{
			{Model: "gpt-4o-mini", At: 5 * time.Millisecond, Latency: dur / 2, PromptTokens: 1200, CompletionTokens: 80, FinishReason: "tool_calls"},
			{Model: "gpt-4o-mini", At: dur / 2, Latency: dur / 2, PromptTokens: 1400, CompletionTokens: 200, CachedTokens: 1024, FinishReason: "stop"},
		},
		Delivery: []Delivery{{Kind: DeliveryPlaceholder, EventID: "$ph:example.org", At: 20 * time.Millisecond},
			{Kind: DeliveryEdit, EventID: "$ed:example.org", At: dur / 2}, {Kind: DeliveryMessage, EventID: "$msg:example.org", At: dur}},
	}
	if rng.IntN(4) == 0 {
		t.ThreadID = id.EventID(fmt.Sprintf("$root%d:example.org", i))
	}
	events := []string{"message:received", "message:routing", "agent:before_model", "agent:after_model", "message:sending", "message:sent"}
	for h := range 12 {
		run := HookRun{
			Event: events[h%len(events)], Plugin: fmt.Sprintf("plugin%d", h%4), Hook: fmt.Sprintf("hook%d", h),
			Mode: "modifying", At: time.Duration(h) * dur / 12, Duration: time.Duration(100+rng.IntN(5000)) * time.Microsecond,
			Effect: EffectUnchanged,
		}
		switch r := rng.IntN(100); {
		case r < 10:
			run.Effect, run.Change = EffectChanged, "response_text: 'Hello there, how can I help?' → 'Hi! How can I help you today?'"
		case r < 11:
			run.Effect, run.Error = EffectTimedOut, "context deadline exceeded after 2s"
		}
		t.Hooks = append(t.Hooks, run)
	}
	if rng.IntN(3) == 0 {
		t.Tools = []ToolCall{{Name: "web_search", Arguments: `{"query":"weather in Berlin tomorrow"}`,
			Result: `{"results":[{"title":"Berlin weather","snippet":"Cloudy, 7°C"}]}`, At: dur / 2, Duration: 300 * time.Millisecond}}
	}
	return t
}

// fillBench inserts n realistic traces, ending one per second up to now,
// with multi-row inserts in one transaction.
func fillBench(tb testing.TB, s *Store, n int) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now()
	// 500×17 parameters are under PostgreSQL's limit; modernc's SQLite
	// binds $N parameters in time quadratic in their number, so a few rows
	// per insert are faster there.
	perInsert := 500
	if s.db.Dialect == dbutil.SQLite {
		perInsert = 8
	}
	err := s.db.DoTxn(tb.Context(), nil, func(ctx context.Context) error {
		for first := 0; first < n; first += perInsert {
			rows := min(perInsert, n-first)
			var q strings.Builder
			q.WriteString("INSERT INTO trace_turn (" + insertColumns + ") VALUES ")
			args := make([]any, 0, rows*insertColumnCount)
			for r := range rows {
				i := first + r
				vals, err := row(benchTrace(rng, i, now.Add(time.Duration(i-n)*time.Second)))
				if err != nil {
					return err
				}
				if r > 0 {
					q.WriteString(", ")
				}
				q.WriteString(placeholders(len(args)+1, insertColumnCount))
				args = append(args, vals...)
			}
			if _, err := s.db.Exec(ctx, q.String(), args...); err != nil {
				return err
			}
		}
		_, err := s.db.Exec(ctx, "UPDATE trace_count SET turns = turns + $1 WHERE id = 1", n)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// timed runs op b.N times and reports the 95th percentile of its time.
func timed(b *testing.B, op func(i int) error) {
	b.Helper()
	times := make([]time.Duration, 0, b.N)
	i := 0
	for b.Loop() {
		t0 := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
		i++
	}
	slices.Sort(times)
	if len(times) > 0 {
		b.ReportMetric(float64(times[len(times)*95/100].Nanoseconds()), "p95-ns")
	}
}

// BenchmarkStore measures what the console's overview (List, Count,
// Agents, Outcomes) and turn inspector (Get) read, and what a turn writes
// (Save), with 100,000 realistic traces in SQLite and in PostgreSQL.
func BenchmarkStore(b *testing.B) {
	for _, d := range []dbtest.Dialect{dbtest.SQLite, dbtest.Postgres} {
		b.Run(d.Name, func(b *testing.B) {
			if testing.Short() && d.Name != dbtest.SQLite.Name {
				b.Skip("-short: SQLite only")
			}
			ctx := b.Context()
			s := New(d.Fresh(b))
			if err := s.Upgrade(ctx); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			fillBench(b, s, benchTraces)
			if d.Name == dbtest.Postgres.Name {
				// What autovacuum does shortly after a bulk load (PostgreSQL 13+
				// vacuums after inserts too, setting the visibility map).
				if _, err := s.db.Exec(ctx, "VACUUM ANALYZE trace_turn"); err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("%s: %d traces inserted in %v", d.Name, benchTraces, time.Since(t0).Round(time.Millisecond))
			newest, err := s.List(ctx, Filter{Limit: 1})
			if err != nil || len(newest) != 1 {
				b.Fatal(newest, err)
			}
			top := newest[0].ID
			sender5 := benchSender(5)
			lists := []struct {
				name string
				f    Filter
			}{
				{"first_page", Filter{}},
				{"agent", Filter{Agent: benchAgent(2)}},
				{"room", Filter{RoomID: benchRoom(7)}},
				{"sender", Filter{Sender: sender5}},
				{"outcome_rare", Filter{Outcome: "stopped"}},
				{"agent+sender", Filter{Agent: benchAgent(2), Sender: sender5}},
				{"deep_page", Filter{Before: top - benchTraces*9/10}},
				{"sender_deep_page", Filter{Sender: sender5, Before: top - benchTraces*9/10}},
			}
			for _, l := range lists {
				if testing.Verbose() {
					logPlan(b, s, d, l.f)
				}
				b.Run("list/"+l.name, func(b *testing.B) {
					timed(b, func(int) error {
						page, err := s.List(ctx, l.f)
						if err == nil && len(page) == 0 {
							err = fmt.Errorf("empty page for %+v", l.f)
						}
						return err
					})
				})
			}
			rng := rand.New(rand.NewPCG(3, 4))
			b.Run("get", func(b *testing.B) {
				timed(b, func(int) error {
					_, err := s.Get(ctx, top-rng.Int64N(benchTraces))
					return err
				})
			})
			b.Run("for_event", func(b *testing.B) {
				page, err := s.List(ctx, Filter{Limit: 1, Before: top - 500})
				if err != nil {
					b.Fatal(err)
				}
				timed(b, func(int) error {
					runs, err := s.ForEvent(ctx, page[0].EventID)
					if err == nil && len(runs) != 1 {
						err = fmt.Errorf("%d runs", len(runs))
					}
					return err
				})
			})
			b.Run("count", func(b *testing.B) {
				timed(b, func(int) error { _, err := s.Count(ctx); return err })
			})
			b.Run("agents", func(b *testing.B) {
				timed(b, func(int) error { _, err := s.Agents(ctx); return err })
			})
			b.Run("outcomes", func(b *testing.B) {
				timed(b, func(int) error { _, err := s.Outcomes(ctx); return err })
			})
			b.Run("save", func(b *testing.B) {
				rng := rand.New(rand.NewPCG(5, 6))
				timed(b, func(i int) error {
					_, err := s.Save(ctx, benchTrace(rng, benchTraces+i, time.Now()))
					return err
				})
			})
		})
	}
}

// logPlan logs how the database runs List(f).
func logPlan(b *testing.B, s *Store, d dbtest.Dialect, f Filter) {
	q, args := f.query()
	explain := "EXPLAIN QUERY PLAN "
	if d.Name == dbtest.Postgres.Name {
		explain = "EXPLAIN (ANALYZE, COSTS OFF) "
	}
	lines, err := planLines(b.Context(), s, explain+q, args...)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s %+v:\n\t%s", d.Name, f, strings.Join(lines, "\n\t"))
}

// planLines runs an EXPLAIN and returns its lines (the last column of each
// row: SQLite's detail, PostgreSQL's QUERY PLAN).
func planLines(ctx context.Context, s *Store, q string, args ...any) ([]string, error) {
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprint(vals[len(vals)-1]))
	}
	return out, rows.Err()
}
