package usage

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds the package's numbered migrations, versioned in their
// own usage_version table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// Turn is the token usage of one turn of an agent: every model call it
// made, summed.
type Turn struct {
	// SourceEventID is the person's message the turn answered. A turn is
	// recorded at most once per message and agent.
	SourceEventID id.EventID
	Agent         hooks.AgentName
	RoomID        id.RoomID
	// ThreadID is the thread root ("" outside threads).
	ThreadID id.EventID
	// Requester is the person the turn answered (budgets count against them).
	Requester id.UserID
	// Model is the model the provider was asked for (e.g. "gpt-4o-mini").
	Model string
	// InputTokens are the prompt tokens; CachedTokens the part of them the
	// provider served from its prompt cache (0 where it does not say).
	InputTokens, OutputTokens, CachedTokens int
	// TotalTokens is what budgets count: the provider's total, or
	// InputTokens+OutputTokens when it reported none.
	TotalTokens int
	ModelCalls  int
	// At is when the turn ended (zero: now).
	At time.Time
}

// Totals sums the turns a query matched.
type Totals struct {
	Turns                                                int64
	InputTokens, OutputTokens, CachedTokens, TotalTokens int64
}

// AgentTotals are one agent's Totals.
type AgentTotals struct {
	Agent hooks.AgentName
	Totals
}

// Filter selects turns. Zero fields select everything: a zero Filter
// matches every turn ever recorded.
type Filter struct {
	Agent     hooks.AgentName
	RoomID    id.RoomID
	Requester id.UserID
	// Since (inclusive) and Until (exclusive) bound when the turns ended.
	Since, Until time.Time
}

// Store keeps the token usage of every turn. It works on SQLite and
// PostgreSQL alike and is safe for concurrent use.
type Store struct {
	db  *dbutil.Database
	now func() time.Time
}

// New returns a Store on db. Call Upgrade before any other method.
func New(db *dbutil.Database) *Store {
	return &Store{db: database.Tables(db, "usage", upgradeFiles), now: time.Now}
}

// Upgrade creates or migrates the usage table. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }

// Record stores the usage of one turn and adds it to the day's totals of
// its requester and agent, atomically. It joins the transaction ctx
// carries, if any (dbutil.Database.DoTxn on the same database), so a
// caller can record a turn atomically with marking its message handled.
// Recording a turn of the same message and agent again changes nothing.
func (s *Store) Record(ctx context.Context, t Turn) error {
	if t.SourceEventID == "" || t.Agent == "" {
		return fmt.Errorf("failed to record usage: the turn needs a source event and an agent")
	}
	at := t.At
	if at.IsZero() {
		at = s.now()
	}
	total := t.TotalTokens
	if total == 0 {
		total = t.InputTokens + t.OutputTokens
	}
	err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		res, err := s.db.Exec(ctx, `
			INSERT INTO usage_turn (source_event_id, agent, room_id, thread_id, requester, model,
				input_tokens, output_tokens, cached_tokens, total_tokens, model_calls, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (source_event_id, agent) DO NOTHING`,
			string(t.SourceEventID), string(t.Agent), string(t.RoomID), string(t.ThreadID), string(t.Requester), t.Model,
			t.InputTokens, t.OutputTokens, t.CachedTokens, total, t.ModelCalls, at.UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // recorded before: the day's totals have it
		}
		for _, d := range []struct {
			kind Scope
			name string
		}{{ScopePerson, string(t.Requester)}, {ScopeAgent, string(t.Agent)}} {
			_, err := s.db.Exec(ctx, `
				INSERT INTO usage_day (day, kind, name, total_tokens, turns) VALUES ($1, $2, $3, $4, 1)
				ON CONFLICT (day, kind, name) DO UPDATE
				SET total_tokens = usage_day.total_tokens + excluded.total_tokens, turns = usage_day.turns + 1`,
				dayKey(at), string(d.kind), d.name, total)
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to record usage of %s by %s: %w", t.SourceEventID, t.Agent, err)
	}
	return nil
}

