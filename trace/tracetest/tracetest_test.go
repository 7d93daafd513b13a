package tracetest_test

import (
	"testing"
	"time"

	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/trace"
	"github.com/hookroom/hookroom/trace/tracetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// What Fill writes reads back as what Save stores for the same traces:
// the same summaries, the same traces, the same count.
func TestFillReadsAsSaved(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		if testing.Short() && d.Name != dbtest.SQLite.Name {
			t.Skip("-short: SQLite only")
		}
		ctx := t.Context()
		const n = 40
		filledDB := d.Fresh(t)
		filled := trace.New(filledDB)
		saved := trace.New(d.Fresh(t))
		for _, s := range []*trace.Store{filled, saved} {
			if err := s.Upgrade(ctx); err != nil {
				t.Fatal(err)
			}
		}
		newest := tracetest.Fill(t, filledDB, filled, n)
		fromFill, err := filled.List(ctx, trace.Filter{Limit: n + 1})
		if err != nil || len(fromFill) != n || fromFill[0].ID != newest {
			t.Fatalf("List after Fill: %d summaries (newest %d, Fill said %d), %v", len(fromFill), fromFill[0].ID, newest, err)
		}
		for i := range n {
			// Fill's times, so that the traces are the same.
			sum := fromFill[n-1-i]
			if _, err := saved.Save(ctx, tracetest.Sample(i, sum.Ended)); err != nil {
				t.Fatal(err)
			}
		}
		fromSave, err := saved.List(ctx, trace.Filter{Limit: n + 1})
		if err != nil || len(fromSave) != n {
			t.Fatalf("List after Save: %d summaries, %v", len(fromSave), err)
		}
		for i := range n {
			a, b := fromFill[i], fromSave[i]
			if !a.Started.Equal(b.Started) || !a.Ended.Equal(b.Ended) {
				t.Fatalf("summary %d: times %v–%v filled, %v–%v saved", i, a.Started, a.Ended, b.Started, b.Ended)
			}
			a.ID, a.Started, a.Ended = b.ID, b.Started, b.Ended
			if a != b {
				t.Fatalf("summary %d:\nfilled %+v\nsaved  %+v", i, a, b)
			}
			ta, err := filled.Get(ctx, fromFill[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			tb, err := saved.Get(ctx, fromSave[i].ID)
			if err != nil {
				t.Fatal(err)
			}
			ta.ID = tb.ID
			if !tracetest.Equal(ta, tb) {
				t.Fatalf("trace %d:\nfilled %+v\nsaved  %+v", i, ta, tb)
			}
		}
		for _, s := range []*trace.Store{filled, saved} {
			if c, err := s.Count(ctx); err != nil || c != n {
				t.Fatalf("Count: %d, %v", c, err)
			}
		}
	})
}

// Sample is deterministic, and spreads its traces over the agents and
// outcomes the filters pick from.
func TestSample(t *testing.T) {
	at := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	if !tracetest.Equal(tracetest.Sample(7, at), tracetest.Sample(7, at)) {
		t.Fatal("Sample(7) differs between calls")
	}
	agents, outcomes := map[string]int{}, map[string]int{}
	for i := range 1000 {
		s := tracetest.Sample(i, at)
		agents[string(s.Agent)]++
		outcomes[s.Outcome]++
	}
	if len(agents) != tracetest.Agents || outcomes["stopped"] == 0 || outcomes[trace.OutcomeResponded] < 700 {
		t.Fatalf("agents %v, outcomes %v", agents, outcomes)
	}
}
