package trace

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds the package's numbered migrations, versioned in their
// own trace_version table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// ErrNotFound is returned by Get for a trace that does not exist (never
// saved, or pruned).
var ErrNotFound = errors.New("trace not found")

// Limits of Filter.Limit.
const (
	DefaultListLimit = 50
	MaxListLimit     = 500
)

// pruneBatch is the most rows one statement of Prune deletes, so that a big
// prune never holds SQLite's write lock for long.
const pruneBatch = 1000

// Summary is one trace as the console's lists show it: the trace without
// its stages, hook runs, calls and delivery, with the hook runs counted.
type Summary struct {
	ID            int64           `json:"id"`
	EventID       id.EventID      `json:"event_id"`
	Agent         hooks.AgentName `json:"agent"`
	RoomID        id.RoomID       `json:"room_id"`
	ThreadID      id.EventID      `json:"thread_id,omitempty"`
	Sender        id.UserID       `json:"sender"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Replayed      bool            `json:"replayed,omitempty"`
	// Started and Ended are to the millisecond.
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	// Duration is Trace.Duration to the millisecond.
	Duration time.Duration `json:"duration"`
	Outcome  string        `json:"outcome"`
	Detail   string        `json:"detail,omitempty"`
	Tokens   int           `json:"tokens"`
	// Hooks counts the hook runs the trace kept; ChangedHooks those that
	// did something to their event (ChangedEffect); FailedHooks those that
	// did not return in time (FailedEffect).
	Hooks        int `json:"hooks"`
	ChangedHooks int `json:"changed_hooks"`
	FailedHooks  int `json:"failed_hooks"`
}

// FailedEffect reports whether a hook run with effect e failed: it
// returned an error, timed out or was abandoned (and changed nothing).
func FailedEffect(e string) bool {
	return e == EffectFailed || e == EffectTimedOut || e == EffectAbandoned
}

// ChangedEffect reports whether a hook run with effect e did something to
// its event: changed it, suppressed, claimed or declined it, or asked for
// an approval. Unchanged and failed runs did not.
func ChangedEffect(e string) bool {
	return e != "" && e != EffectUnchanged && !FailedEffect(e)
}

// details is the part of a Trace kept as JSON in trace_turn.details, with
// the Trace's own JSON names.
type details struct {
	Stages    []Stage     `json:"stages,omitempty"`
	Hooks     []HookRun   `json:"hooks,omitempty"`
	Models    []ModelCall `json:"models,omitempty"`
	Tools     []ToolCall  `json:"tools,omitempty"`
	Approvals []Approval  `json:"approvals,omitempty"`
	Delivery  []Delivery  `json:"delivery,omitempty"`
	Dropped   int         `json:"dropped,omitempty"`
}

// Filter selects the traces List returns. Zero fields select everything.
type Filter struct {
	Agent   hooks.AgentName
	RoomID  id.RoomID
	Sender  id.UserID
	Outcome string
	// Before is the paging cursor: only traces with ids below it (the last
	// id of the previous page); 0 starts at the newest.
	Before int64
	// Limit is the most traces returned: DefaultListLimit when 0 (or
	// less), at most MaxListLimit.
	Limit int
}

// Store keeps the traces of turns until they are pruned. It works on
// SQLite and PostgreSQL alike and is safe for concurrent use.
type Store struct {
	db *dbutil.Database
}

// New returns a Store on db. Call Upgrade before any other method.
func New(db *dbutil.Database) *Store {
	return &Store{db: database.Tables(db, "trace", upgradeFiles)}
}

// Upgrade creates or migrates the trace table. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }

// insertColumns are the columns Save writes, in the order of row's values.
const insertColumns = `event_id, agent, room_id, thread_id, sender, correlation_id, replayed,
	started, ended, duration_ms, outcome, detail, tokens, hook_count, changed_hooks, failed_hooks, details`

// insertColumnCount is the number of insertColumns.
const insertColumnCount = 17

// row renders t as the values of insertColumns.
func row(t *Trace) ([]any, error) {
	d, err := json.Marshal(details{
		Stages: t.Stages, Hooks: t.Hooks, Models: t.Models, Tools: t.Tools,
		Approvals: t.Approvals, Delivery: t.Delivery, Dropped: t.Dropped,
	})
	if err != nil {
		return nil, err
	}
	var changed, failed int
	for _, h := range t.Hooks {
		if ChangedEffect(h.Effect) {
			changed++
		}
		if FailedEffect(h.Effect) {
			failed++
		}
	}
	return []any{
		string(t.EventID), string(t.Agent), string(t.RoomID), string(t.ThreadID), string(t.Sender), t.CorrelationID, t.Replayed,
		t.Started.UnixMilli(), t.Ended.UnixMilli(), t.Duration().Milliseconds(), t.Outcome, t.Detail, t.Tokens,
		len(t.Hooks), changed, failed, string(d),
	}, nil
}

// placeholders returns "($first, …, $first+n-1)".
func placeholders(first, n int) string {
	var b strings.Builder
	b.WriteByte('(')
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(first + i))
	}
	b.WriteByte(')')
	return b.String()
}

var insertQuery = "INSERT INTO trace_turn (" + insertColumns + ") VALUES " +
	placeholders(1, insertColumnCount) + " RETURNING id"

// Save stores t and returns its id; t itself is not changed (its ID is
// ignored). A turn calls
// it once, when it has ended (after Recorder.Finish). Saving a turn of the
// same message and agent again (a replay after a restart) stores a second
// run with a higher id. Started and Ended are kept to the millisecond.
// Save joins the transaction ctx carries, if any (dbutil.Database.DoTxn on
// the same database); on PostgreSQL that transaction then holds the row of
// the count until it ends, so keep it short.
func (s *Store) Save(ctx context.Context, t *Trace) (int64, error) {
	if t == nil {
		return 0, errors.New("failed to save trace: no trace")
	}
	args, err := row(t)
	if err != nil {
		return 0, fmt.Errorf("failed to save trace of %s by %s: %w", t.EventID, t.Agent, err)
	}
	var traceID int64
	err = s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		if err := s.db.QueryRow(ctx, insertQuery, args...).Scan(&traceID); err != nil {
			return err
		}
		_, err := s.db.Exec(ctx, "UPDATE trace_count SET turns = turns + 1 WHERE id = 1")
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("failed to save trace of %s by %s: %w", t.EventID, t.Agent, err)
	}
	return traceID, nil
}

// SaveBatch stores traces in one transaction, several rows per statement
// (the trace writer saves what queued up while it was busy; tests fill the
// store). Like Save it joins the transaction ctx carries.
func (s *Store) SaveBatch(ctx context.Context, traces []*Trace) error {
	if len(traces) == 0 {
		return nil
	}
	// 500×17 parameters are under PostgreSQL's limit; modernc's SQLite binds
	// $N parameters in time quadratic in their number, so a few rows per
	// statement are faster there.
	perInsert := 500
	if s.db.Dialect == dbutil.SQLite {
		perInsert = 8
	}
	err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		for first := 0; first < len(traces); first += perInsert {
			batch := traces[first:min(first+perInsert, len(traces))]
			var q strings.Builder
			q.WriteString("INSERT INTO trace_turn (" + insertColumns + ") VALUES ")
			args := make([]any, 0, len(batch)*insertColumnCount)
			for i, t := range batch {
				if t == nil {
					return errors.New("no trace")
				}
				vals, err := row(t)
				if err != nil {
					return err
				}
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString(placeholders(len(args)+1, insertColumnCount))
				args = append(args, vals...)
			}
			if _, err := s.db.Exec(ctx, q.String(), args...); err != nil {
				return err
			}
		}
		_, err := s.db.Exec(ctx, "UPDATE trace_count SET turns = turns + $1 WHERE id = 1", len(traces))
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to save %d traces: %w", len(traces), err)
	}
	return nil
}

// summaryColumns are the columns scanSummary reads.
const summaryColumns = `id, event_id, agent, room_id, thread_id, sender, correlation_id, replayed,
	started, ended, duration_ms, outcome, detail, tokens, hook_count, changed_hooks, failed_hooks`

// scanSummary reads summaryColumns, then into extra.
func scanSummary(row dbutil.Scannable, extra ...any) (Summary, error) {
	var (
		sum                                    Summary
		eventID, agent, roomID, thread, sender string
		started, ended, durationMS, tokens     int64
		hookCount, changedHooks, failedHooks   int64
	)
	dest := append([]any{&sum.ID, &eventID, &agent, &roomID, &thread, &sender, &sum.CorrelationID, &sum.Replayed,
		&started, &ended, &durationMS, &sum.Outcome, &sum.Detail, &tokens, &hookCount, &changedHooks, &failedHooks}, extra...)
	if err := row.Scan(dest...); err != nil {
		return Summary{}, err
	}
	sum.EventID, sum.Agent, sum.RoomID, sum.ThreadID, sum.Sender =
		id.EventID(eventID), hooks.AgentName(agent), id.RoomID(roomID), id.EventID(thread), id.UserID(sender)
	sum.Started, sum.Ended, sum.Duration = time.UnixMilli(started), time.UnixMilli(ended), time.Duration(durationMS)*time.Millisecond
	sum.Tokens, sum.Hooks, sum.ChangedHooks, sum.FailedHooks = int(tokens), int(hookCount), int(changedHooks), int(failedHooks)
	return sum, nil
}

// Get returns the trace with id traceID, with everything it recorded; the
// console's turn inspector calls it. A trace that does not exist (or was
// pruned) returns an error matching ErrNotFound.
func (s *Store) Get(ctx context.Context, traceID int64) (*Trace, error) {
	var d string
	sum, err := scanSummary(s.db.QueryRow(ctx, "SELECT "+summaryColumns+", details FROM trace_turn WHERE id = $1", traceID), &d)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("failed to get trace %d: %w", traceID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to get trace %d: %w", traceID, err)
	}
	var det details
	if err := json.Unmarshal([]byte(d), &det); err != nil {
		return nil, fmt.Errorf("failed to get trace %d: failed to decode its details: %w", traceID, err)
	}
	return &Trace{
		ID: sum.ID, EventID: sum.EventID, Agent: sum.Agent, RoomID: sum.RoomID, ThreadID: sum.ThreadID, Sender: sum.Sender,
		CorrelationID: sum.CorrelationID, Replayed: sum.Replayed, Started: sum.Started, Ended: sum.Ended,
		Outcome: sum.Outcome, Detail: sum.Detail, Tokens: sum.Tokens,
		Stages: det.Stages, Hooks: det.Hooks, Models: det.Models, Tools: det.Tools,
		Approvals: det.Approvals, Delivery: det.Delivery, Dropped: det.Dropped,
	}, nil
}

// List returns the summaries of the traces f selects, newest (highest id)
// first, at most f.Limit of them; the console's overview of turns calls it
// for each page, passing the last id of one page as the next page's
// f.Before. Each filter is served by an index, so a page costs the same
// however many traces there are.
func (s *Store) List(ctx context.Context, f Filter) ([]Summary, error) {
	q, args := f.query()
	out, err := s.summaries(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("failed to list traces: %w", err)
	}
	return out, nil
}

// query renders the query List runs for f, with its arguments.
func (f Filter) query() (string, []any) {
	var (
		conds []string
		args  []any
	)
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, cond+" $"+strconv.Itoa(len(args)))
	}
	if f.Agent != "" {
		add("agent =", string(f.Agent))
	}
	if f.RoomID != "" {
		add("room_id =", string(f.RoomID))
	}
	if f.Sender != "" {
		add("sender =", string(f.Sender))
	}
	if f.Outcome != "" {
		add("outcome =", f.Outcome)
	}
	if f.Before > 0 {
		add("id <", f.Before)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	q := "SELECT " + summaryColumns + " FROM trace_turn"
	if len(conds) > 0 {
		q += " WHERE " + strings.Join(conds, " AND ")
	}
	return q + " ORDER BY id DESC LIMIT " + strconv.Itoa(limit), args
}

// ForEvent returns the summaries of every run for the message eventID (one
// per agent that answered it, and one more per replay), oldest first; the
// console calls it to go from a message to its turns.
func (s *Store) ForEvent(ctx context.Context, eventID id.EventID) ([]Summary, error) {
	out, err := s.summaries(ctx, "SELECT "+summaryColumns+" FROM trace_turn WHERE event_id = $1 ORDER BY id", string(eventID))
	if err != nil {
		return nil, fmt.Errorf("failed to list the traces of %s: %w", eventID, err)
	}
	return out, nil
}

// summaries runs q and reads its rows of summaryColumns.
func (s *Store) summaries(ctx context.Context, q string, args ...any) ([]Summary, error) {
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Summary
	for rows.Next() {
		sum, err := scanSummary(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	return out, rows.Err()
}

// pruneQuery deletes a batch of the traces that ended before $1.
var pruneQuery = `DELETE FROM trace_turn WHERE id IN (
	SELECT id FROM trace_turn WHERE ended < $1 LIMIT ` + strconv.Itoa(pruneBatch) + `)`

// Prune deletes the traces that ended before before and returns how many
// it deleted; the retention loop calls it periodically (before: now minus
// the retention). It deletes at most pruneBatch rows per statement, each
// its own transaction, so writers wait at most one batch; it stops at ctx's
// end, returning what it deleted so far with the error.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
			res, err := s.db.Exec(ctx, pruneQuery, before.UnixMilli())
			if err != nil {
				return err
			}
			if n, err = res.RowsAffected(); err != nil || n == 0 {
				return err
			}
			_, err = s.db.Exec(ctx, "UPDATE trace_count SET turns = turns - $1 WHERE id = 1", n)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("failed to prune traces: %w", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}

// Count returns the number of traces kept; the console's overview shows
// it. It reads the count Save and Prune keep (one row), not the traces.
func (s *Store) Count(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, "SELECT turns FROM trace_count WHERE id = 1").Scan(&n); err != nil {
		return 0, fmt.Errorf("failed to count traces: %w", err)
	}
	return n, nil
}

// distinctQuery selects the distinct values of column, one index lookup
// per value.
func distinctQuery(column string) string {
	return `
		WITH RECURSIVE v(x) AS (
			SELECT MIN(` + column + `) FROM trace_turn
			UNION ALL
			SELECT (SELECT MIN(` + column + `) FROM trace_turn WHERE ` + column + ` > v.x) FROM v WHERE v.x IS NOT NULL
		)
		SELECT x FROM v WHERE x IS NOT NULL`
}

// distinct returns the distinct values of column (indexed), sorted by
// their bytes (as Go sorts, whatever the database's collation), with a
// loose index scan: one index lookup per value, however many rows there
// are (neither SQLite nor PostgreSQL skips through an index for DISTINCT).
func (s *Store) distinct(ctx context.Context, column string) ([]string, error) {
	rows, err := s.db.Query(ctx, distinctQuery(column))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, rows.Err()
}

// Agents returns the agents that have traces, sorted: the choices of the
// console's agent filter.
func (s *Store) Agents(ctx context.Context) ([]hooks.AgentName, error) {
	vs, err := s.distinct(ctx, "agent")
	if err != nil {
		return nil, fmt.Errorf("failed to list the agents of traces: %w", err)
	}
	out := make([]hooks.AgentName, len(vs))
	for i, v := range vs {
		out[i] = hooks.AgentName(v)
	}
	return out, nil
}

// Outcomes returns the outcomes traces have, sorted: the choices of the
// console's outcome filter.
func (s *Store) Outcomes(ctx context.Context) ([]string, error) {
	out, err := s.distinct(ctx, "outcome")
	if err != nil {
		return nil, fmt.Errorf("failed to list the outcomes of traces: %w", err)
	}
	return out, nil
}
