package prefs_test

import (
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/prefs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A thread's setting wins over its room's, which applies to every other
// thread; resetting the thread's brings the room's back, and settings of
// one room never show in another.
func TestEffective(t *testing.T) {
	dbtest.ForStores(t, prefs.New, func(t *testing.T, _ *dbutil.Database, s *prefs.Store) {
		ctx := t.Context()
		const room, other = "!room:example.org", "!other:example.org"
		check := func(thread string, wantValue string, wantLevel prefs.Level) {
			t.Helper()
			got, ok, err := s.Effective(ctx, room, idOf(thread), prefs.Model)
			if err != nil {
				t.Fatal(err)
			}
			if wantValue == "" {
				if ok {
					t.Errorf("thread %q: %+v, want no setting", thread, got)
				}
				return
			}
			if !ok || got.Value != wantValue || got.Level() != wantLevel {
				t.Errorf("thread %q: %+v (%v), want %s at %s", thread, got, ok, wantValue, wantLevel)
			}
		}
		check("$t1", "", "")
		if err := s.Set(ctx, room, "", prefs.Model, "small", "@alice:example.org"); err != nil {
			t.Fatal(err)
		}
		if err := s.Set(ctx, room, "$t1", prefs.Model, "large", "@bob:example.org"); err != nil {
			t.Fatal(err)
		}
		check("$t1", "large", prefs.LevelThread)
		check("$t2", "small", prefs.LevelRoom)
		check("", "small", prefs.LevelRoom)
		// Setting again replaces.
		if err := s.Set(ctx, room, "$t1", prefs.Model, "medium", "@bob:example.org"); err != nil {
			t.Fatal(err)
		}
		check("$t1", "medium", prefs.LevelThread)
		if got, ok, _ := s.Effective(ctx, other, "$t1", prefs.Model); ok {
			t.Errorf("another room sees %+v", got)
		}
		if had, err := s.Reset(ctx, room, "$t1", prefs.Model); err != nil || !had {
			t.Fatalf("Reset = %v, %v", had, err)
		}
		if had, _ := s.Reset(ctx, room, "$t1", prefs.Model); had {
			t.Error("a second Reset found a setting")
		}
		check("$t1", "small", prefs.LevelRoom)
	})
}
