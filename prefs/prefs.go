package prefs

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/database"
)

//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// Name names a setting.
type Name string

// The settings.
const (
	// Model is the model a conversation runs on: the name of a model of
	// config.yaml.
	Model Name = "model"
)

// Level says where a setting applies.
type Level string

// The levels, narrowest first.
const (
	LevelThread Level = "thread"
	LevelRoom   Level = "room"
)

// Setting is one stored setting.
type Setting struct {
	Room   id.RoomID
	Thread id.EventID // "" for the room's
	Name   Name
	Value  string
	SetBy  id.UserID
	SetAt  time.Time
}

// Level is where s applies.
func (s Setting) Level() Level {
	if s.Thread == "" {
		return LevelRoom
	}
	return LevelThread
}

// Store keeps the settings in the database.
type Store struct {
	db *dbutil.Database
}

// New returns the store on db; Upgrade creates its tables.
func New(db *dbutil.Database) *Store {
	return &Store{db: database.Tables(db, "prefs", upgradeFiles)}
}

// Upgrade creates or migrates the store's tables.
func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }

// Set stores value for name in room (thread "" for the room's default) or
// one of its threads, replacing what was set before.
func (s *Store) Set(ctx context.Context, room id.RoomID, thread id.EventID, name Name, value string, by id.UserID) error {
	_, err := s.db.Exec(ctx, `
		INSERT INTO prefs_setting (room_id, thread_id, name, value, set_by, set_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (room_id, thread_id, name) DO UPDATE SET value=excluded.value, set_by=excluded.set_by, set_at=excluded.set_at`,
		room, thread, name, value, by, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("failed to store %s for %s: %w", name, where(room, thread), err)
	}
	return nil
}

// Reset removes name's setting of room (thread "") or of one thread. It
// reports whether there was one.
func (s *Store) Reset(ctx context.Context, room id.RoomID, thread id.EventID, name Name) (bool, error) {
	res, err := s.db.Exec(ctx, `DELETE FROM prefs_setting WHERE room_id=$1 AND thread_id=$2 AND name=$3`, room, thread, name)
	if err != nil {
		return false, fmt.Errorf("failed to reset %s for %s: %w", name, where(room, thread), err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Effective returns the setting of name that applies in thread of room:
// the thread's, else the room's. ok is false when neither is set.
func (s *Store) Effective(ctx context.Context, room id.RoomID, thread id.EventID, name Name) (Setting, bool, error) {
	row := s.db.QueryRow(ctx, `
		SELECT thread_id, value, set_by, set_at FROM prefs_setting
		WHERE room_id=$1 AND name=$2 AND (thread_id=$3 OR thread_id='')
		ORDER BY thread_id DESC LIMIT 1`, room, name, thread)
	st := Setting{Room: room, Name: name}
	var at int64
	err := row.Scan(&st.Thread, &st.Value, &st.SetBy, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Setting{}, false, nil
	} else if err != nil {
		return Setting{}, false, fmt.Errorf("failed to read %s for %s: %w", name, where(room, thread), err)
	}
	st.SetAt = time.UnixMilli(at)
	return st, true, nil
}

func where(room id.RoomID, thread id.EventID) string {
	if thread == "" {
		return "room " + string(room)
	}
	return "thread " + string(thread) + " of " + string(room)
}
