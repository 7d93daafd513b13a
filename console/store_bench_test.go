package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/console/consoletest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/trace"
	"github.com/hookroom/hookroom/trace/tracetest"
)

// TestMain starts PostgreSQL only for a test or benchmark that asks for it
// (BenchmarkPagesWithStore/db=postgres), and stops it at the end.
func TestMain(m *testing.M) { pgtest.Main(m) }

// storeTraces is the number of traces BenchmarkPagesWithStore's database
// holds: the console's goal is every page in 50 ms (p95) with 100,000.
const storeTraces = 100000

// BenchmarkPagesWithStore serves the overview, the conversations page
// (all, filtered by agent, and its live refresh of rows) and the turn
// inspector from a *trace.Store holding 100,000 realistic traces, on SQLite
// and on PostgreSQL, the other pages' data from consoletest's fakes. It
// reports each page's p50 and p95 in ms, over every iteration (the goal:
// p95 ≤ 50 ms); each response must be 200 with the page's expected content.
//
//	go test -tags goolm -run XXX -bench PagesWithStore -benchtime 200x ./console/
func BenchmarkPagesWithStore(b *testing.B) {
	for _, d := range []dbtest.Dialect{dbtest.SQLite, dbtest.Postgres} {
		b.Run("db="+d.Name, func(b *testing.B) {
			if testing.Short() && d.Name != dbtest.SQLite.Name {
				b.Skip("-short: SQLite only")
			}
			// Filled once per database, for every page's sub-benchmark.
			db := d.Fresh(b)
			store := trace.New(db)
			if err := store.Upgrade(b.Context()); err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			top := tracetest.Fill(b, db, store, storeTraces)
			b.Logf("%s: %d traces inserted in %v", d.Name, storeTraces, time.Since(t0).Round(time.Millisecond))
			middle, err := store.Get(b.Context(), top-storeTraces/2)
			if err != nil {
				b.Fatal(err)
			}

			fake := consoletest.New(time.Now())
			o := fake.Options(func() string { return adminToken })
			o.Turns = store
			h := console.New(o)
			e := &env{t: &testing.T{}, h: h}
			sc, _ := e.signIn(req{})

			agent := tracetest.Agent(2)
			newest := fmt.Sprintf(`href="/turns/%d"`, top)
			pages := []struct {
				name, path string
				check      func(body string) error
			}{
				{"overview", "/", contains("Readiness", "v0.9.0-test", "@helper:example.org")},
				{"turns", "/turns", all(contains(`<html`, newest, `rel="next"`), rows(turnPage))},
				{"turns_agent", "/turns?agent=" + string(agent), all(contains(`<html`, `rel="next"`),
					rows(turnPage), onlyAgent(agent))},
				{"turns_rows", "/turns?part=rows", all(contains(newest), lacks(`<html`), rows(turnPage))},
				{"turn", fmt.Sprintf("/turns/%d", middle.ID), contains("Timeline", html.EscapeString(string(middle.EventID)),
					middle.CorrelationID, "hook11")},
			}
			for _, p := range pages {
				b.Run("page="+p.name, func(b *testing.B) {
					b.ReportAllocs()
					times := make([]time.Duration, 0, b.N)
					for b.Loop() {
						r := httptest.NewRequest(http.MethodGet, p.path, nil)
						r.AddCookie(sc)
						w := httptest.NewRecorder()
						t0 := time.Now()
						h.ServeHTTP(w, r)
						times = append(times, time.Since(t0))
						if w.Code != http.StatusOK {
							b.Fatalf("GET %s: %d\n%s", p.path, w.Code, w.Body)
						}
						if err := p.check(w.Body.String()); err != nil {
							b.Fatalf("GET %s: %v\n%s", p.path, err, w.Body)
						}
					}
					b.ReportMetric(ms(percentileOf(times, 50)), "p50-ms")
					b.ReportMetric(ms(percentileOf(times, 95)), "p95-ms")
				})
			}
		})
	}
}

// turnPage is how many turns the conversations page lists at a time.
const turnPage = 50

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentileOf returns the p-th percentile of d.
func percentileOf(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func contains(want ...string) func(string) error {
	return func(body string) error {
		for _, w := range want {
			if !strings.Contains(body, w) {
				return fmt.Errorf("no %q in the page", w)
			}
		}
		return nil
	}
}

func lacks(unwanted string) func(string) error {
	return func(body string) error {
		if strings.Contains(body, unwanted) {
			return fmt.Errorf("%q in the page", unwanted)
		}
		return nil
	}
}

// rows checks that the page lists n turns.
func rows(n int) func(string) error {
	return func(body string) error {
		if got := strings.Count(body, `<tr><td><a href="/turns/`); got != n {
			return fmt.Errorf("%d turns listed, want %d", got, n)
		}
		return nil
	}
}

// onlyAgent checks that every turn listed is agent's.
func onlyAgent(agent hooks.AgentName) func(string) error {
	return func(body string) error {
		for i := range tracetest.Agents {
			other := tracetest.Agent(i)
			if other != agent && strings.Contains(body, "<td>"+string(other)+"</td>") {
				return fmt.Errorf("a turn of %s listed", other)
			}
		}
		return nil
	}
}

func all(checks ...func(string) error) func(string) error {
	return func(body string) error {
		for _, c := range checks {
			if err := c(body); err != nil {
				return err
			}
		}
		return nil
	}
}
