package tracking

import (
	"context"
	"path/filepath"
	"testing"
)

func TestDelivery(t *testing.T) {
	s := newStore(t)
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
}

// A database made before the delivery table existed gets it on upgrade.
func TestUpgradeFromV1AddsDeliveries(t *testing.T) {
	ctx := context.Background()
	db, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "v1.db"))
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
}
