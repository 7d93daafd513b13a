package tracking

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

func TestDelivery(t *testing.T) {
	forDialects(t, func(t *testing.T, d dialect) {
		s := d.newStore(t)
		ctx := context.Background()
		if got, err := s.Delivery(ctx, "$q"); err != nil || got != "" {
			t.Fatalf("no delivery yet: %q, %v", got, err)
		}
		if err := s.RecordDelivery(ctx, "!r:hs", "$q", "$reply1"); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordDelivery(ctx, "!r:hs", "$q", "$reply2"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Delivery(ctx, "$q"); err != nil || got != "$reply1" {
			t.Errorf("delivery = %q, %v; want the first reply recorded", got, err)
		}
	})
}

// A database made before the delivery table existed gets it on upgrade.
func TestUpgradeFromV1AddsDeliveries(t *testing.T) {
	forDialects(t, func(t *testing.T, d dialect) {
		ctx := context.Background()
		db, err := d.open(ctx, t, filepath.Join(t.TempDir(), "v1.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		// The v1 schema: everything but the delivery table, at version 1.
		for _, q := range []string{
			`CREATE TABLE tracking_version (version INTEGER, compat INTEGER)`,
			`INSERT INTO tracking_version (version, compat) VALUES (1, 1)`,
		} {
			if _, err := db.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		s := New(db)
		if err := s.Upgrade(ctx); err != nil {
			t.Fatalf("upgrade from v1: %v", err)
		}
		if err := s.RecordDelivery(ctx, "!r:hs", "$q", "$a"); err != nil {
			t.Fatalf("delivery table missing after upgrade: %v", err)
		}
	})
}

func TestReplies(t *testing.T) {
	forDialects(t, func(t *testing.T, d dialect) {
		s := d.newStore(t)
		ctx := context.Background()
		if got, err := s.Replies(ctx, "$q"); err != nil || len(got) != 0 {
			t.Fatalf("no replies yet: %v, %v", got, err)
		}
		for _, r := range []Reply{
			{Part: 2, EventID: "$c", Sender: "@helper:hs"},
			{Part: 0, EventID: "$a", Sender: "@helper:hs"},
			{Part: 1, EventID: "$b", Sender: "@helper:hs"},
			{Part: 1, EventID: "$b2", Sender: "@helper:hs"}, // the first recorded wins
		} {
			if err := s.RecordReply(ctx, "!r:hs", "$q", r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Replies(ctx, "$q")
		if err != nil {
			t.Fatal(err)
		}
		want := []Reply{{0, "$a", "@helper:hs"}, {1, "$b", "@helper:hs"}, {2, "$c", "@helper:hs"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("replies = %v, want %v", got, want)
		}
		if first, err := s.Delivery(ctx, "$q"); err != nil || first != "$a" {
			t.Errorf("Delivery = %q, %v; want part 0", first, err)
		}
	})
}

// A v2 database keeps its delivery records, as part 0 without a sender.
func TestUpgradeFromV2KeepsDeliveries(t *testing.T) {
	forDialects(t, func(t *testing.T, d dialect) {
		ctx := context.Background()
		db, err := d.open(ctx, t, filepath.Join(t.TempDir(), "v2.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range []string{
			`CREATE TABLE tracking_version (version INTEGER, compat INTEGER)`,
			`INSERT INTO tracking_version (version, compat) VALUES (2, 2)`,
			`CREATE TABLE tracking_delivery (source_event_id TEXT PRIMARY KEY, room_id TEXT NOT NULL, reply_event_id TEXT NOT NULL, created_at BIGINT NOT NULL)`,
			`INSERT INTO tracking_delivery VALUES ('$q', '!r:hs', '$old', 1)`,
		} {
			if _, err := db.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		s := New(db)
		if err := s.Upgrade(ctx); err != nil {
			t.Fatalf("upgrade from v2: %v", err)
		}
		got, err := s.Replies(ctx, "$q")
		if err != nil || fmt.Sprint(got) != fmt.Sprint([]Reply{{0, "$old", ""}}) {
			t.Errorf("replies after upgrade = %v, %v", got, err)
		}
	})
}
