package tracking

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/dbtest"
)

func TestInvitedRooms(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "hookroom.db")
		s, db := openStore(t, d, path)
		at := time.UnixMilli(1700000000123)
		dm := InvitedRoom{RoomID: roomA, Account: agent, Inviter: alice, IsDirect: true, AcceptedAt: at}
		group := InvitedRoom{RoomID: roomB, Account: agent, Inviter: bob, AcceptedAt: at}
		routerToo := InvitedRoom{RoomID: roomB, Account: router, Inviter: bob, AcceptedAt: at}

		// forget forgets r's row, expecting it to have existed (or not).
		forget := func(r InvitedRoom, want bool) func() error {
			return func() error {
				had, err := s.ForgetInvitedRoom(ctx, r.RoomID, r.Account)
				if err == nil && had != want {
					err = fmt.Errorf("forget = %v; want %v", had, want)
				}
				return err
			}
		}
		steps := []change[[]InvitedRoom]{
			{name: "empty", want: nil},
			{name: "remember a DM", do: func() error { return s.RememberInvitedRoom(ctx, dm) }, want: []InvitedRoom{dm}},
			{name: "two accounts in one room", do: func() error {
				if err := s.RememberInvitedRoom(ctx, routerToo); err != nil {
					return err
				}
				return s.RememberInvitedRoom(ctx, group)
			}, want: []InvitedRoom{dm, group, routerToo}},
			{name: "remembering again replaces the row", do: func() error {
				again := group
				again.Inviter, again.IsDirect = carol, true
				return s.RememberInvitedRoom(ctx, again)
			}, want: []InvitedRoom{dm, {RoomID: roomB, Account: agent, Inviter: carol, IsDirect: true, AcceptedAt: at}, routerToo}},
			{name: "forget one account's row", do: forget(routerToo, true),
				want: []InvitedRoom{dm, {RoomID: roomB, Account: agent, Inviter: carol, IsDirect: true, AcceptedAt: at}}},
			{name: "forget again: nothing there", do: forget(routerToo, false),
				want: []InvitedRoom{dm, {RoomID: roomB, Account: agent, Inviter: carol, IsDirect: true, AcceptedAt: at}}},
			{name: "forget a room never remembered", do: forget(InvitedRoom{RoomID: "!never:localhost", Account: agent}, false),
				want: []InvitedRoom{dm, {RoomID: roomB, Account: agent, Inviter: carol, IsDirect: true, AcceptedAt: at}}},
			{name: "forget the DM", do: forget(dm, true),
				want: []InvitedRoom{{RoomID: roomB, Account: agent, Inviter: carol, IsDirect: true, AcceptedAt: at}}},
		}
		applyChanges(t, steps, func() ([]InvitedRoom, error) { return s.InvitedRooms(ctx) })

		// The rows survive closing and reopening the database.
		s2, _ := reopen(t, d, db, path)
		got, err := s2.InvitedRooms(ctx)
		if err != nil || len(got) != 1 || got[0].RoomID != roomB || got[0].Inviter != carol {
			t.Fatalf("after reopening: %+v, %v", got, err)
		}

		// A zero AcceptedAt is filled in with the store's clock.
		s2.now = func() time.Time { return at.Add(time.Hour) }
		if err := s2.RememberInvitedRoom(ctx, InvitedRoom{RoomID: roomA, Account: router, Inviter: alice}); err != nil {
			t.Fatal(err)
		}
		got, _ = s2.InvitedRooms(ctx)
		if len(got) != 2 || got[0].RoomID != roomA || got[0].Account != router || !got[0].AcceptedAt.Equal(at.Add(time.Hour)) {
			t.Errorf("zero AcceptedAt: %+v", got)
		}
	})
}

// A database at version 2 (everything but the invited-room table), holding
// events and deliveries, gets the table on upgrade and keeps its data.
func TestUpgradeFromV2AddsInvitedRooms(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "v2.db")
		s, db := openStore(t, d, path)
		// Make it what version 2 left behind.
		execAll(t, db, `DROP TABLE tracking_invited_room`, `DROP TABLE tracking_provisioned_room`, `DROP TABLE tracking_delivery_intent`, `UPDATE tracking_version SET version = 2, compat = 2`)
		if fresh, err := s.Record(ctx, syncEvent(t, roomA, "$kept", "hello"), agent); err != nil || !fresh {
			t.Fatalf("record: %v, %v", fresh, err)
		}
		if err := s.RecordDelivery(ctx, roomA, "$kept", "$reply"); err != nil {
			t.Fatal(err)
		}

		s2, db2 := reopen(t, d, db, path) // upgrades
		checkVersion(t, db2, 6)
		if err := s2.RememberInvitedRoom(ctx, InvitedRoom{RoomID: roomA, Account: agent, Inviter: alice, IsDirect: true}); err != nil {
			t.Fatalf("invited-room table missing after upgrade: %v", err)
		}
		if got, err := s2.InvitedRooms(ctx); err != nil || len(got) != 1 || got[0].Inviter != alice || !got[0].IsDirect {
			t.Errorf("invited rooms after upgrade: %+v, %v", got, err)
		}
		pending, err := s2.Pending(ctx)
		if err != nil || len(pending) != 1 || pending[0].ID != id.EventID("$kept") {
			t.Errorf("inbox after upgrade: %v, %v", pending, err)
		}
		if reply, err := s2.Delivery(ctx, "$kept"); err != nil || reply != "$reply" {
			t.Errorf("delivery after upgrade: %q, %v", reply, err)
		}
	})
}
