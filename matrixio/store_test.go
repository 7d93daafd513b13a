package matrixio

import (
	"strings"
	"testing"

	"github.com/hookroom/hookroom/internal/dbtest"
)

func TestStoreUpgrade(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		db := dialect.Fresh(t)
		for i := range 2 { // the second run must be a no-op
			if err := NewStore(db).Upgrade(t.Context()); err != nil {
				t.Fatalf("upgrade #%d: %v", i+1, err)
			}
		}
		for _, table := range []string{"matrixio_version", "matrixio_account", "matrixio_sync"} {
			ok, err := db.TableExists(t.Context(), table)
			if err != nil || !ok {
				t.Errorf("table %s exists = %v, %v", table, ok, err)
			}
		}
		var version int
		if err := db.QueryRow(t.Context(), "SELECT version FROM matrixio_version").Scan(&version); err != nil || version != 2 {
			t.Errorf("matrixio_version = %d, %v; want 2", version, err)
		}
		if ok, _ := db.TableExists(t.Context(), "version"); ok {
			t.Error("matrixio created the generic version table; it must only use matrixio_version")
		}
	})
}

func TestStoreCredentials(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		ctx := t.Context()
		store := NewStore(dialect.Fresh(t))
		if err := store.Upgrade(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := store.loadCredentials(ctx, "@a:x"); err != nil || got != nil {
			t.Fatalf("empty store returned %+v, %v", got, err)
		}
		want := credentials{UserID: "@a:x", DeviceID: "DEV1", AccessToken: "tok1", Password: "pw", Registered: true}
		if err := store.saveCredentials(ctx, &want); err != nil {
			t.Fatal(err)
		}
		want.AccessToken = "tok2"
		if err := store.saveCredentials(ctx, &want); err != nil {
			t.Fatal(err)
		}
		got, err := store.loadCredentials(ctx, "@a:x")
		if err != nil {
			t.Fatal(err)
		}
		if *got != want {
			t.Errorf("loaded %+v, want %+v", *got, want)
		}
		if other, _ := store.loadCredentials(ctx, "@b:x"); other != nil {
			t.Errorf("credentials leaked across accounts: %+v", other)
		}
	})
}

func TestStoreSyncStore(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		ctx := t.Context()
		store := NewStore(dialect.Fresh(t))
		if err := store.Upgrade(ctx); err != nil {
			t.Fatal(err)
		}
		if nb, err := store.LoadNextBatch(ctx, "@a:x"); err != nil || nb != "" {
			t.Fatalf("fresh next batch = %q, %v", nb, err)
		}
		steps := []struct {
			name string
			do   func() error
		}{
			{"save filter a", func() error { return store.SaveFilterID(ctx, "@a:x", "f1") }},
			{"save batch a", func() error { return store.SaveNextBatch(ctx, "@a:x", "s1") }},
			{"save batch b", func() error { return store.SaveNextBatch(ctx, "@b:x", "t1") }},
			{"advance batch a", func() error { return store.SaveNextBatch(ctx, "@a:x", "s2") }},
			{"save hashed filter b", func() error { return store.saveFilter(ctx, "@b:x", "g1", "h1") }},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		checks := []struct {
			name string
			got  func() (string, error)
			want string
		}{
			{"batch a", func() (string, error) { return store.LoadNextBatch(ctx, "@a:x") }, "s2"},
			{"batch b", func() (string, error) { return store.LoadNextBatch(ctx, "@b:x") }, "t1"},
			{"filter a survives batch saves", func() (string, error) { return store.LoadFilterID(ctx, "@a:x") }, "f1"},
			{"filter b", func() (string, error) { return store.LoadFilterID(ctx, "@b:x") }, "g1"},
			{"filter of unknown account", func() (string, error) { return store.LoadFilterID(ctx, "@c:x") }, ""},
		}
		for _, c := range checks {
			got, err := c.got()
			if err != nil || got != c.want {
				t.Errorf("%s = %q, %v; want %q", c.name, got, err, c.want)
			}
		}
		if _, hash, _ := store.loadFilter(ctx, "@b:x"); hash != "h1" {
			t.Errorf("filter hash = %q", hash)
		}
		if nb, _ := store.LoadNextBatch(ctx, "@b:x"); nb != "t1" {
			t.Errorf("saving a filter reset the batch: %q", nb)
		}
	})
}

// TestStoreCryptoTables creates mautrix's room-state and crypto tables the way cryptoSetup
// does (twice: the second upgrade is a no-op), and checks the pickle key and the sealed
// cross-signing keys, on both databases.
func TestStoreCryptoTables(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		ctx := t.Context()
		store := NewStore(dialect.Fresh(t))
		if err := store.Upgrade(ctx); err != nil {
			t.Fatal(err)
		}
		m := &Manager{store: store}
		for i := range 2 {
			m.shared = nil
			shared, err := m.cryptoSetup(ctx)
			if err != nil {
				t.Fatalf("crypto setup #%d: %v", i+1, err)
			}
			if len(shared.pickleKey) != 32 {
				t.Fatalf("pickle key of %d bytes", len(shared.pickleKey))
			}
		}
		for _, table := range []string{"mx_version", "mx_room_state", "crypto_version", "crypto_account", "crypto_olm_session", "crypto_megolm_inbound_session"} {
			if ok, err := store.root.TableExists(ctx, table); err != nil || !ok {
				t.Errorf("table %s exists = %v, %v", table, ok, err)
			}
		}
		key1, err1 := store.pickleKey(ctx)
		key2, err2 := store.pickleKey(ctx)
		if err1 != nil || err2 != nil || string(key1) != string(key2) {
			t.Fatalf("pickle key not stable: %v, %v", err1, err2)
		}

		rec := &crossSigning{SignedDevice: "DEV1"}
		rec.Seeds.MasterKey = []byte("0123456789abcdef0123456789abcdef")
		if err := store.saveCrossSigning(ctx, "@a:x", rec); err != nil {
			t.Fatal(err)
		}
		rec.SignedDevice = "DEV2"
		if err := store.saveCrossSigning(ctx, "@a:x", rec); err != nil { // replaces
			t.Fatal(err)
		}
		got, err := store.loadCrossSigning(ctx, "@a:x")
		if err != nil || got == nil || got.SignedDevice != "DEV2" || string(got.Seeds.MasterKey) != string(rec.Seeds.MasterKey) {
			t.Fatalf("cross-signing keys = %+v, %v", got, err)
		}
		var sealed string
		if err := store.root.QueryRow(ctx, "SELECT sealed FROM matrixio_cross_signing WHERE user_id=$1", "@a:x").Scan(&sealed); err != nil || strings.Contains(sealed, "DEV2") {
			t.Errorf("stored cross-signing keys not sealed: %q, %v", sealed, err)
		}
		if err := store.deleteCrossSigning(ctx, "@a:x"); err != nil {
			t.Fatal(err)
		}
		if got, err := store.loadCrossSigning(ctx, "@a:x"); err != nil || got != nil {
			t.Errorf("after delete: %+v, %v", got, err)
		}
	})
}
