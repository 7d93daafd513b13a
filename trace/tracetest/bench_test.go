package tracetest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/trace"
	"github.com/hookroom/hookroom/trace/tracetest"
)

// benchTraces is the number of traces the benchmarks' database holds.
const benchTraces = 100000

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

// BenchmarkStore measures what the console's conversations page (List,
// Agents, Outcomes) and turn inspector (Get) read, the count of traces
// (Count) and what a turn writes (Save), with 100,000 realistic
// traces in SQLite and in PostgreSQL. With -v it logs how each database
// runs each List.
func BenchmarkStore(b *testing.B) {
	for _, d := range []dbtest.Dialect{dbtest.SQLite, dbtest.Postgres} {
		b.Run(d.Name, func(b *testing.B) {
			if testing.Short() && d.Name != dbtest.SQLite.Name {
				b.Skip("-short: SQLite only")
			}
			ctx := b.Context()
			db := d.Fresh(b)
			queries := &lastQuery{DatabaseLogger: db.Log}
			if queries.DatabaseLogger == nil {
				queries.DatabaseLogger = dbutil.NoopLogger
			}
			if testing.Verbose() {
				db.Log = queries
			}
			s := trace.New(db)
			if err := s.Upgrade(ctx); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			top := tracetest.Fill(b, db, s, benchTraces)
			b.Logf("%s: %d traces inserted in %v", d.Name, benchTraces, time.Since(t0).Round(time.Millisecond))
			sender5 := tracetest.Sender(5)
			lists := []struct {
				name string
				f    trace.Filter
			}{
				{"first_page", trace.Filter{}},
				{"agent", trace.Filter{Agent: tracetest.Agent(2)}},
				{"room", trace.Filter{RoomID: tracetest.Room(7)}},
				{"sender", trace.Filter{Sender: sender5}},
				{"outcome_rare", trace.Filter{Outcome: "stopped"}},
				{"agent+sender", trace.Filter{Agent: tracetest.Agent(2), Sender: sender5}},
				{"deep_page", trace.Filter{Before: top - benchTraces*9/10}},
				{"sender_deep_page", trace.Filter{Sender: sender5, Before: top - benchTraces*9/10}},
			}
			for _, l := range lists {
				if testing.Verbose() {
					logPlan(b, db, d, queries, func() error { _, err := s.List(ctx, l.f); return err }, l.f)
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
				page, err := s.List(ctx, trace.Filter{Limit: 1, Before: top - 500})
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
				timed(b, func(i int) error {
					_, err := s.Save(ctx, tracetest.Sample(benchTraces+i, time.Now()))
					return err
				})
			})
		})
	}
}

// lastQuery is a database logger that keeps the last query run, so that
// logPlan can explain exactly what the store ran.
type lastQuery struct {
	dbutil.DatabaseLogger
	mu    sync.Mutex
	query string
	args  []any
}

func (l *lastQuery) QueryTiming(ctx context.Context, method, query string, args []any, nrows int, d time.Duration, err error) {
	if query != "" {
		l.mu.Lock()
		l.query, l.args = query, slices.Clone(args)
		l.mu.Unlock()
	}
	l.DatabaseLogger.QueryTiming(ctx, method, query, args, nrows, d, err)
}

// logPlan runs op (one List), then logs how the database runs the query
// it ran.
func logPlan(b *testing.B, db *dbutil.Database, d dbtest.Dialect, queries *lastQuery, op func() error, f trace.Filter) {
	b.Helper()
	if err := op(); err != nil {
		b.Fatal(err)
	}
	queries.mu.Lock()
	q, args := queries.query, queries.args
	queries.mu.Unlock()
	explain := "EXPLAIN QUERY PLAN "
	if d.Name == dbtest.Postgres.Name {
		explain = "EXPLAIN (ANALYZE, COSTS OFF) "
	}
	rows, err := db.Query(b.Context(), explain+q, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		b.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			b.Fatal(err)
		}
		// The last column: SQLite's detail, PostgreSQL's QUERY PLAN.
		lines = append(lines, fmt.Sprint(vals[len(vals)-1]))
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s %+v:\n\t%s", d.Name, f, strings.Join(lines, "\n\t"))
}
