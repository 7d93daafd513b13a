package bot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/lib/pq" // the PostgreSQL driver, registered as "postgres"
	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/tracking"
)

// OpenDatabase opens the database config.yaml names: SQLite in WAL mode with
// a busy timeout (the default), or PostgreSQL.
func OpenDatabase(ctx context.Context, cfg *config.Config) (*dbutil.Database, error) {
	switch cfg.Database.Type {
	case config.DatabasePostgres:
		db, err := dbutil.NewWithDialect(cfg.Database.URI.Reveal(), "postgres")
		if err != nil {
			return nil, fmt.Errorf("failed to open postgres database: %w", err)
		}
		return db, nil
	default:
		path := strings.TrimPrefix(cfg.Database.URI.Reveal(), "file:")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i] // hookroom sets the connection parameters itself
		}
		if path == "" || path == ":memory:" {
			return nil, cfg.Errorf("database.uri", "SQLite needs a file: an in-memory database would lose every account and event at exit")
		}
		path = cfg.ResolvePath(path)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("failed to create database directory: %w", err)
		}
		// The database holds access tokens and passwords: only the server's
		// user may read it (also a file an earlier version created).
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600); err == nil {
			_ = f.Close()
		}
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("failed to restrict database permissions: %w", err)
		}
		return tracking.OpenSQLite(ctx, path)
	}
}
