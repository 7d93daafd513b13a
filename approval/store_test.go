package approval

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/tracking"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// forDialects runs f once per database hookroom supports, each on a fresh,
// upgraded database.
func forDialects(t *testing.T, f func(t *testing.T, s *Store)) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			var db *dbutil.Database
			if dialect == "sqlite" {
				var err error
				db, err = tracking.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "hookroom.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
			} else {
				db = pgtest.New(t)
			}
			s := New(db)
			if err := s.Upgrade(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := s.Upgrade(t.Context()); err != nil {
				t.Fatalf("second Upgrade: %v", err)
			}
			f(t, s)
		})
	}
}

func TestStore(t *testing.T) {
	forDialects(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		now := time.UnixMilli(1_700_000_000_000)
		s.now = func() time.Time { return now }
		a, err := s.Create(ctx, Approval{
			SourceEventID: "$msg", RoomID: "!r:x", ThreadID: "$msg", Agent: "assistant", Requester: "@alice:x",
			Tool: "shell", Arguments: []byte(`{"cmd":"ls"}`), CallID: "call_1", Reason: "rule",
			ExpiresAt: now.Add(time.Minute),
		})
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Create(ctx, Approval{SourceEventID: "$msg", RoomID: "!r:x", ThreadID: "$msg", Tool: "other", ExpiresAt: now.Add(time.Minute), CreatedAt: now.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if a.ID == "" || a.ID == b.ID || a.Status != Pending {
			t.Fatalf("created %+v and %+v", a, b)
		}
		if err := s.SetCard(ctx, a.ID, "$card"); err != nil {
			t.Fatal(err)
		}
		got, err := s.ByCard(ctx, "$card")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != a.ID || string(got.Arguments) != `{"cmd":"ls"}` || got.CallID != "call_1" || got.Requester != "@alice:x" ||
			!got.ExpiresAt.Equal(now.Add(time.Minute)) || got.Status != Pending || got.Reason != "rule" {
			t.Errorf("ByCard = %+v", got)
		}
		if _, err := s.ByCard(ctx, "$nothing"); !errors.Is(err, ErrNotFound) {
			t.Errorf("ByCard of an unknown card: %v, want ErrNotFound", err)
		}
		pending, err := s.PendingInThread(ctx, "!r:x", "$msg")
		if err != nil || len(pending) != 2 || pending[0].ID != a.ID {
			t.Fatalf("PendingInThread = %+v, %v", pending, err)
		}

		ok, err := s.Decide(ctx, a.ID, Denied, "@alice:x", "not now")
		if err != nil || !ok {
			t.Fatalf("Decide = %v, %v", ok, err)
		}
		ok, err = s.Decide(ctx, a.ID, Approved, "@bob:x", "")
		if err != nil || ok {
			t.Fatalf("second Decide = %v, %v; want false (the first decision wins)", ok, err)
		}
		got, err = s.Get(ctx, a.ID)
		if err != nil || got.Status != Denied || got.DecidedBy != "@alice:x" || got.DecisionReason != "not now" || !got.DecidedAt.Equal(now) {
			t.Errorf("after Decide: %+v, %v", got, err)
		}
		if _, err := s.Decide(ctx, b.ID, Pending, "", ""); err == nil {
			t.Error("Decide(Pending) succeeded")
		}
		pending, _ = s.PendingInThread(ctx, "!r:x", "$msg")
		if len(pending) != 1 || pending[0].ID != b.ID {
			t.Errorf("PendingInThread after a decision = %+v", pending)
		}
		turn, err := s.ForTurn(ctx, id.EventID("$msg"))
		if err != nil || len(turn) != 2 || turn[0].ID != a.ID || turn[1].ID != b.ID {
			t.Errorf("ForTurn = %+v, %v", turn, err)
		}
		if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(unknown) = %v", err)
		}
	})
}
