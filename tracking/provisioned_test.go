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

func TestProvisionedRooms(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "hookroom.db")
		s, db := openStore(t, d, path)
		at := time.UnixMilli(1700000000123)
		lobby := ProvisionedRoom{Key: "room:lobby", RoomID: roomA, SpecHash: "h1", Accounts: []id.UserID{router, agent}, ProvisionedAt: at}
		lobbySorted := lobby
		lobbySorted.Accounts = []id.UserID{agent, router}
		ref := ProvisionedRoom{Key: "ref:!b:localhost", RoomID: roomB, SpecHash: "h2", ProvisionedAt: at}

		// forget forgets the rows of keys, expecting had of them to be gone.
		forget := func(had int, keys ...string) func() error {
			return func() error {
				n, err := s.ForgetProvisioned(ctx, keys...)
				if err == nil && n != had {
					err = fmt.Errorf("forget = %d; want %d", n, had)
				}
				return err
			}
		}
		steps := []change[map[string]ProvisionedRoom]{
			{name: "empty", want: map[string]ProvisionedRoom{}},
			{name: "remember: accounts come back sorted", do: func() error { return s.RememberProvisioned(ctx, lobby) },
				want: map[string]ProvisionedRoom{"room:lobby": lobbySorted}},
			{name: "a room without accounts", do: func() error { return s.RememberProvisioned(ctx, ref) },
				want: map[string]ProvisionedRoom{"room:lobby": lobbySorted, "ref:!b:localhost": ref}},
			{name: "remembering a key again replaces its row", do: func() error {
				again := lobby
				again.RoomID, again.SpecHash, again.Accounts = roomB, "h3", []id.UserID{router}
				return s.RememberProvisioned(ctx, again)
			}, want: map[string]ProvisionedRoom{
				"room:lobby":       {Key: "room:lobby", RoomID: roomB, SpecHash: "h3", Accounts: []id.UserID{router}, ProvisionedAt: at},
				"ref:!b:localhost": ref,
			}},
			{name: "forget one, and one never remembered", do: forget(1, "ref:!b:localhost", "room:never"),
				want: map[string]ProvisionedRoom{
					"room:lobby": {Key: "room:lobby", RoomID: roomB, SpecHash: "h3", Accounts: []id.UserID{router}, ProvisionedAt: at},
				}},
			{name: "forget nothing", do: forget(0),
				want: map[string]ProvisionedRoom{
					"room:lobby": {Key: "room:lobby", RoomID: roomB, SpecHash: "h3", Accounts: []id.UserID{router}, ProvisionedAt: at},
				}},
		}
		applyChanges(t, steps, func() (map[string]ProvisionedRoom, error) { return s.ProvisionedRooms(ctx) })

		// The rows survive closing and reopening the database.
		s2, _ := reopen(t, d, db, path)
		got, err := s2.ProvisionedRooms(ctx)
		if err != nil || len(got) != 1 || got["room:lobby"].SpecHash != "h3" {
			t.Fatalf("after reopening: %+v, %v", got, err)
		}
	})
}

func TestUpgradeFromV4AddsProvisionedRooms(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "v4.db")
		s, db := openStore(t, d, path)
		// Make it what version 4 left behind.
		execAll(t, db, `DROP TABLE tracking_provisioned_room`, `DROP TABLE tracking_delivery_intent`, `UPDATE tracking_version SET version = 4, compat = 4`)
		if err := s.RememberInvitedRoom(ctx, InvitedRoom{RoomID: roomA, Account: agent, Inviter: alice}); err != nil {
			t.Fatal(err)
		}

		s2, db2 := reopen(t, d, db, path) // upgrades
		checkVersion(t, db2, 6)
		if err := s2.RememberProvisioned(ctx, ProvisionedRoom{Key: "room:lobby", RoomID: roomA, SpecHash: "h"}); err != nil {
			t.Fatalf("provisioned-room table missing after upgrade: %v", err)
		}
		if got, err := s2.InvitedRooms(ctx); err != nil || len(got) != 1 || got[0].Inviter != alice {
			t.Errorf("invited rooms after upgrade: %+v, %v", got, err)
		}
	})
}
