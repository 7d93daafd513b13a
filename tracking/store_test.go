package tracking

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/internal/dbtest"
)

// openStore opens (or, after a Close, reopens) the database of dialect d that key names
// (dbtest.Dialect.Open) and upgrades it.
func openStore(t testing.TB, d dbtest.Dialect, key string) (*Store, *dbutil.Database) {
	t.Helper()
	db := d.Open(t, key)
	s := New(db)
	if err := s.Upgrade(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, db
}

// reopen closes db, the database of dialect d that key names, and opens its store again
// (upgrading it), as a restart does.
func reopen(t testing.TB, d dbtest.Dialect, db *dbutil.Database, key string) (*Store, *dbutil.Database) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return openStore(t, d, key)
}

// execAll runs queries on db in order (e.g. to make a database what an older version left
// behind), failing the test at the first that fails.
func execAll(t testing.TB, db *dbutil.Database, queries ...string) {
	t.Helper()
	for _, q := range queries {
		if _, err := db.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// upgradedFrom makes a fresh database of dialect d what an older version left behind, by
// running queries on it, and returns the store on it, upgraded from there.
func upgradedFrom(t testing.TB, d dbtest.Dialect, queries ...string) *Store {
	t.Helper()
	db := d.Fresh(t)
	execAll(t, db, queries...)
	s := New(db)
	if err := s.Upgrade(context.Background()); err != nil {
		t.Fatalf("upgrade from the older schema: %v", err)
	}
	return s
}

// checkVersion fails the test unless tracking's version table says want.
func checkVersion(t testing.TB, db *dbutil.Database, want int) {
	t.Helper()
	var version int
	if err := db.QueryRow(context.Background(), "SELECT version FROM tracking_version").Scan(&version); err != nil || version != want {
		t.Fatalf("tracking_version = %d, %v; want %d", version, err, want)
	}
}

// newStore opens an upgraded store of dialect d on a fresh database.
func newStore(t testing.TB, d dbtest.Dialect) *Store {
	t.Helper()
	s, _ := openStore(t, d, filepath.Join(t.TempDir(), "hookroom.db"))
	return s
}

// change is one step of a table-driven test: a change to a store, checked by reading its rows.
type change[T any] struct {
	name string
	do   func() error // the change (nil: none, only read)
	want T            // what reading the rows gives after it
}

// applyChanges makes the changes in order, failing the test at the first that fails or after
// which list does not give its want.
func applyChanges[T any](t *testing.T, changes []change[T], list func() (T, error)) {
	t.Helper()
	for _, st := range changes {
		if st.do != nil {
			if err := st.do(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		got, err := list()
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Fatalf("%s: rows\n got %+v\nwant %+v", st.name, got, st.want)
		}
	}
}
