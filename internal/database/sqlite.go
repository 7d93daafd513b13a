package database

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.mau.fi/util/dbutil"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

// sqlitePragmas are applied to every connection OpenSQLite makes: WAL so readers never block
// the writer, a busy timeout so concurrent writers wait instead of failing, foreign keys on,
// and synchronous=NORMAL (durable across a process crash; WAL makes it safe for the file).
var sqlitePragmas = []string{"busy_timeout(10000)", "journal_mode(WAL)", "foreign_keys(1)", "synchronous(NORMAL)"}

// OpenSQLite opens (creating it if needed) the SQLite database file at path with the pure-Go
// modernc.org/sqlite driver, in WAL mode with a busy timeout and foreign keys on. Transactions
// take the write lock when they begin, so two writers never deadlock upgrading a read lock.
func OpenSQLite(ctx context.Context, path string) (*dbutil.Database, error) {
	q := url.Values{}
	for _, p := range sqlitePragmas {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	// SQLite parses the file name as a URI: escape what would end or garble the path.
	escaped := strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
	db, err := dbutil.NewWithDialect("file:"+escaped+"?"+q.Encode(), "sqlite")
	if err != nil {
		return nil, fmt.Errorf("failed to open sqlite database %s: %w", path, err)
	}
	if err := db.RawDB.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("failed to open sqlite database %s: %w", path, err)
	}
	return db, nil
}
