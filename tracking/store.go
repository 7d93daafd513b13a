package tracking

import (
	"context"
	"embed"
	"time"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds tracking's numbered migrations, versioned in their own tracking_version
// table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

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
	return &Store{db: database.Tables(db, "tracking", upgradeFiles), now: time.Now}
}

// Upgrade creates or migrates tracking's tables. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }

// OpenSQLite opens (creating it if needed) the SQLite database file at path, in WAL mode with
// a busy timeout and foreign keys on: it is database.OpenSQLite, kept here for the callers
// that open hookroom's database (bot) or the store's alone.
func OpenSQLite(ctx context.Context, path string) (*dbutil.Database, error) {
	return database.OpenSQLite(ctx, path)
}
