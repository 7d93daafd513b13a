package bot

import (
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/schedule"
)

// !schedule, !schedules and !unschedule answer without a homeserver: what
// they store and what they tell the person.
func TestScheduleCommands(t *testing.T) {
	ctx := t.Context()
	db := tempSQLite(t)
	store := schedule.NewStore(db)
	if err := store.Upgrade(ctx); err != nil {
		t.Fatal(err)
	}
	const (
		room   = id.RoomID("!room:localhost")
		other  = id.RoomID("!other:localhost")
		alice  = id.UserID("@alice:localhost")
		bob    = id.UserID("@bob:localhost")
		admin  = id.UserID("@admin:localhost")
		thread = id.EventID("$cmd")
	)
	cfg := &config.Config{
		Authorization: config.Authorization{GlobalUsers: []id.UserID{admin}},
		Schedules:     config.Schedules{Timezone: "Europe/Berlin", MissedGrace: config.Duration(time.Hour)},
	}
	b := &Bot{sched: store, schedRunner: schedule.NewRunner(store, nil)}
	b.state.Store(&world{cfg: cfg})

	idOf := func(answer string) string {
		t.Helper()
		m := scheduledIDRE.FindStringSubmatch(answer)
		if m == nil {
			t.Fatalf("no schedule id in %q", answer)
		}
		return m[1]
	}
	daily := idOf(b.scheduleCommand(ctx, b.w(), room, thread, alice, "every weekday at 9:00 stand-up"))
	task, err := store.Get(ctx, daily)
	if err != nil {
		t.Fatal(err)
	}
	if task.RoomID != room || task.ThreadID != thread || task.CreatedBy != alice || task.Message != "stand-up" ||
		task.Spec.Zone.String() != "Europe/Berlin" || task.NextRun.In(task.Spec.Zone).Hour() != 9 {
		t.Fatalf("stored %+v", task)
	}
	soon := idOf(b.scheduleCommand(ctx, b.w(), room, "", bob, "in 10 minutes tea"))

	for _, tc := range []struct{ name, req, want string }{
		{"no request", "", "Write `!schedule <when> <message>`"},
		{"no form, no model", "whenever it suits you", "I could not read a time in that."},
		{"a mistake in a known form", "on 2020-01-01 at 9:00 too late", "Not scheduled: Wed 2020-01-01 09:00:00 CET has passed"},
		{"no message", "in 5 minutes", "Not scheduled: nothing to post"},
	} {
		if got := b.scheduleCommand(ctx, b.w(), room, thread, alice, tc.req); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want it to start with %q", tc.name, got, tc.want)
		}
	}

	list := b.schedulesCommand(ctx, b.w(), room)
	if !strings.Contains(list, "`"+soon+"` once, ") || !strings.Contains(list, "`"+daily+"` every weekday at 09:00 (Europe/Berlin)") ||
		strings.Index(list, soon) > strings.Index(list, daily) || !strings.Contains(list, "by @alice:localhost: stand-up") {
		t.Errorf("!schedules: %q", list)
	}
	if got := b.schedulesCommand(ctx, b.w(), other); !strings.HasPrefix(got, "No schedules in this room.") {
		t.Errorf("!schedules elsewhere: %q", got)
	}

	for _, tc := range []struct {
		name string
		room id.RoomID
		who  id.UserID
		args []string
		want string
	}{
		{"no id", room, alice, nil, "Write `!unschedule ID`"},
		{"unknown id", room, alice, []string{"nope"}, `no schedule "nope" in this room`},
		{"someone else's", room, bob, []string{daily}, "only @alice:localhost (who created it) or an administrator"},
		{"from another room", other, alice, []string{daily}, "in this room"},
		{"the creator", room, alice, []string{daily}, "Cancelled schedule `" + daily + "`"},
		{"again", room, alice, []string{daily}, "is not active (cancelled)"},
		{"an administrator, from another room", other, admin, []string{"`" + soon + "`"}, "Cancelled schedule `" + soon + "`"},
	} {
		if got := b.unscheduleCommand(ctx, b.w(), tc.room, tc.who, tc.args); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if active, _ := store.Active(ctx, ""); len(active) != 0 {
		t.Errorf("active after cancelling: %+v", active)
	}
}

func TestMissedNotice(t *testing.T) {
	due := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	once := schedule.Firing{Task: schedule.Task{ID: "abc", Spec: schedule.Spec{Zone: time.UTC}}, Due: due, Missed: true}
	if got, want := missedNotice(once, time.Hour), "⏰ Missed schedule `abc` (due Thu 2026-11-26 09:00:00 UTC): hookroom was not running then, and it is now more than 1h0m0s late (schedules.missed_grace), so it was not run."; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	rec := once
	rec.Task.NextRun = due.Add(24 * time.Hour)
	if got := missedNotice(rec, time.Hour); !strings.HasSuffix(got, " Next run: Fri 2026-11-27 09:00:00 UTC.") {
		t.Errorf("recurring: %q", got)
	}
}
