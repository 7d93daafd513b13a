package usage

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	roomA = id.RoomID("!a:localhost")
	roomB = id.RoomID("!b:localhost")
	alice = id.UserID("@alice:localhost")
	bob   = id.UserID("@bob:localhost")
)

func turn(event string, agent hooks.AgentName, room id.RoomID, who id.UserID, in, out int, at time.Time) Turn {
	return Turn{
		SourceEventID: id.EventID(event), Agent: agent, RoomID: room, ThreadID: id.EventID(event),
		Requester: who, Model: "m", InputTokens: in, OutputTokens: out, ModelCalls: 1, At: at,
	}
}

func TestStoreRecordAndSum(t *testing.T) {
	dbtest.ForStores(t, New, func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		day := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		turns := []Turn{
			turn("$1", "helper", roomA, alice, 100, 10, day.Add(-time.Millisecond)), // yesterday
			turn("$2", "helper", roomA, alice, 200, 20, day),
			turn("$3", "coder", roomA, bob, 300, 30, day.Add(time.Hour)),
			turn("$4", "helper", roomB, bob, 400, 40, day.Add(2*time.Hour)),
		}
		turns[2].CachedTokens = 250
		turns[3].TotalTokens = 500 // the provider's total wins over in+out
		for _, tr := range turns {
			if err := s.Record(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		// The same message and agent again: ignored.
		if err := s.Record(ctx, turn("$2", "helper", roomA, alice, 9999, 9999, day)); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, Turn{Agent: "helper"}); err == nil {
			t.Error("Record without a source event succeeded")
		}

		cases := []struct {
			name string
			f    Filter
			want Totals
		}{
			{"everything", Filter{}, Totals{Turns: 4, InputTokens: 1000, OutputTokens: 100, CachedTokens: 250, TotalTokens: 1160}},
			{"today", Filter{Since: day}, Totals{Turns: 3, InputTokens: 900, OutputTokens: 90, CachedTokens: 250, TotalTokens: 1050}},
			{"before today", Filter{Until: day}, Totals{Turns: 1, InputTokens: 100, OutputTokens: 10, TotalTokens: 110}},
			{"agent", Filter{Agent: "helper"}, Totals{Turns: 3, InputTokens: 700, OutputTokens: 70, TotalTokens: 830}},
			{"room", Filter{RoomID: roomA, Since: day}, Totals{Turns: 2, InputTokens: 500, OutputTokens: 50, CachedTokens: 250, TotalTokens: 550}},
			{"requester", Filter{Requester: bob}, Totals{Turns: 2, InputTokens: 700, OutputTokens: 70, CachedTokens: 250, TotalTokens: 830}},
			{"all at once", Filter{Agent: "helper", RoomID: roomB, Requester: bob, Since: day, Until: day.Add(3 * time.Hour)}, Totals{Turns: 1, InputTokens: 400, OutputTokens: 40, TotalTokens: 500}},
			{"nothing", Filter{Agent: "nobody"}, Totals{}},
		}
		for _, tc := range cases {
			got, err := s.Sum(ctx, tc.f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got != tc.want {
				t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
			}
		}

		by, err := s.ByAgent(ctx, Filter{RoomID: roomA})
		if err != nil {
			t.Fatal(err)
		}
		want := []AgentTotals{
			{Agent: "coder", Totals: Totals{Turns: 1, InputTokens: 300, OutputTokens: 30, CachedTokens: 250, TotalTokens: 330}},
			{Agent: "helper", Totals: Totals{Turns: 2, InputTokens: 300, OutputTokens: 30, TotalTokens: 330}},
		}
		if !reflect.DeepEqual(by, want) {
			t.Errorf("ByAgent = %+v, want %+v", by, want)
		}
		if by, err := s.ByAgent(ctx, Filter{Agent: "nobody"}); err != nil || by != nil {
			t.Errorf("ByAgent of nothing = %v, %v", by, err)
		}
	})
}

// A turn recorded inside a transaction that rolls back is not recorded:
// usage is written with the message's handled mark, or not at all.
func TestStoreRecordJoinsTransaction(t *testing.T) {
	dbtest.ForStores(t, New, func(t *testing.T, db *dbutil.Database, s *Store) {
		ctx := t.Context()
		boom := errors.New("boom")
		err := db.DoTxn(ctx, nil, func(ctx context.Context) error {
			if err := s.Record(ctx, turn("$1", "helper", roomA, alice, 1, 1, time.Time{})); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("DoTxn = %v", err)
		}
		if got, err := s.Sum(ctx, Filter{}); err != nil || got.Turns != 0 {
			t.Fatalf("after rollback: %+v, %v; want no turns", got, err)
		}
		if ex, err := s.Check(ctx, time.Now(), "helper", alice, Budgets{PerUser: 1, PerAgent: 1}); err != nil || ex != nil {
			t.Fatalf("after rollback: the day's totals say %+v, %v; want nothing used", ex, err)
		}
		err = db.DoTxn(ctx, nil, func(ctx context.Context) error {
			return s.Record(ctx, turn("$1", "helper", roomA, alice, 1, 1, time.Time{}))
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Sum(ctx, Filter{}); err != nil || got.Turns != 1 || got.TotalTokens != 2 {
			t.Fatalf("after commit: %+v, %v; want one turn of 2 tokens", got, err)
		}
	})
}

func TestStoreCheck(t *testing.T) {
	dbtest.ForStores(t, New, func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		day := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		for _, tr := range []Turn{
			turn("$old", "helper", roomA, alice, 5000, 0, day.Add(-time.Millisecond)), // yesterday: never counts
			turn("$1", "helper", roomA, alice, 60, 40, day.Add(time.Hour)),            // alice 100 today
			turn("$2", "coder", roomB, bob, 150, 50, day.Add(2*time.Hour)),            // coder 200 today
			turn("$3", "helper", roomB, bob, 20, 30, day.Add(3*time.Hour)),            // bob 250, helper 150 today
		} {
			if err := s.Record(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		// Recorded again (a bug, or a replay): the day's totals do not change.
		if err := s.Record(ctx, turn("$1", "helper", roomA, alice, 6000, 4000, day.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		now := day.Add(12 * time.Hour)
		cases := []struct {
			name  string
			agent hooks.AgentName
			who   id.UserID
			b     Budgets
			want  *Exceeded
		}{
			{"unlimited", "helper", alice, Budgets{}, nil},
			{"person under", "helper", alice, Budgets{PerUser: 101}, nil},
			{"person exactly at", "helper", alice, Budgets{PerUser: 100}, &Exceeded{Scope: ScopePerson, Limit: 100, Used: 100, Resets: day.AddDate(0, 0, 1)}},
			{"person over, any agent", "helper", bob, Budgets{PerUser: 150}, &Exceeded{Scope: ScopePerson, Limit: 150, Used: 250, Resets: day.AddDate(0, 0, 1)}},
			{"agent under", "coder", alice, Budgets{PerAgent: 201}, nil},
			{"agent over, any person", "helper", carol, Budgets{PerAgent: 150}, &Exceeded{Scope: ScopeAgent, Limit: 150, Used: 150, Resets: day.AddDate(0, 0, 1)}},
			{"person checked first", "helper", bob, Budgets{PerUser: 10, PerAgent: 10}, &Exceeded{Scope: ScopePerson, Limit: 10, Used: 250, Resets: day.AddDate(0, 0, 1)}},
			{"agent when person is fine", "helper", alice, Budgets{PerUser: 1000, PerAgent: 10}, &Exceeded{Scope: ScopeAgent, Limit: 10, Used: 150, Resets: day.AddDate(0, 0, 1)}},
		}
		for _, tc := range cases {
			got, err := s.Check(ctx, now, tc.agent, tc.who, tc.b)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
			}
		}
		// The next day (00:00 UTC) everything is available again; a
		// moment before, it is not.
		if got, err := s.Check(ctx, day.AddDate(0, 0, 1).Add(-time.Millisecond), "helper", alice, Budgets{PerUser: 100}); err != nil || got == nil {
			t.Errorf("23:59:59.999 the same day: %+v, %v; want exceeded", got, err)
		}
		if got, err := s.Check(ctx, day.AddDate(0, 0, 1), "helper", alice, Budgets{PerUser: 100}); err != nil || got != nil {
			t.Errorf("00:00 UTC the next day: %+v, %v; want nil", got, err)
		}
	})
}

const carol = id.UserID("@carol:localhost")

// Days and months are UTC, whatever zone the time is in.
func TestDayAndMonthBoundaries(t *testing.T) {
	ny := time.FixedZone("UTC-5", -5*3600)
	tokyo := time.FixedZone("UTC+9", 9*3600)
	utc := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, time.UTC) }
	cases := []struct {
		name                string
		at                  time.Time
		day, next, monthBeg time.Time
	}{
		{"midday", utc(2026, 11, 23, 12), utc(2026, 11, 23, 0), utc(2026, 11, 24, 0), utc(2026, 11, 1, 0)},
		{"midnight exactly", utc(2026, 11, 23, 0), utc(2026, 11, 23, 0), utc(2026, 11, 24, 0), utc(2026, 11, 1, 0)},
		{"last nanosecond", utc(2026, 11, 24, 0).Add(-1), utc(2026, 11, 23, 0), utc(2026, 11, 24, 0), utc(2026, 11, 1, 0)},
		{"evening west of UTC is tomorrow", time.Date(2026, 11, 23, 21, 0, 0, 0, ny), utc(2026, 11, 24, 0), utc(2026, 11, 25, 0), utc(2026, 11, 1, 0)},
		{"morning east of UTC is yesterday", time.Date(2026, 12, 1, 8, 0, 0, 0, tokyo), utc(2026, 11, 30, 0), utc(2026, 12, 1, 0), utc(2026, 11, 1, 0)},
		{"end of month", utc(2026, 11, 30, 23), utc(2026, 11, 30, 0), utc(2026, 12, 1, 0), utc(2026, 11, 1, 0)},
		{"end of year", utc(2026, 12, 31, 23), utc(2026, 12, 31, 0), utc(2027, 1, 1, 0), utc(2026, 12, 1, 0)},
		{"leap day", utc(2028, 2, 29, 5), utc(2028, 2, 29, 0), utc(2028, 3, 1, 0), utc(2028, 2, 1, 0)},
	}
	for _, tc := range cases {
		if got := DayStart(tc.at); !got.Equal(tc.day) || got.Location() != time.UTC {
			t.Errorf("%s: DayStart = %v, want %v", tc.name, got, tc.day)
		}
		if got := NextDay(tc.at); !got.Equal(tc.next) {
			t.Errorf("%s: NextDay = %v, want %v", tc.name, got, tc.next)
		}
		if got := MonthStart(tc.at); !got.Equal(tc.monthBeg) {
			t.Errorf("%s: MonthStart = %v, want %v", tc.name, got, tc.monthBeg)
		}
	}
}

func TestStoreDays(t *testing.T) {
	dbtest.ForStores(t, New, func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		day := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
		for _, tr := range []Turn{
			turn("$1", "helper", roomA, alice, 100, 10, day.Add(-time.Hour)), // the day before since
			turn("$2", "helper", roomA, alice, 200, 20, day.Add(time.Hour)),
			turn("$3", "coder", roomA, bob, 300, 30, day.Add(2*time.Hour)),
			turn("$4", "helper", roomB, bob, 400, 40, day.Add(25*time.Hour)),
		} {
			if err := s.Record(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Days(ctx, day.Add(30*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		next := day.AddDate(0, 0, 1)
		want := []DayTotal{
			{day, ScopeAgent, "coder", 330, 1},
			{day, ScopeAgent, "helper", 220, 1},
			{day, ScopePerson, string(alice), 220, 1},
			{day, ScopePerson, string(bob), 330, 1},
			{next, ScopeAgent, "helper", 440, 1},
			{next, ScopePerson, string(bob), 440, 1},
		}
		if len(got) != len(want) {
			t.Fatalf("Days = %+v, want %+v", got, want)
		}
		for i := range want {
			if !got[i].Day.Equal(want[i].Day) || got[i].Kind != want[i].Kind || got[i].Name != want[i].Name ||
				got[i].Total != want[i].Total || got[i].Turns != want[i].Turns {
				t.Errorf("Days[%d] = %+v, want %+v", i, got[i], want[i])
			}
		}
	})
}
