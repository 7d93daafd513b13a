package approval

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds the package's numbered migrations, versioned in their
// own approval_version table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// Status is where an approval stands.
type Status string

// The statuses. Every status but Pending is final.
const (
	Pending   Status = "pending"
	Approved  Status = "approved"
	Denied    Status = "denied"
	Expired   Status = "expired"   // nobody answered before the deadline: denied
	Cancelled Status = "cancelled" // the turn ended without the call
)

// Approval is one tool call waiting for, or decided by, a person.
type Approval struct {
	ID            string
	SourceEventID id.EventID // the message whose turn made the call
	RoomID        id.RoomID
	ThreadID      id.EventID
	Agent         hooks.AgentName
	Requester     id.UserID
	Tool          string
	Arguments     json.RawMessage
	CallID        string // the model's id of the call
	Reason        string // why it needs approval
	CardEventID   id.EventID
	Status        Status
	DecidedBy     id.UserID
	// DecisionReason is what the person (or hook) said with the decision.
	DecisionReason string
	CreatedAt      time.Time
	ExpiresAt      time.Time
	DecidedAt      time.Time
}

// Store keeps approvals in the database. It works on SQLite and PostgreSQL
// alike and is safe for concurrent use.
type Store struct {
	db  *dbutil.Database
	now func() time.Time
}

// New returns a Store on db. Call Upgrade before any other method.
func New(db *dbutil.Database) *Store {
	return &Store{db: database.Tables(db, "approval", upgradeFiles), now: time.Now}
}

// Upgrade creates or migrates the approval table. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }

// ErrNotFound is returned for an approval that does not exist.
var ErrNotFound = errors.New("approval not found")

// Create stores a as pending and returns it with its ID and CreatedAt set
// (ExpiresAt must be set).
func (s *Store) Create(ctx context.Context, a Approval) (Approval, error) {
	if a.ID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		a.ID = hex.EncodeToString(b[:])
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = s.now()
	}
	if len(a.Arguments) == 0 {
		a.Arguments = json.RawMessage("{}")
	}
	a.Status = Pending
	_, err := s.db.Exec(ctx, `
		INSERT INTO approval (id, source_event_id, room_id, thread_id, agent, requester, tool, arguments, call_id,
			reason, card_event_id, status, decided_by, decision_reason, created_at, expires_at, decided_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, '', '', $13, $14, 0)`,
		a.ID, string(a.SourceEventID), string(a.RoomID), string(a.ThreadID), string(a.Agent), string(a.Requester),
		a.Tool, string(a.Arguments), a.CallID, a.Reason, string(a.CardEventID), string(a.Status),
		a.CreatedAt.UnixMilli(), a.ExpiresAt.UnixMilli())
	if err != nil {
		return a, fmt.Errorf("failed to store the approval of %s: %w", a.Tool, err)
	}
	return a, nil
}

// SetCard records the approval card of approval id.
func (s *Store) SetCard(ctx context.Context, approvalID string, card id.EventID) error {
	if _, err := s.db.Exec(ctx, `UPDATE approval SET card_event_id=$2 WHERE id=$1`, approvalID, string(card)); err != nil {
		return fmt.Errorf("failed to record the approval card: %w", err)
	}
	return nil
}

// Decide ends a pending approval with status (Approved, Denied, Expired or
// Cancelled). It reports false, changing nothing, when the approval was
// decided already: the first decision wins.
func (s *Store) Decide(ctx context.Context, approvalID string, status Status, by id.UserID, reason string) (bool, error) {
	if status == Pending {
		return false, fmt.Errorf("failed to decide approval %s: pending is no decision", approvalID)
	}
	res, err := s.db.Exec(ctx, `
		UPDATE approval SET status=$2, decided_by=$3, decision_reason=$4, decided_at=$5
		WHERE id=$1 AND status='pending'`,
		approvalID, string(status), string(by), reason, s.now().UnixMilli())
	if err != nil {
		return false, fmt.Errorf("failed to decide approval %s: %w", approvalID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("failed to decide approval %s: %w", approvalID, err)
	}
	return n > 0, nil
}

const selectApproval = `SELECT id, source_event_id, room_id, thread_id, agent, requester, tool, arguments, call_id,
	reason, card_event_id, status, decided_by, decision_reason, created_at, expires_at, decided_at FROM approval `

// Get returns one approval, or ErrNotFound.
func (s *Store) Get(ctx context.Context, approvalID string) (Approval, error) {
	list, err := s.query(ctx, selectApproval+`WHERE id=$1`, approvalID)
	if err != nil {
		return Approval{}, err
	}
	if len(list) == 0 {
		return Approval{}, ErrNotFound
	}
	return list[0], nil
}

// ByCard returns the approval whose card is event, or ErrNotFound.
func (s *Store) ByCard(ctx context.Context, card id.EventID) (Approval, error) {
	if card == "" {
		return Approval{}, ErrNotFound
	}
	list, err := s.query(ctx, selectApproval+`WHERE card_event_id=$1`, string(card))
	if err != nil {
		return Approval{}, err
	}
	if len(list) == 0 {
		return Approval{}, ErrNotFound
	}
	return list[0], nil
}

// ForTurn returns the approvals of the turn answering source, oldest
// first.
func (s *Store) ForTurn(ctx context.Context, source id.EventID) ([]Approval, error) {
	return s.query(ctx, selectApproval+`WHERE source_event_id=$1 ORDER BY created_at, id`, string(source))
}

// Pending returns every pending approval, the earliest deadline first (the
// console's approvals page).
func (s *Store) Pending(ctx context.Context) ([]Approval, error) {
	return s.query(ctx, selectApproval+`WHERE status='pending' ORDER BY expires_at, id`)
}

// PendingInThread returns the pending approvals of a thread, oldest first.
func (s *Store) PendingInThread(ctx context.Context, room id.RoomID, thread id.EventID) ([]Approval, error) {
	return s.query(ctx, selectApproval+`WHERE room_id=$1 AND thread_id=$2 AND status='pending' ORDER BY created_at, id`,
		string(room), string(thread))
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]Approval, error) {
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("failed to read approvals: %w", err)
	}
	list, err := dbutil.NewRowIterWithError(rows, scanApproval, err).AsList()
	if err != nil {
		return nil, fmt.Errorf("failed to read approvals: %w", err)
	}
	return list, nil
}

func scanApproval(row dbutil.Scannable) (Approval, error) {
	var a Approval
	var source, room, thread, agent, requester, args, card, status, by string
	var created, expires, decided int64
	err := row.Scan(&a.ID, &source, &room, &thread, &agent, &requester, &a.Tool, &args, &a.CallID,
		&a.Reason, &card, &status, &by, &a.DecisionReason, &created, &expires, &decided)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNotFound
	}
	if err != nil {
		return a, err
	}
	a.SourceEventID, a.RoomID, a.ThreadID = id.EventID(source), id.RoomID(room), id.EventID(thread)
	a.Agent, a.Requester, a.Arguments = hooks.AgentName(agent), id.UserID(requester), json.RawMessage(args)
	a.CardEventID, a.Status, a.DecidedBy = id.EventID(card), Status(status), id.UserID(by)
	a.CreatedAt, a.ExpiresAt = time.UnixMilli(created), time.UnixMilli(expires)
	if decided != 0 {
		a.DecidedAt = time.UnixMilli(decided)
	}
	return a, nil
}

// CanonicalArguments writes a tool call's JSON arguments in one canonical
// form (keys sorted, no insignificant space), so that two calls with the
// same arguments compare equal; raw as it is when it is not JSON.
func CanonicalArguments(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
