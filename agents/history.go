package agents

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles are the agents package's own migrations, versioned in the
// agents_version table so other packages can share the database.
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// ScopeKey names one conversation: its room and thread. Its history is
// stored under it, its turns run one at a time, and hooks see it as
// session_id. Make one only with NewScopeKey.
type ScopeKey string

// NewScopeKey is the key of a conversation: the room id, "/", and the
// thread root's event id ("" for the room's main timeline).
func NewScopeKey(room id.RoomID, threadRoot id.EventID) ScopeKey {
	return ScopeKey(string(room) + "/" + string(threadRoot))
}

// Session describes the stored history of one scope.
type Session struct {
	ScopeKey ScopeKey
	// ID is made when the scope's first messages are stored and stays until
	// the scope is deleted (compaction keeps it).
	ID string
	// Agent is the agent whose turn created the session.
	Agent       hooks.AgentName
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Compactions int
}

// History stores conversations in the database, one ordered list of
// messages per scope (see ScopeKey), on SQLite and PostgreSQL alike. The
// messages come back byte-exact, so a replayed conversation sends the model
// the same request. It is safe for concurrent use.
type History struct {
	db *dbutil.Database
	// mu serialises writes on SQLite, which has one writer at a time; on
	// PostgreSQL the session row lock does it.
	mu  sync.Mutex
	now func() time.Time
}

// NewHistory returns a History on db. Call Upgrade before using it.
func NewHistory(db *dbutil.Database) *History {
	return &History{db: database.Tables(db, "agents", upgradeFiles), now: time.Now}
}

// Upgrade creates or migrates the history tables. Call it once at
// start-up, before any other method.
func (h *History) Upgrade(ctx context.Context) error {
	return database.Upgrade(ctx, h.db)
}

func (h *History) lockWrites() func() {
	if h.db.Dialect == dbutil.SQLite {
		h.mu.Lock()
		return h.mu.Unlock
	}
	return func() {}
}

// Append stores msgs at the end of scope's history, all or nothing (one
// transaction). The first Append of a scope creates its session, with
// agent as its creator, and reports newSession = true; it is true for
// exactly one Append per session, even when several race. The caller emits
// session:started then (look the session id up with Session). Appending no
// messages does nothing.
func (h *History) Append(ctx context.Context, scope ScopeKey, agent hooks.AgentName, msgs ...Message) (newSession bool, err error) {
	return h.AppendWith(ctx, scope, agent, nil, msgs...)
}

// AppendWith is Append that also runs also (when not nil) inside the same
// transaction, after the messages are stored: the caller's own bookkeeping
// (e.g. marking the inbound event handled) commits or rolls back with the
// turn. also must use the ctx it is given.
func (h *History) AppendWith(ctx context.Context, scope ScopeKey, agent hooks.AgentName, also func(ctx context.Context) error, msgs ...Message) (newSession bool, err error) {
	return h.AppendTurn(ctx, scope, agent, "", also, msgs...)
}