// dayKey names t's UTC day in usage_day.
func dayKey(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// dayTotal returns the tokens of one person or agent on t's UTC day.
func (s *Store) dayTotal(ctx context.Context, t time.Time, kind Scope, name string) (int64, error) {
	var total int64
	err := s.db.QueryRow(ctx, `SELECT total_tokens FROM usage_day WHERE day = $1 AND kind = $2 AND name = $3`,
		dayKey(t), string(kind), name).Scan(&total)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("failed to read the day's token usage of %s: %w", name, err)
	}
	return total, nil
}

// where renders f as a WHERE clause with its arguments.
func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, strings.Replace(cond, "?", "$"+strconv.Itoa(len(args)), 1))
	}
	if f.Agent != "" {
		add("agent = ?", string(f.Agent))
	}
	if f.RoomID != "" {
		add("room_id = ?", string(f.RoomID))
	}
	if f.Requester != "" {
		add("requester = ?", string(f.Requester))
	}
	if !f.Since.IsZero() {
		add("created_at >= ?", f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		add("created_at < ?", f.Until.UnixMilli())
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

const sums = `COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
	COALESCE(SUM(cached_tokens), 0), COALESCE(SUM(total_tokens), 0)`

// Sum totals the turns f selects.
func (s *Store) Sum(ctx context.Context, f Filter) (Totals, error) {
	where, args := f.where()
	var t Totals
	err := s.db.QueryRow(ctx, "SELECT "+sums+" FROM usage_turn"+where, args...).
		Scan(&t.Turns, &t.InputTokens, &t.OutputTokens, &t.CachedTokens, &t.TotalTokens)
	if err != nil {
		return Totals{}, fmt.Errorf("failed to sum token usage: %w", err)
	}
	return t, nil
}

// ByAgent totals the turns f selects per agent, sorted by agent name.
// Agents without turns are left out.
func (s *Store) ByAgent(ctx context.Context, f Filter) ([]AgentTotals, error) {
	where, args := f.where()
	rows, err := s.db.Query(ctx, "SELECT agent, "+sums+" FROM usage_turn"+where+" GROUP BY agent ORDER BY agent", args...)
	if err != nil {
		return nil, fmt.Errorf("failed to sum token usage by agent: %w", err)
	}
	defer rows.Close()
	var out []AgentTotals
	for rows.Next() {
		var a AgentTotals
		var agent string
		if err := rows.Scan(&agent, &a.Turns, &a.InputTokens, &a.OutputTokens, &a.CachedTokens, &a.TotalTokens); err != nil {
			return nil, fmt.Errorf("failed to sum token usage by agent: %w", err)
		}
		a.Agent = hooks.AgentName(agent)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to sum token usage by agent: %w", err)
	}
	return out, nil
}

// DayTotal is the tokens one person or agent used on one UTC day.
type DayTotal struct {
	// Day is the day's start (UTC).
	Day   time.Time
	Kind  Scope
	Name  string
	Total int64
	Turns int64
}

// Days returns the day totals of every person and agent from since's UTC
// day on, oldest first. The console's usage page calls it.
func (s *Store) Days(ctx context.Context, since time.Time) ([]DayTotal, error) {
	rows, err := s.db.Query(ctx, `SELECT day, kind, name, total_tokens, turns FROM usage_day WHERE day >= $1 ORDER BY day, kind, name`,
		dayKey(since))
	if err != nil {
		return nil, fmt.Errorf("failed to read the daily token usage: %w", err)
	}
	defer rows.Close()
	var out []DayTotal
	for rows.Next() {
		var d DayTotal
		var day, kind string
		if err := rows.Scan(&day, &kind, &d.Name, &d.Total, &d.Turns); err != nil {
			return nil, fmt.Errorf("failed to read the daily token usage: %w", err)
		}
		if d.Day, err = time.Parse(time.DateOnly, day); err != nil {
			return nil, fmt.Errorf("failed to read the daily token usage: bad day %q: %w", day, err)
		}
		d.Kind = Scope(kind)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to read the daily token usage: %w", err)
	}
	return out, nil
}
