package agents_test

import (
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	_ "modernc.org/sqlite"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
)

const testKey = "sk-test-SECRET-0123456789"

// testModel returns an openai model talking to srv.
func testModel(t testing.TB, srv *llmtest.Server, mod ...func(*agents.ModelSpec)) agents.Model {
	t.Helper()
	spec := agents.ModelSpec{Provider: agents.ProviderOpenAI, BaseURL: srv.URL, APIKey: testKey, Model: "test-model", RequestTimeout: 10 * time.Second}
	for _, f := range mod {
		f(&spec)
	}
	m, err := agents.NewModel(spec)
	if err != nil {
		t.Fatalf("NewModel: %v", err)
	}
	return m
}

// openDB opens (or reopens) the SQLite database at path.
func openDB(t testing.TB, path string) *dbutil.Database {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	db, err := dbutil.NewWithDB(raw, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// newHistory returns an upgraded History on a fresh database, and its path.
func newHistory(t testing.TB) (*agents.History, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookroom.db")
	db := openDB(t, path)
	t.Cleanup(func() { _ = db.Close() })
	h := agents.NewHistory(db)
	if err := h.Upgrade(t.Context()); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	return h, path
}

func zlog(w io.Writer) zerolog.Logger { return zerolog.New(w) }

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
