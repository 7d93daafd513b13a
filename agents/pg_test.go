package agents_test

import (
	"path/filepath"
	"testing"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// newHistoryOn returns an upgraded History on a fresh database of dialect d,
// and the key that opens that database again (d.Open).
func newHistoryOn(t testing.TB, d dbtest.Dialect) (*agents.History, string) {
	t.Helper()
	key := filepath.Join(t.TempDir(), "hookroom.db")
	h := agents.NewHistory(d.Open(t, key))
	if err := h.Upgrade(t.Context()); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	return h, key
}
