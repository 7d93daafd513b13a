package agents_test

import (
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// forDialects runs f as a subtest per database hookroom supports ("sqlite", "postgres").
func forDialects(t *testing.T, f func(t *testing.T, dialect string)) {
	for _, d := range []string{"sqlite", "postgres"} {
		t.Run(d, func(t *testing.T) { f(t, d) })
	}
}

// openDBOn opens the database key names: a SQLite file, or a PostgreSQL URL.
func openDBOn(t testing.TB, dialect, key string) *dbutil.Database {
	t.Helper()
	if dialect == "sqlite" {
		return openDB(t, key)
	}
	db, err := dbutil.NewWithDialect(key, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// newHistoryOn returns an upgraded History on a fresh database of the dialect, and its key
// for openDBOn.
func newHistoryOn(t testing.TB, dialect string) (*agents.History, string) {
	t.Helper()
	if dialect == "sqlite" {
		return newHistory(t)
	}
	key := pgtest.URL(t)
	db := openDBOn(t, dialect, key)
	t.Cleanup(func() { _ = db.Close() })
	h := agents.NewHistory(db)
	if err := h.Upgrade(t.Context()); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	return h, key
}
