package schedule

import (
	"errors"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	roomA = id.RoomID("!a:localhost")
	roomB = id.RoomID("!b:localhost")
	alice = id.UserID("@alice:localhost")
)

func mustParse(t *testing.T, in string, now time.Time) (Spec, string) {
	t.Helper()
	spec, msg, err := Parse(in, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	return spec, msg
}

func addTask(t *testing.T, s *Store, room id.RoomID, in string, now time.Time) Task {
	t.Helper()
	spec, msg := mustParse(t, in, now)
	task, err := s.Add(t.Context(), Task{
		RoomID: room, ThreadID: "$thread", CreatedBy: alice, Spec: spec, Message: msg,
		NextRun: spec.First(now), CreatedAt: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestStoreTasks(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		daily := addTask(t, s, roomA, "every weekday at 9:00 stand-up", now)
		soon := addTask(t, s, roomA, "in 5 minutes tea", now)
		other := addTask(t, s, roomB, "every 2 hours stretch", now)

		got, err := s.Get(ctx, daily.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Message != "stand-up" || got.Spec.Cron != "0 9 * * 1-5" || got.ThreadID != "$thread" || got.CreatedBy != alice ||
			got.State != StateActive || !got.NextRun.Equal(daily.NextRun) || got.Spec.Desc != daily.Spec.Desc {
			t.Fatalf("Get = %+v, want %+v", got, daily)
		}
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(unknown) = %v, want ErrNotFound", err)
		}

		list, err := s.Active(ctx, roomA)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].ID != soon.ID || list[1].ID != daily.ID {
			t.Fatalf("Active(roomA) = %v, want [soon daily]", ids(list))
		}
		if all, _ := s.Active(ctx, ""); len(all) != 3 {
			t.Fatalf("Active(all) = %v", ids(all))
		}
		next, ok, err := s.NextRun(ctx)
		if err != nil || !ok || !next.Equal(soon.NextRun) {
			t.Fatalf("NextRun = %s %v %v, want %s", next, ok, err, soon.NextRun)
		}
		due, err := s.Due(ctx, now.Add(2*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 2 || due[0].ID != soon.ID || due[1].ID != other.ID {
			t.Fatalf("Due = %v, want [soon other]", ids(due))
		}

		if ok, err := s.Cancel(ctx, other.ID); err != nil || !ok {
			t.Fatalf("Cancel = %v %v", ok, err)
		}
		if ok, err := s.Cancel(ctx, other.ID); err != nil || ok {
			t.Fatalf("Cancel again = %v %v, want false", ok, err)
		}
		if c, _ := s.Get(ctx, other.ID); c.State != StateCancelled {
			t.Fatalf("cancelled task is %s", c.State)
		}
	})
}

func ids(ts []Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func TestStoreClaimOncePerDueTime(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
		task := addTask(t, s, roomA, "every 15 minutes ping", now)
		due := task.NextRun
		fireAt := due.Add(time.Second)
		next := task.Spec.After(due, fireAt)

		// Two runners (or a runner before and after a restart, holding the
		// same stale row) race for the same due time: one wins.
		n, errs := dbtest.Race(8, func(int) (bool, error) { return s.Claim(ctx, task, false, next, fireAt) })
		for _, err := range errs {
			t.Error(err)
		}
		if n != 1 {
			t.Fatalf("%d claims won, want 1", n)
		}
		got, _ := s.Get(ctx, task.ID)
		if !got.NextRun.Equal(next) || got.State != StateActive {
			t.Fatalf("after the claim: next %s state %s, want %s active", got.NextRun, got.State, next)
		}
		// Claimed, not delivered: it is delivered again after a restart.
		pending, err := s.Undelivered(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) != 1 || pending[0].Task.ID != task.ID || !pending[0].Due.Equal(due) || pending[0].Missed {
			t.Fatalf("Undelivered = %+v", pending)
		}
		if err := s.Delivered(ctx, pending[0], "$ev", fireAt); err != nil {
			t.Fatal(err)
		}
		if pending, _ := s.Undelivered(ctx); len(pending) != 0 {
			t.Fatalf("Undelivered after delivery = %+v", pending)
		}

		// A one-time task ends with its claim; a cancelled one cannot be claimed.
		once := addTask(t, s, roomA, "in 1 minute once", now)
		if ok, err := s.Claim(ctx, once, true, time.Time{}, now.Add(3*time.Hour)); err != nil || !ok {
			t.Fatalf("Claim(once) = %v %v", ok, err)
		}
		if got, _ := s.Get(ctx, once.ID); got.State != StateDone || !got.NextRun.IsZero() {
			t.Fatalf("one-time task after its claim: %s next %s", got.State, got.NextRun)
		}
		if fired, missed, _ := s.Firings(ctx, once.ID); fired != 0 || missed != 1 {
			t.Fatalf("firings of the missed task: %d fired, %d missed", fired, missed)
		}
		gone := addTask(t, s, roomA, "in 1 minute never", now)
		if _, err := s.Cancel(ctx, gone.ID); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Claim(ctx, gone, false, time.Time{}, now.Add(time.Minute)); err != nil || ok {
			t.Fatalf("Claim(cancelled) = %v %v, want false", ok, err)
		}
		if fired, missed, _ := s.Firings(ctx, gone.ID); fired+missed != 0 {
			t.Fatal("a lost claim left a firing behind")
		}
	})
}
