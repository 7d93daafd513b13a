package bot

import (
	"context"
	"path/filepath"
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/tracking"
)

// loadConfigWithSecret loads the config.yaml at path with ${HS_SECRET}
// set to secret.
func loadConfigWithSecret(ctx context.Context, path, secret string) (*config.Config, error) {
	return config.Load(ctx, path, withHSSecret(secret))
}

// tempSQLite opens a SQLite database in a new temporary directory and
// closes it when the test ends.
func tempSQLite(tb testing.TB) *dbutil.Database {
	tb.Helper()
	db, err := tracking.OpenSQLite(context.Background(), filepath.Join(tb.TempDir(), "hookroom.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}
