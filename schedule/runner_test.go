package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/dbtest"
)

// recorder is a FireFunc that remembers what fired when, and can fail.
type recorder struct {
	mu     sync.Mutex
	fired  []string // "ID@due/missed"
	at     []time.Time
	failOn int // fail the deliveries while failOn > 0
}

func (r *recorder) fire(_ context.Context, f Firing) (id.EventID, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failOn > 0 {
		r.failOn--
		return "", errors.New("homeserver down")
	}
	kind := "fired"
	if f.Missed {
		kind = "missed"
	}
	r.fired = append(r.fired, fmt.Sprintf("%s@%s/%s", f.Task.ID, f.Due.UTC().Format("15:04:05"), kind))
	r.at = append(r.at, time.Now())
	return id.EventID("$" + f.TxnKey()), nil
}

func (r *recorder) snapshot() ([]string, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.fired...), append([]time.Time(nil), r.at...)
}

// startRunner runs a runner on s until the returned stop is called (a
// process that stops, for a restart).
func startRunner(s *Store, rec *recorder, grace time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	r := NewRunner(s, rec.fire)
	r.Grace = func() time.Duration { return grace }
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	return func() { cancel(); <-done }
}

// TestRunnerRunOnTime runs a recurring task for hours of fake time
// (testing/synctest) across a restart: it fires at each due time, exactly
// then, once.
func TestRunnerRunOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStore(dbtest.SQLite.Fresh(t))
		if err := s.Upgrade(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		task := addTask(t, s, roomA, "every 1 hour ping", start)
		once := addTask(t, s, roomA, "in 90 minutes once", start)
		rec := &recorder{}

		stop := startRunner(s, rec, time.Hour)
		time.Sleep(150 * time.Minute) // fires at +1h, +1h30 (once), +2h
		synctest.Wait()
		stop()
		// Down for 20 minutes across the +3h due time, then restarted: the
		// missed run is within the grace, fires once at start, and the
		// next one keeps the hourly phase.
		time.Sleep(50 * time.Minute) // now +3h20
		stop = startRunner(s, rec, time.Hour)
		time.Sleep(50 * time.Minute) // through +4h
		synctest.Wait()
		stop()

		fired, at := rec.snapshot()
		want := []string{
			task.ID + "@" + start.Add(time.Hour).UTC().Format("15:04:05") + "/fired",
			once.ID + "@" + start.Add(90*time.Minute).UTC().Format("15:04:05") + "/fired",
			task.ID + "@" + start.Add(2*time.Hour).UTC().Format("15:04:05") + "/fired",
			task.ID + "@" + start.Add(3*time.Hour).UTC().Format("15:04:05") + "/fired",
			task.ID + "@" + start.Add(4*time.Hour).UTC().Format("15:04:05") + "/fired",
		}
		if fmt.Sprint(fired) != fmt.Sprint(want) {
			t.Fatalf("fired\n%v\nwant\n%v", fired, want)
		}
		wantAt := []time.Duration{time.Hour, 90 * time.Minute, 2 * time.Hour, 200 * time.Minute, 4 * time.Hour}
		for i, d := range wantAt {
			if got := at[i].Sub(start); got != d {
				t.Errorf("firing %d at +%s, want +%s", i, got, d)
			}
		}
		got, _ := s.Get(t.Context(), task.ID)
		if want := start.Add(5 * time.Hour); !got.NextRun.Equal(want) {
			t.Errorf("next run %s, want %s", got.NextRun, want)
		}
		if got, _ := s.Get(t.Context(), once.ID); got.State != StateDone {
			t.Errorf("one-time task is %s after firing, want done", got.State)
		}
	})
}

// TestRunnerMissedWhileDown: a task overdue within the grace fires once on
// start; one overdue by more is reported missed (once), and a recurring one
// goes on at its next run.
func TestRunnerMissedWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStore(dbtest.SQLite.Fresh(t))
		if err := s.Upgrade(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		recent := addTask(t, s, roomA, "in 170 minutes within grace", start)
		old := addTask(t, s, roomA, "in 10 minutes outside grace", start)
		daily := addTask(t, s, roomA, "every 1 hour hourly", start)
		time.Sleep(3 * time.Hour) // hookroom is down
		rec := &recorder{}
		stop := startRunner(s, rec, time.Hour)
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		stop()
		fired, at := rec.snapshot()
		hm := func(d time.Duration) string { return start.Add(d).UTC().Format("15:04:05") }
		want := []string{
			old.ID + "@" + hm(10*time.Minute) + "/missed",
			daily.ID + "@" + hm(time.Hour) + "/missed", // 2h late; the runs at +2h and +3h are skipped
			recent.ID + "@" + hm(170*time.Minute) + "/fired",
		}
		if fmt.Sprint(fired) != fmt.Sprint(want) {
			t.Fatalf("fired\n%v\nwant\n%v", fired, want)
		}
		for i, a := range at {
			if a.Sub(start) != 3*time.Hour {
				t.Errorf("firing %d at +%s, want at start (+3h)", i, a.Sub(start))
			}
		}
		if got, _ := s.Get(t.Context(), daily.ID); !got.NextRun.Equal(start.Add(4 * time.Hour)) {
			t.Errorf("hourly task next run %s, want +4h", got.NextRun.Sub(start))
		}
	})
}

// TestRunnerRedeliversAfterFailure: a firing whose delivery failed is
// delivered later, once, and not claimed twice.
func TestRunnerRedeliversAfterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStore(dbtest.SQLite.Fresh(t))
		if err := s.Upgrade(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		task := addTask(t, s, roomA, "in 1 minute hello", start)
		rec := &recorder{failOn: 2}
		stop := startRunner(s, rec, time.Hour)
		time.Sleep(2 * time.Minute) // fails at +1m and +1m30s, delivered at +2m
		synctest.Wait()
		stop()
		fired, at := rec.snapshot()
		if len(fired) != 1 || fired[0] != task.ID+"@"+start.Add(time.Minute).UTC().Format("15:04:05")+"/fired" {
			t.Fatalf("fired %v", fired)
		}
		if d := at[0].Sub(start); d != 2*time.Minute {
			t.Errorf("delivered at +%s, want +2m (two retries 30 s apart)", d)
		}
		if f, m, _ := s.Firings(t.Context(), task.ID); f != 1 || m != 0 {
			t.Errorf("firings: %d fired %d missed", f, m)
		}
	})
}

// A firing that cannot be delivered is retried until a day past the grace,
// then given up (marked delivered, nothing posted): no retry loop forever.
func TestRunnerGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := NewStore(dbtest.SQLite.Fresh(t))
		if err := s.Upgrade(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		addTask(t, s, roomA, "in 1 minute never delivered", start)
		rec := &recorder{failOn: 1 << 30}
		stop := startRunner(s, rec, time.Hour)
		time.Sleep(time.Minute + time.Hour + GiveUpAfter - time.Second)
		synctest.Wait()
		if pending, _ := s.Undelivered(t.Context()); len(pending) != 1 {
			t.Fatalf("undelivered before giving up: %d, want 1", len(pending))
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		stop()
		if pending, _ := s.Undelivered(t.Context()); len(pending) != 0 {
			t.Fatalf("still undelivered after a day past the grace: %+v", pending)
		}
		if fired, _ := rec.snapshot(); len(fired) != 0 {
			t.Fatalf("delivered %v", fired)
		}
	})
}