// AppendTurn is AppendWith for the messages of the turn that answered
// source (a Matrix event id; "" for none): they are stored with it, so
// that Forget(source) removes them again, also after compaction kept them.
// The bot calls it when a turn ends with a delivered reply.
func (h *History) AppendTurn(ctx context.Context, scope ScopeKey, agent hooks.AgentName, source id.EventID, also func(ctx context.Context) error, msgs ...Message) (newSession bool, err error) {
	if len(msgs) == 0 && also == nil {
		return false, nil
	}
	rows := make([]storedRow, len(msgs))
	for i := range msgs {
		if rows[i], err = encodeMessage(&msgs[i]); err != nil {
			return false, fmt.Errorf("failed to append to history of %s: %w", scope, err)
		}
		rows[i].source = string(source)
	}
	defer h.lockWrites()()
	now := h.now().UnixMilli()
	err = h.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		// The first statement writes, so SQLite takes its write lock at the
		// start of the transaction.
		res, err := h.db.Exec(ctx, `
			INSERT INTO agents_session (scope_key, session_id, agent, created_at, updated_at, next_seq, compactions)
			VALUES ($1, $2, $3, $4, $4, 1, 0)
			ON CONFLICT (scope_key) DO NOTHING`,
			scope, rand.Text(), string(agent), now)
		if err != nil {
			return fmt.Errorf("failed to create session: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("failed to create session: %w", err)
		} else {
			newSession = n == 1
		}
		var next int64
		err = h.db.QueryRow(ctx, `
			UPDATE agents_session SET next_seq = next_seq + $2, updated_at = $3
			WHERE scope_key = $1 RETURNING next_seq`,
			scope, len(rows), now).Scan(&next)
		if err != nil {
			return fmt.Errorf("failed to allocate message numbers: %w", err)
		}
		if err := h.insertRows(ctx, scope, next-int64(len(rows)), rows); err != nil {
			return err
		}
		if also != nil {
			return also(ctx)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("failed to append to history of %s: %w", scope, err)
	}
	return newSession, nil
}

func (h *History) insertRows(ctx context.Context, scope ScopeKey, firstSeq int64, rows []storedRow) error {
	for i, r := range rows {
		_, err := h.db.Exec(ctx, `
			INSERT INTO agents_message (scope_key, seq, role, content, name, tool_call_id, tool_calls, source_event_id)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			scope, firstSeq+int64(i), r.role, r.content, r.name, r.toolCallID, r.toolCalls, r.source)
		if err != nil {
			return fmt.Errorf("failed to store message %d: %w", i+1, err)
		}
	}
	return nil
}

// Load returns scope's history in order; an unknown scope has none.
func (h *History) Load(ctx context.Context, scope ScopeKey) ([]Message, error) {
	stored, err := h.load(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("failed to load history of %s: %w", scope, err)
	}
	msgs := make([]Message, len(stored))
	for i := range stored {
		msgs[i] = stored[i].msg
	}
	return msgs, nil
}

// storedMessage is a message as load returns it: with its number and the
// event whose turn stored it.
type storedMessage struct {
	msg    Message
	seq    int64
	source string
}

func (h *History) load(ctx context.Context, scope ScopeKey) ([]storedMessage, error) {
	rows, err := h.db.Query(ctx, `
		SELECT seq, role, content, name, tool_call_id, tool_calls, source_event_id
		FROM agents_message WHERE scope_key = $1 ORDER BY seq`, scope)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []storedMessage
	for rows.Next() {
		var (
			seq int64
			r   storedRow
		)
		if err := rows.Scan(&seq, &r.role, &r.content, &r.name, &r.toolCallID, &r.toolCalls, &r.source); err != nil {
			return nil, err
		}
		m, err := r.decode()
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", seq, err)
		}
		out = append(out, storedMessage{msg: m, seq: seq, source: r.source})
	}
	return out, rows.Err()
}

// Forget removes every message stored for source (AppendTurn) from every
// scope and reports how many it removed: the person's turn, the tool calls
// and results and the answer, as the model would otherwise see them again.
// Sessions stay, even when empty. A summary that compaction already wrote
// is not touched (it has no source). The bot calls it when the source
// event is redacted, after the source's turn ended.
func (h *History) Forget(ctx context.Context, source id.EventID) (int64, error) {
	if source == "" {
		return 0, nil
	}
	defer h.lockWrites()()
	res, err := h.db.Exec(ctx, `DELETE FROM agents_message WHERE source_event_id = $1`, string(source))
	if err != nil {
		return 0, fmt.Errorf("failed to forget the turn of %s: %w", source, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("failed to forget the turn of %s: %w", source, err)
	}
	return n, nil
}

// Session returns the session of scope, or ErrNoSession.
func (h *History) Session(ctx context.Context, scope ScopeKey) (*Session, error) {
	s := Session{ScopeKey: scope}
	var (
		agent            string
		created, updated int64
	)
	err := h.db.QueryRow(ctx, `
		SELECT session_id, agent, created_at, updated_at, compactions
		FROM agents_session WHERE scope_key = $1`, scope).
		Scan(&s.ID, &agent, &created, &updated, &s.Compactions)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("failed to get session of %s: %w", scope, ErrNoSession)
	} else if err != nil {
		return nil, fmt.Errorf("failed to get session of %s: %w", scope, err)
	}
	s.Agent = hooks.AgentName(agent)
	s.CreatedAt, s.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return &s, nil
}

// Delete removes scope's history and session; the next Append starts a new
// session. Deleting an unknown scope does nothing.
func (h *History) Delete(ctx context.Context, scope ScopeKey) error {
	defer h.lockWrites()()
	err := h.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		if _, err := h.db.Exec(ctx, `DELETE FROM agents_message WHERE scope_key = $1`, scope); err != nil {
			return err
		}
		_, err := h.db.Exec(ctx, `DELETE FROM agents_session WHERE scope_key = $1`, scope)
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to delete history of %s: %w", scope, err)
	}
	return nil
}

// storedRow is a message as stored: content as bytes (exact on both
// databases), tool calls as JSON ("" for none), the source event id ("" for
// none).
type storedRow struct {
	role       string
	content    []byte
	name       string
	toolCallID string
	toolCalls  string
	source     string
}

func encodeMessage(m *Message) (storedRow, error) {
	switch m.Role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool:
	default:
		return storedRow{}, fmt.Errorf("invalid message role %q", m.Role)
	}
	r := storedRow{role: string(m.Role), content: []byte(m.Content), name: m.Name, toolCallID: m.ToolCallID}
	if len(m.ToolCalls) > 0 {
		raw, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return storedRow{}, fmt.Errorf("failed to encode tool calls: %w", err)
		}
		r.toolCalls = string(raw)
	}
	return r, nil
}

func (r *storedRow) decode() (Message, error) {
	m := Message{Role: Role(r.role), Content: string(r.content), Name: r.name, ToolCallID: r.toolCallID}
	if r.toolCalls != "" {
		if err := json.Unmarshal([]byte(r.toolCalls), &m.ToolCalls); err != nil {
			return Message{}, fmt.Errorf("failed to decode tool calls: %w", err)
		}
	}
	return m, nil
}
