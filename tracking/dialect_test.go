package tracking

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/internal/pgtest"
)

// dialect is one of the databases the store runs on. Tests written against a *dbutil.Database
// run once per dialect (forDialects), each on a fresh database.
type dialect struct {
	name string
	// open opens (or opens again) the database that key names: a SQLite file path, or for
	// PostgreSQL a fresh database the first time the key is used in the test.
	open func(ctx context.Context, t testing.TB, key string) (*dbutil.Database, error)
}

// pgDatabases maps a key (a path under the test's TempDir, so unique) to its database URL.
var pgDatabases sync.Map

var dialects = []dialect{
	{name: "sqlite", open: func(ctx context.Context, _ testing.TB, path string) (*dbutil.Database, error) {
		return OpenSQLite(ctx, path)
	}},
	{name: "postgres", open: func(_ context.Context, t testing.TB, key string) (*dbutil.Database, error) {
		u, ok := pgDatabases.Load(key)
		if !ok {
			u, _ = pgDatabases.LoadOrStore(key, pgtest.URL(t))
			t.Cleanup(func() { pgDatabases.Delete(key) })
		}
		return dbutil.NewWithDialect(u.(string), "postgres")
	}},
}

// forDialects runs f as a subtest per dialect.
func forDialects(t *testing.T, f func(t *testing.T, d dialect)) {
	for _, d := range dialects {
		t.Run(d.name, func(t *testing.T) { f(t, d) })
	}
}

// openStore opens (or reopens) the database at key and upgrades it.
func (d dialect) openStore(t testing.TB, key string) (*Store, *dbutil.Database) {
	t.Helper()
	db, err := d.open(context.Background(), t, key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	s := New(db)
	if err := s.Upgrade(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, db
}

func (d dialect) newStore(t testing.TB) *Store {
	t.Helper()
	s, _ := d.openStore(t, filepath.Join(t.TempDir(), "hookroom.db"))
	return s
}
