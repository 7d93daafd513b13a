package tracking

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

func TestProvisionedRooms(t *testing.T) {
	forDialects(t, func(t *testing.T, d dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "hookroom.db")
		s, db := d.openStore(t, path)
		at := time.UnixMilli(1700000000123)
		lobby := ProvisionedRoom{Key: "room:lobby", RoomID: roomA, SpecHash: "h1", Accounts: []id.UserID{router, agent}, ProvisionedAt: at}
		lobbySorted := lobby
		lobbySorted.Accounts = []id.UserID{agent, router}
		ref := ProvisionedRoom{Key: "ref:!b:localhost", RoomID: roomB, SpecHash: "h2", ProvisionedAt: at}

		steps := []struct {
			name    string
			do      func() error
			forgets bool // call ForgetProvisioned(forget...), expecting had rows gone
			forget  []string
			had     int
			want    map[string]ProvisionedRoom
		}{
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
			{name: "forget one, and one never remembered", forgets: true, forget: []string{"ref:!b:localhost", "room:never"}, had: 1,
				want: map[string]ProvisionedRoom{
					"room:lobby": {Key: "room:lobby", RoomID: roomB, SpecHash: "h3", Accounts: []id.UserID{router}, ProvisionedAt: at},
				}},
			{name: "forget nothing", forgets: true, had: 0,
				want: map[string]ProvisionedRoom{
					"room:lobby": {Key: "room:lobby", RoomID: roomB, SpecHash: "h3", Accounts: []id.UserID{router}, ProvisionedAt: at},
				}},
		}
		for _, st := range steps {
			if st.do != nil {
				if err := st.do(); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
			}
			if st.forgets {
				n, err := s.ForgetProvisioned(ctx, st.forget...)
				if err != nil || n != st.had {
					t.Fatalf("%s: forget = %d, %v; want %d", st.name, n, err, st.had)
				}
			}
			got, err := s.ProvisionedRooms(ctx)
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if !reflect.DeepEqual(got, st.want) {
				t.Fatalf("%s: rooms\n got %+v\nwant %+v", st.name, got, st.want)
			}
		}

		// The rows survive closing and reopening the database.
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		s2, _ := d.openStore(t, path)
		got, err := s2.ProvisionedRooms(ctx)
		if err != nil || len(got) != 1 || got["room:lobby"].SpecHash != "h3" {
			t.Fatalf("after reopening: %+v, %v", got, err)
		}
	})
}

func TestUpgradeFromV4AddsProvisionedRooms(t *testing.T) {
	forDialects(t, func(t *testing.T, d dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "v4.db")
		s, db := d.openStore(t, path)
		// Make it what version 4 left behind.
		for _, q := range []string{`DROP TABLE tracking_provisioned_room`, `DROP TABLE tracking_delivery_intent`, `UPDATE tracking_version SET version = 4, compat = 4`} {
			if _, err := db.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RememberInvitedRoom(ctx, InvitedRoom{RoomID: roomA, Account: agent, Inviter: alice}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		s2, db2 := d.openStore(t, path) // upgrades
		var version int
		if err := db2.QueryRow(ctx, "SELECT version FROM tracking_version").Scan(&version); err != nil || version != 6 {
			t.Fatalf("version after upgrade = %d, %v; want 6", version, err)
		}
		if err := s2.RememberProvisioned(ctx, ProvisionedRoom{Key: "room:lobby", RoomID: roomA, SpecHash: "h"}); err != nil {
			t.Fatalf("provisioned-room table missing after upgrade: %v", err)
		}
		if got, err := s2.InvitedRooms(ctx); err != nil || len(got) != 1 || got[0].Inviter != alice {
			t.Errorf("invited rooms after upgrade: %+v, %v", got, err)
		}
	})
}
