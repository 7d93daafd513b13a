package bot

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/lib/pq" // the PostgreSQL driver, registered as "postgres"
	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/tracking"
)

// ErrDatabaseInUse is returned by OpenDatabase (and New) when another hookroom process holds
// the database: two processes would answer every message twice.
var ErrDatabaseInUse = errors.New("another hookroom is using it (stop it first: one database serves one hookroom process)")

// Database is hookroom's open database with the lock that makes this process its only user.
// Close releases both.
type Database struct {
	*dbutil.Database
	unlock func()
	once   sync.Once
	// lock is the PostgreSQL lock (nil for SQLite and inspection); a
	// standby opens the database before it holds it (standby.go).
	lock    *pgLock
	standby standbyState
}

// Close releases the lock and closes the database. It may be called more than once.
func (d *Database) Close() error {
	var err error
	d.once.Do(func() {
		if d.unlock != nil {
			d.unlock()
		}
		err = d.Database.Close()
	})
	return err
}

// lockKey is the PostgreSQL advisory lock hookroom holds on its database (the bytes of
// "hookroom" as a big-endian int64). Advisory locks are per database: hookrooms on two
// databases of one server do not conflict.
const lockKey int64 = 0x686f6f6b726f6f6d

// OpenDatabase opens the database config.yaml names: SQLite in WAL mode with
// a busy timeout (the default), or PostgreSQL. It takes a lock held until Close — for
// SQLite an exclusive flock on "<file>.lock", for PostgreSQL pg_try_advisory_lock on a
// connection of its own — and fails with ErrDatabaseInUse when another process holds it,
// unless database.standby is set: then it returns the database before it holds the lock,
// as a standby that Bot.Run makes wait for it (standby.go).
func OpenDatabase(ctx context.Context, cfg *config.Config) (*Database, error) {
	return openDatabase(ctx, cfg, true)
}

// openDatabase is OpenDatabase; without exclusive it takes no lock, for
// commands that only inspect the configuration next to a running server
// (hookroom check, hookroom hooks).
func openDatabase(ctx context.Context, cfg *config.Config, exclusive bool) (*Database, error) {
	switch cfg.Database.Type {
	case config.DatabasePostgres:
		uri := cfg.Database.URI.Reveal()
		db, err := dbutil.NewWithDialect(uri, "postgres")
		if err != nil {
			return nil, fmt.Errorf("failed to open postgres database %s: %w", redactURI(uri), err)
		}
		if !exclusive {
			return &Database{Database: db}, nil
		}
		lock := &pgLock{db: db.RawDB}
		d := &Database{Database: db, lock: lock, unlock: lock.release}
		if cfg.Database.Standby {
			held, err := lock.try(ctx)
			if err != nil {
				_ = db.Close()
				return nil, fmt.Errorf("failed to open postgres database %s: %w", redactURI(uri), err)
			}
			if !held { // another hookroom is active: wait as its standby
				d.standby.opened = true
				d.gateUpgrades(ctx)
			}
			return d, nil
		}
		if err := lockPostgres(ctx, lock); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("failed to open postgres database %s: %w", redactURI(uri), err)
		}
		return d, nil
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
		unlock := func() {}
		if exclusive {
			var err error
			if unlock, err = lockFile(path + ".lock"); err != nil {
				return nil, fmt.Errorf("failed to open sqlite database %s: %w", path, err)
			}
		}
		// The database holds access tokens and passwords: only the server's
		// user may read it (also a file an earlier version created).
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600); err == nil {
			_ = f.Close()
		}
		if err := os.Chmod(path, 0o600); err != nil {
			unlock()
			return nil, fmt.Errorf("failed to restrict database permissions: %w", err)
		}
		db, err := tracking.OpenSQLite(ctx, path)
		if err != nil {
			unlock()
			return nil, err
		}
		return &Database{Database: db, unlock: unlock}, nil
	}
}

// lockFile takes an exclusive flock on path (created if needed), held until unlock.
// The kernel drops it when the process dies, so a crash leaves no stale lock.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to create lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrDatabaseInUse
		}
		return nil, fmt.Errorf("failed to lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// postgresLockWait is how long lockPostgres waits for a lock another session holds: the
// session of a hookroom that was just killed ends a moment after the process (the server
// notices the closed connection), and a restart right after a crash must not fail on it.
var postgresLockWait = 10 * time.Second

// lockPostgres takes hookroom's advisory lock with lock, waiting up to
// postgresLockWait for a session that holds it to end. The server drops the
// lock when lock's connection ends, so a crash leaves no stale lock.
func lockPostgres(ctx context.Context, lock *pgLock) error {
	deadline := time.Now().Add(postgresLockWait)
	for waited := false; ; waited = true {
		ok, err := lock.try(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			lock.release()
			return ErrDatabaseInUse
		}
		if !waited {
			zerolog.Ctx(ctx).Info().Dur("up_to", postgresLockWait).
				Msg("another session holds hookroom's database lock; waiting in case it is a stopped hookroom's")
		}
		select {
		case <-ctx.Done():
			lock.release()
			return fmt.Errorf("failed to take the single-process lock: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var dsnPassword = regexp.MustCompile(`(?i)password\s*=\s*('(\\.|[^'])*'|\S+)`)

// redactURI returns a PostgreSQL connection string fit for an error or a log: without its
// password or query parameters.
func redactURI(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.Scheme != "" {
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		u.RawQuery, u.Fragment = "", ""
		return u.String()
	}
	return dsnPassword.ReplaceAllString(uri, "password=REDACTED")
}
