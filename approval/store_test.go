package approval

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

func TestStore(t *testing.T) {
	dbtest.ForStores(t, New, func(t *testing.T, _ *dbutil.Database, s *Store) {
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
		if all, err := s.Pending(ctx); err != nil || len(all) != 1 || all[0].ID != b.ID {
			t.Errorf("Pending after a decision = %+v, %v", all, err)
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
