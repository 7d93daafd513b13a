package tracking

import (
	"context"
	"embed"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.mau.fi/util/dbutil"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"
)

//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// upgradeTable holds tracking's numbered migrations. They are versioned in their own
// tracking_version table, so other packages can share the database.
var upgradeTable = dbutil.BuildUpgradeTable().WithFSPath(upgradeFiles, "upgrades").Finish()

// Store is hookroom's durable bookkeeping: the inbound event ledger (Record, RecordBatch,
// MarkHandled, Pending, Prune), the reply deliveries (RecordDelivery, Delivery), the
// member-join markers (MarkJoined, SeedMembers, RoomSeeded) and the rooms joined on
// invites (RememberInvitedRoom, ForgetInvitedRoom, InvitedRooms). It works on SQLite
// and PostgreSQL alike and is safe for concurrent use.
type Store struct {
	db  *dbutil.Database
	now func() time.Time
}

// New returns a Store on db. Call Upgrade before any other method.
func New(db *dbutil.Database) *Store {
	return &Store{db: db.Child("tracking_version", upgradeTable, nil), now: time.Now}
}

// Upgrade creates or migrates tracking's tables. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error {
	if err := s.db.Upgrade(ctx); err != nil {
		return fmt.Errorf("failed to upgrade tracking tables: %w", err)
	}
	return nil
}

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
