package matrixio

import (
	"database/sql"
	"path/filepath"
	"testing"

	"go.mau.fi/util/dbutil"
	_ "modernc.org/sqlite"
)

func openTestDB(t *testing.T) *dbutil.Database {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookroom.db")
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db, err := dbutil.NewWithDB(raw, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestStoreUpgrade(t *testing.T) {
	db := openTestDB(t)
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
}

func TestStoreCredentials(t *testing.T) {
	ctx := t.Context()
	store := NewStore(openTestDB(t))
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
}

func TestStoreSyncStore(t *testing.T) {
	ctx := t.Context()
	store := NewStore(openTestDB(t))
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
}
