package dbtest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/internal/database"
	"github.com/hookroom/hookroom/internal/pgtest"
)

// Dialect is one of the databases the stores run on.
type Dialect struct {
	// Name is "sqlite" or "postgres", the name of the dialect's subtest.
	Name string
	open func(t testing.TB, key string) (*dbutil.Database, error)
}

// pgDatabases maps a key (a path under a test's TempDir, so unique) to the
// URL of the PostgreSQL database made for it.
var pgDatabases sync.Map

// The dialects, in the order ForDialects runs them.
var (
	// SQLite opens the file at the key's path with database.OpenSQLite.
	SQLite = Dialect{Name: "sqlite", open: func(t testing.TB, path string) (*dbutil.Database, error) {
		return database.OpenSQLite(t.Context(), path)
	}}
	// Postgres opens a new database (pgtest.URL) the first time a test uses
	// a key, and the same database again after that.
	Postgres = Dialect{Name: "postgres", open: func(t testing.TB, key string) (*dbutil.Database, error) {
		u, ok := pgDatabases.Load(key)
		if !ok {
			u, _ = pgDatabases.LoadOrStore(key, pgtest.URL(t))
			t.Cleanup(func() { pgDatabases.Delete(key) })
		}
		return dbutil.NewWithDialect(u.(string), "postgres")
	}}
	dialects = []Dialect{SQLite, Postgres}
)

// Open opens the database that key names, or opens it again after a Close:
// for SQLite the file at path key, for PostgreSQL the database made for key
// the first time the test used it. Key a database by a path under the test's
// TempDir, so keys never collide. The database is closed at the test's
// cleanup (closing it earlier is fine); Open fails the test when it cannot
// open it.
func (d Dialect) Open(t testing.TB, key string) *dbutil.Database {
	t.Helper()
	db, err := d.open(t, key)
	if err != nil {
		t.Fatalf("failed to open a %s database: %v", d.Name, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// Fresh opens a new, empty database, closed at the test's cleanup.
func (d Dialect) Fresh(t testing.TB) *dbutil.Database {
	t.Helper()
	return d.Open(t, filepath.Join(t.TempDir(), "hookroom.db"))
}

// ForDialects runs f as a subtest per dialect (named after it). The package's
// TestMain must run pgtest.Main for the PostgreSQL subtest, which skips under
// go test -short (pgtest.URL: the unit tier needs no PostgreSQL server).
func ForDialects(t *testing.T, f func(t *testing.T, d Dialect)) {
	t.Helper()
	for _, d := range dialects {
		t.Run(d.Name, func(t *testing.T) { f(t, d) })
	}
}

// Upgrader is a store: Upgrade creates or migrates its tables.
type Upgrader interface {
	Upgrade(ctx context.Context) error
}

// ForStores runs f as a subtest per dialect with db, a fresh database, and s,
// the store newStore makes on it, upgraded. It upgrades s twice, failing the
// test when the second Upgrade (a restart on an up-to-date database) fails.
func ForStores[S Upgrader](t *testing.T, newStore func(*dbutil.Database) S, f func(t *testing.T, db *dbutil.Database, s S)) {
	t.Helper()
	ForDialects(t, func(t *testing.T, d Dialect) {
		db := d.Fresh(t)
		s := newStore(db)
		if err := s.Upgrade(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := s.Upgrade(t.Context()); err != nil {
			t.Fatalf("second Upgrade: %v", err)
		}
		f(t, db, s)
	})
}

// Race calls f(0) to f(n-1) at once and returns how many of them reported a
// win, and the errors they returned. A test of a one-winner guarantee (a
// claim, a first mark) asserts on both.
func Race(n int, f func(i int) (won bool, err error)) (wins int, errs []error) {
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for i := range n {
		wg.Go(func() {
			won, err := f(i)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			if won {
				wins++
			}
		})
	}
	wg.Wait()
	return wins, errs
}
