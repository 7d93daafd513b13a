package matrixio

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles are matrixio's own migrations, versioned in the
// matrixio_version table so they never collide with other packages sharing
// the database.
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// Store persists what matrixio must remember across restarts: account
// credentials (so the same device is reused) and the sync position of each
// account. It works on SQLite and PostgreSQL alike.
//
// Store implements mautrix.SyncStore for every account at once: the
// interface is keyed by user id.
type Store struct {
	db *dbutil.Database
	// root is the shared database itself, for mautrix's crypto and room
	// state tables (versioned in their own tables).
	root *dbutil.Database
}

var _ mautrix.SyncStore = (*Store)(nil)

// NewStore returns a Store on db. Call Upgrade before using it.
func NewStore(db *dbutil.Database) *Store {
	return &Store{db: database.Tables(db, "matrixio", upgradeFiles), root: db}
}

// Upgrade creates or migrates matrixio's tables. Call it once at start-up,
// before any other method.
func (s *Store) Upgrade(ctx context.Context) error {
	return database.Upgrade(ctx, s.db)
}

// credentials are the stored login of one account. Never log them.
type credentials struct {
	UserID      id.UserID
	DeviceID    id.DeviceID
	AccessToken string
	Password    string
	// Registered is true for accounts hookroom created itself.
	Registered bool
}

// loadCredentials returns the stored credentials of user, or nil if there
// are none.
func (s *Store) loadCredentials(ctx context.Context, user id.UserID) (*credentials, error) {
	c := credentials{UserID: user}
	err := s.db.QueryRow(ctx,
		`SELECT device_id, access_token, password, registered FROM matrixio_account WHERE user_id=$1`,
		user,
	).Scan(&c.DeviceID, &c.AccessToken, &c.Password, &c.Registered)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("failed to load credentials of %s: %w", user, err)
	}
	return &c, nil
}

// saveCredentials inserts or replaces the credentials of c.UserID.
func (s *Store) saveCredentials(ctx context.Context, c *credentials) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO matrixio_account (user_id, device_id, access_token, password, registered, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (user_id) DO UPDATE SET
			device_id=excluded.device_id, access_token=excluded.access_token,
			password=excluded.password, registered=excluded.registered, updated_at=excluded.updated_at`,
		c.UserID, c.DeviceID, c.AccessToken, c.Password, c.Registered, time.Now().UnixMilli(),
	)
	if err != nil {
		return fmt.Errorf("failed to save credentials of %s: %w", c.UserID, err)
	}
	return nil
}

// SaveFilterID implements mautrix.SyncStore.
func (s *Store) SaveFilterID(ctx context.Context, user id.UserID, filterID string) error {
	return s.saveFilter(ctx, user, filterID, "")
}

// LoadFilterID implements mautrix.SyncStore.
func (s *Store) LoadFilterID(ctx context.Context, user id.UserID) (string, error) {
	filterID, _, err := s.loadFilter(ctx, user)
	return filterID, err
}

// SaveNextBatch implements mautrix.SyncStore. matrixio calls it only after
// the sink accepted the events the token acknowledges.
func (s *Store) SaveNextBatch(ctx context.Context, user id.UserID, nextBatch string) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO matrixio_sync (user_id, next_batch) VALUES ($1, $2)
		ON CONFLICT (user_id) DO UPDATE SET next_batch=excluded.next_batch`,
		user, nextBatch,
	)
	if err != nil {
		return fmt.Errorf("failed to save sync token of %s: %w", user, err)
	}
	return nil
}

// LoadNextBatch implements mautrix.SyncStore. An empty token means the
// account never completed a sync.
func (s *Store) LoadNextBatch(ctx context.Context, user id.UserID) (string, error) {
	var nextBatch string
	err := s.db.QueryRow(ctx, `SELECT next_batch FROM matrixio_sync WHERE user_id=$1`, user).Scan(&nextBatch)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("failed to load sync token of %s: %w", user, err)
	}
	return nextBatch, nil
}

func (s *Store) saveFilter(ctx context.Context, user id.UserID, filterID, filterHash string) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO matrixio_sync (user_id, filter_id, filter_hash) VALUES ($1, $2, $3)
		ON CONFLICT (user_id) DO UPDATE SET filter_id=excluded.filter_id, filter_hash=excluded.filter_hash`,
		user, filterID, filterHash,
	)
	if err != nil {
		return fmt.Errorf("failed to save sync filter of %s: %w", user, err)
	}
	return nil
}

func (s *Store) loadFilter(ctx context.Context, user id.UserID) (filterID, filterHash string, err error) {
	err = s.db.QueryRow(ctx, `SELECT filter_id, filter_hash FROM matrixio_sync WHERE user_id=$1`, user).
		Scan(&filterID, &filterHash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", nil
	} else if err != nil {
		return "", "", fmt.Errorf("failed to load sync filter of %s: %w", user, err)
	}
	return filterID, filterHash, nil
}
