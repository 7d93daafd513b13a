package policy

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds the package's numbered migrations, versioned in their
// own policy_version table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// Store keeps pairings and pairing codes in the database (SQLite or
// PostgreSQL), and the pairings also in memory, so that IsPaired, asked by
// Decide, reads no database. It must be the only writer of its tables
// (one active hookroom process; a standby that takes over calls Upgrade,
// which loads them). Safe for concurrent use.
type Store struct {
	db *dbutil.Database

	mu     sync.RWMutex
	paired map[pairKey]struct{}
}

type pairKey struct {
	agent  hooks.AgentName
	person id.UserID
}

// NewStore returns a Store on db. Call Upgrade before any other method.
func NewStore(db *dbutil.Database) *Store {
	return &Store{db: database.Tables(db, "policy", upgradeFiles), paired: map[pairKey]struct{}{}}
}

// Upgrade creates or migrates the policy tables and loads the pairings
// into memory. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error {
	if err := database.Upgrade(ctx, s.db); err != nil {
		return err
	}
	list, err := s.Pairings(ctx, "")
	if err != nil {
		return err
	}
	paired := make(map[pairKey]struct{}, len(list))
	for _, p := range list {
		paired[pairKey{p.Agent, p.Person}] = struct{}{}
	}
	s.mu.Lock()
	s.paired = paired
	s.mu.Unlock()
	return nil
}

// IsPaired reports whether person is paired with agent, from memory.
func (s *Store) IsPaired(agent hooks.AgentName, person id.UserID) bool {
	if s == nil {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.paired[pairKey{agent, person}]
	return ok
}

// Code is a pairing code given to a person for an agent.
type Code struct {
	Code   string
	Agent  hooks.AgentName
	Person id.UserID
	// Room is where the code was given (the DM), to tell the person once
	// an administrator confirmed it.
	Room      id.RoomID
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Pairing is a person an administrator paired with an agent.
type Pairing struct {
	Agent    hooks.AgentName
	Person   id.UserID
	PairedBy id.UserID
	Code     string
	PairedAt time.Time
	// Room is the DM where the code was given (known only in Confirm's
	// answer, not in lists).
	Room id.RoomID
}

// Errors of Issue and Confirm.
var (
	// ErrUnknownCode: no live code reads so (never given, confirmed
	// already, or expired long ago).
	ErrUnknownCode = errors.New("unknown pairing code")
	// ErrCodeExpired: the code was given but is no longer valid; the
	// person must ask for a new one (by writing to the agent again).
	ErrCodeExpired = errors.New("the pairing code has expired")
	// ErrTooManyCodes: pairing.max_pending_codes codes wait for an
	// administrator already.
	ErrTooManyCodes = errors.New("too many pairing codes are waiting for an administrator")
)

// codeAlphabet has 32 characters that cannot be mistaken for each other
// when read aloud or typed: no 0/O, no 1/I.
const codeAlphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"

// CodeLength is the length of a pairing code (40 bits).
const CodeLength = 8

func newCode() string {
	var b [CodeLength]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	for i := range b {
		b[i] = codeAlphabet[b[i]&31]
	}
	return string(b[:])
}

// NormalizeCode returns a code as a person may have typed it (lower case,
// with spaces or dashes) in its canonical form, and whether it can be a
// code at all.
func NormalizeCode(s string) (string, bool) {
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '\t':
			return -1
		}
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, s)
	if len(s) != CodeLength {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune(codeAlphabet, rune(s[i])) {
			return "", false
		}
	}
	return s, true
}

// CodeRequest is who asks for a pairing code, and where.
type CodeRequest struct {
	Agent  hooks.AgentName
	Person id.UserID // the Decision's Person
	Room   id.RoomID
}

// Issue returns the pairing code of r's person and agent at now: the live
// one when there is one (fresh false: the person was told it already),
// otherwise a new one valid for o.CodeTTL (fresh true). Codes that expired
// are deleted on the way. Past o.MaxPendingCodes live codes it fails with
// ErrTooManyCodes. o's zero fields take their defaults.
func (s *Store) Issue(ctx context.Context, now time.Time, r CodeRequest, o PairingOptions) (code Code, fresh bool, err error) {
	o = o.WithDefaults()
	if r.Agent == "" || r.Person == "" {
		return Code{}, false, fmt.Errorf("failed to issue a pairing code: agent and person are required")
	}
	err = s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		if _, err := s.db.Exec(ctx, `DELETE FROM policy_pairing_code WHERE expires_at <= $1`, now.UnixMilli()); err != nil {
			return err
		}
		var err error
		code, err = s.liveCode(ctx, r.Agent, r.Person)
		if err == nil || !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		var pending int
		if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM policy_pairing_code`).Scan(&pending); err != nil {
			return err
		}
		if pending >= o.MaxPendingCodes {
			return ErrTooManyCodes
		}
		code = Code{Agent: r.Agent, Person: r.Person, Room: r.Room, CreatedAt: now, ExpiresAt: now.Add(o.CodeTTL)}
		for range 5 { // a collision of 40 random bits: try another
			code.Code = newCode()
			res, err := s.db.Exec(ctx, `
				INSERT INTO policy_pairing_code (code, agent, person, room_id, created_at, expires_at)
				VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
				code.Code, string(code.Agent), string(code.Person), string(code.Room),
				code.CreatedAt.UnixMilli(), code.ExpiresAt.UnixMilli())
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				fresh = true
				return err
			}
			// The code was taken, or a concurrent Issue gave this person
			// one: that one is the answer.
			if live, err := s.liveCode(ctx, r.Agent, r.Person); err == nil {
				code = live
				return nil
			} else if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		return errors.New("no free code after 5 tries")
	})
	if err != nil {
		if errors.Is(err, ErrTooManyCodes) {
			return Code{}, false, err
		}
		return Code{}, false, fmt.Errorf("failed to issue a pairing code for %s: %w", r.Agent, err)
	}
	return code, fresh, nil
}

func (s *Store) liveCode(ctx context.Context, agent hooks.AgentName, person id.UserID) (Code, error) {
	return scanCode(s.db.QueryRow(ctx, `
		SELECT code, agent, person, room_id, created_at, expires_at FROM policy_pairing_code
		WHERE agent=$1 AND person=$2`, string(agent), string(person)))
}

func scanCode(row dbutil.Scannable) (Code, error) {
	var c Code
	var agent, person, room string
	var created, expires int64
	if err := row.Scan(&c.Code, &agent, &person, &room, &created, &expires); err != nil {
		return Code{}, err
	}
	c.Agent, c.Person, c.Room = hooks.AgentName(agent), id.UserID(person), id.RoomID(room)
	c.CreatedAt, c.ExpiresAt = time.UnixMilli(created), time.UnixMilli(expires)
	return c, nil
}

// Confirm uses code at now: an administrator (by) confirmed it with !pair
// CODE, so its person is paired with its agent, in the database and in
// memory. A code works once: of two concurrent Confirms, one fails with
// ErrUnknownCode. An expired code fails with ErrCodeExpired (and is gone).
// The caller checks that by is an administrator (Policy.IsGlobal). code
// may be typed loosely (NormalizeCode).
func (s *Store) Confirm(ctx context.Context, now time.Time, code string, by id.UserID) (Pairing, error) {
	norm, ok := NormalizeCode(code)
	if !ok {
		return Pairing{}, ErrUnknownCode
	}
	var p Pairing
	err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		c, err := scanCode(s.db.QueryRow(ctx, `
			DELETE FROM policy_pairing_code WHERE code=$1
			RETURNING code, agent, person, room_id, created_at, expires_at`, norm))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrUnknownCode
		} else if err != nil {
			return err
		}
		if !now.Before(c.ExpiresAt) {
			return ErrCodeExpired
		}
		p = Pairing{Agent: c.Agent, Person: c.Person, PairedBy: by, Code: c.Code, PairedAt: now, Room: c.Room}
		_, err = s.db.Exec(ctx, `
			INSERT INTO policy_pairing (agent, person, paired_by, code, paired_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (agent, person) DO UPDATE SET paired_by=excluded.paired_by, code=excluded.code, paired_at=excluded.paired_at`,
			string(p.Agent), string(p.Person), string(p.PairedBy), p.Code, p.PairedAt.UnixMilli())
		return err
	})
	switch {
	case errors.Is(err, ErrCodeExpired):
		// The expired code is deleted all the same: a second try says
		// unknown, as for any dead code.
		_, _ = s.db.Exec(ctx, `DELETE FROM policy_pairing_code WHERE code=$1`, norm)
		return Pairing{}, err
	case errors.Is(err, ErrUnknownCode):
		return Pairing{}, err
	case err != nil:
		return Pairing{}, fmt.Errorf("failed to confirm a pairing code: %w", err)
	}
	s.mu.Lock()
	s.paired[pairKey{p.Agent, p.Person}] = struct{}{}
	s.mu.Unlock()
	return p, nil
}

// Unpair revokes the pairing of person with agent and their live code, and
// reports whether they were paired.
func (s *Store) Unpair(ctx context.Context, agent hooks.AgentName, person id.UserID) (bool, error) {
	var n int64
	err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		res, err := s.db.Exec(ctx, `DELETE FROM policy_pairing WHERE agent=$1 AND person=$2`, string(agent), string(person))
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = s.db.Exec(ctx, `DELETE FROM policy_pairing_code WHERE agent=$1 AND person=$2`, string(agent), string(person))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("failed to unpair %s from %s: %w", person, agent, err)
	}
	s.mu.Lock()
	delete(s.paired, pairKey{agent, person})
	s.mu.Unlock()
	return n > 0, nil
}

// Pairings lists the pairings of agent ("": of every agent), by agent and
// then person, for an administrator.
func (s *Store) Pairings(ctx context.Context, agent hooks.AgentName) ([]Pairing, error) {
	q := `SELECT agent, person, paired_by, code, paired_at FROM policy_pairing `
	args := []any{}
	if agent != "" {
		q += `WHERE agent=$1 `
		args = append(args, string(agent))
	}
	rows, err := s.db.Query(ctx, q+`ORDER BY agent, person`, args...)
	list, err := dbutil.NewRowIterWithError(rows, func(row dbutil.Scannable) (Pairing, error) {
		var p Pairing
		var agent, person, by string
		var at int64
		err := row.Scan(&agent, &person, &by, &p.Code, &at)
		p.Agent, p.Person, p.PairedBy, p.PairedAt = hooks.AgentName(agent), id.UserID(person), id.UserID(by), time.UnixMilli(at)
		return p, err
	}, err).AsList()
	if err != nil {
		return nil, fmt.Errorf("failed to list pairings: %w", err)
	}
	return list, nil
}

// PendingCodes lists the codes still valid at now, the oldest first, for
// an administrator.
func (s *Store) PendingCodes(ctx context.Context, now time.Time) ([]Code, error) {
	rows, err := s.db.Query(ctx, `
		SELECT code, agent, person, room_id, created_at, expires_at FROM policy_pairing_code
		WHERE expires_at > $1 ORDER BY created_at, code`, now.UnixMilli())
	list, err := dbutil.NewRowIterWithError(rows, scanCode, err).AsList()
	if err != nil {
		return nil, fmt.Errorf("failed to list pairing codes: %w", err)
	}
	return list, nil
}
