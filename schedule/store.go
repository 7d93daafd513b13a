package schedule

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds the package's numbered migrations, versioned in their
// own schedule_version table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// State is where a task is in its life.
type State string

// The states of a task.
const (
	StateActive    State = "active"
	StateDone      State = "done"
	StateCancelled State = "cancelled"
)

// Task is one scheduled message.
type Task struct {
	// ID is short and random ("k3f9x2qa"); !unschedule takes it.
	ID       string
	RoomID   id.RoomID
	ThreadID id.EventID // "" at room level
	// CreatedBy is the person the message is posted for: their
	// authorization is checked when it fires.
	CreatedBy id.UserID
	// Agent created the task with the schedule tool ("" for !schedule);
	// the message is addressed to it.
	Agent   hooks.AgentName
	Spec    Spec
	Message string
	State   State
	// NextRun is the next due time (zero once the task is no longer active).
	NextRun   time.Time
	CreatedAt time.Time
}

// Firing is a task's run at one due time.
type Firing struct {
	Task Task
	Due  time.Time
	// Missed is set when the firing was overdue by more than the grace: it
	// is reported, not run.
	Missed bool
}

// TxnKey identifies the firing; the bot derives the transaction id of its
// message from it, so delivering it again never posts twice.
func (f Firing) TxnKey() string {
	return fmt.Sprintf("schedule:%s:%d", f.Task.ID, f.Due.UnixMilli())
}

// ErrNotFound is returned for a task id that does not exist.
var ErrNotFound = errors.New("no such scheduled task")

// Store keeps scheduled tasks and their firings. It works on SQLite and
// PostgreSQL alike and is safe for concurrent use.
type Store struct {
	db *dbutil.Database
}

// NewStore returns a Store on db. Call Upgrade before any other method.
func NewStore(db *dbutil.Database) *Store {
	return &Store{db: database.Tables(db, "schedule", upgradeFiles)}
}

// Upgrade creates or migrates the schedule tables. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }

const idAlphabet = "abcdefghjkmnpqrstuvwxyz23456789" // no 0/o, 1/l/i

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b)
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Add stores a new active task and returns it with its id. NextRun must be
// set (Spec.First).
func (s *Store) Add(ctx context.Context, t Task) (Task, error) {
	if t.RoomID == "" || t.CreatedBy == "" || t.Message == "" || t.NextRun.IsZero() {
		return Task{}, fmt.Errorf("failed to add scheduled task: room, creator, message and next run are required")
	}
	if t.ID == "" {
		t.ID = newID()
	}
	t.State = StateActive
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO schedule_task (id, room_id, thread_id, created_by, agent, spec, description, timezone,
			message, state, next_run, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		t.ID, string(t.RoomID), string(t.ThreadID), string(t.CreatedBy), string(t.Agent), t.Spec.Encode(),
		t.Spec.Desc, t.Spec.zone().String(), t.Message, string(t.State), millis(t.NextRun), millis(t.CreatedAt))
	if err != nil {
		return Task{}, fmt.Errorf("failed to add scheduled task: %w", err)
	}
	return t, nil
}

const taskColumns = `id, room_id, thread_id, created_by, agent, spec, description, timezone, message, state, next_run, created_at`

func scanTask(row dbutil.Scannable) (Task, error) {
	var t Task
	var room, thread, by, agent, spec, desc, zone, state string
	var next, created int64
	if err := row.Scan(&t.ID, &room, &thread, &by, &agent, &spec, &desc, &zone, &t.Message, &state, &next, &created); err != nil {
		return Task{}, err
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return Task{}, fmt.Errorf("task %s: unknown time zone %q: %w", t.ID, zone, err)
	}
	if t.Spec, err = Decode(spec, desc, loc); err != nil {
		return Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	t.RoomID, t.ThreadID, t.CreatedBy, t.Agent = id.RoomID(room), id.EventID(thread), id.UserID(by), hooks.AgentName(agent)
	t.State, t.NextRun, t.CreatedAt = State(state), fromMillis(next), fromMillis(created)
	return t, nil
}

func (s *Store) tasks(ctx context.Context, query string, args ...any) ([]Task, error) {
	rows, err := s.db.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Get returns the task with that id (in any state), or ErrNotFound.
func (s *Store) Get(ctx context.Context, taskID string) (Task, error) {
	t, err := scanTask(s.db.QueryRow(ctx, `SELECT `+taskColumns+` FROM schedule_task WHERE id = $1`, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("failed to read scheduled task %q: %w", taskID, ErrNotFound)
	}
	if err != nil {
		return Task{}, fmt.Errorf("failed to read scheduled task %q: %w", taskID, err)
	}
	return t, nil
}

// Active lists the active tasks of room (every room for ""), the next to
// run first.
func (s *Store) Active(ctx context.Context, room id.RoomID) ([]Task, error) {
	q := `SELECT ` + taskColumns + ` FROM schedule_task WHERE state = 'active'`
	var args []any
	if room != "" {
		q += ` AND room_id = $1`
		args = append(args, string(room))
	}
	out, err := s.tasks(ctx, q+` ORDER BY next_run, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("failed to list scheduled tasks: %w", err)
	}
	return out, nil
}

// Cancel ends an active task. It reports false when the task is not
// active (done, cancelled before, or unknown).
func (s *Store) Cancel(ctx context.Context, taskID string) (bool, error) {
	res, err := s.db.Exec(ctx, `UPDATE schedule_task SET state = 'cancelled', next_run = 0 WHERE id = $1 AND state = 'active'`, taskID)
	if err != nil {
		return false, fmt.Errorf("failed to cancel scheduled task %q: %w", taskID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("failed to cancel scheduled task %q: %w", taskID, err)
	}
	return n > 0, nil
}

// Due lists the active tasks due at or before now, the earliest first.
func (s *Store) Due(ctx context.Context, now time.Time) ([]Task, error) {
	out, err := s.tasks(ctx, `SELECT `+taskColumns+` FROM schedule_task
		WHERE state = 'active' AND next_run <= $1 ORDER BY next_run, id`, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("failed to list due scheduled tasks: %w", err)
	}
	return out, nil
}

// NextRun returns the earliest next run of the active tasks; ok is false
// when there is none.
func (s *Store) NextRun(ctx context.Context) (next time.Time, ok bool, err error) {
	var ms sql.NullInt64
	if err := s.db.QueryRow(ctx, `SELECT MIN(next_run) FROM schedule_task WHERE state = 'active'`).Scan(&ms); err != nil {
		return time.Time{}, false, fmt.Errorf("failed to read the next scheduled run: %w", err)
	}
	if !ms.Valid {
		return time.Time{}, false, nil
	}
	return fromMillis(ms.Int64), true, nil
}

var errLostClaim = errors.New("claimed elsewhere")

// Claim records the firing of t at its due time t.NextRun and advances the
// task to next (the zero time ends it: state done) in one transaction. It
// reports false, changing nothing, when that due time was claimed before or
// the task changed meanwhile (cancelled, or advanced by another claim):
// whoever gets true fires it, exactly once per task and due time.
func (s *Store) Claim(ctx context.Context, t Task, missed bool, next, now time.Time) (bool, error) {
	due := t.NextRun
	if due.IsZero() {
		return false, fmt.Errorf("failed to claim task %s: it has no due time", t.ID)
	}
	outcome, state := "fired", StateActive
	if missed {
		outcome = "missed"
	}
	if next.IsZero() {
		state = StateDone
	}
	err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		res, err := s.db.Exec(ctx, `
			INSERT INTO schedule_firing (task_id, due, outcome, claimed_at, delivered_at, event_id)
			VALUES ($1, $2, $3, $4, 0, '') ON CONFLICT (task_id, due) DO NOTHING`,
			t.ID, due.UnixMilli(), outcome, now.UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errLostClaim
		}
		res, err = s.db.Exec(ctx, `UPDATE schedule_task SET next_run = $1, state = $2
			WHERE id = $3 AND state = 'active' AND next_run = $4`,
			millis(next), string(state), t.ID, due.UnixMilli())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errLostClaim
		}
		return nil
	})
	if errors.Is(err, errLostClaim) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to claim task %s due %s: %w", t.ID, due.Format(time.RFC3339), err)
	}
	return true, nil
}

// Delivered marks a claimed firing delivered, with its final outcome
// (f.Missed: a claimed firing delivered after the grace counts as missed)
// (evID: the message it posted,
// "" when it posted none: suppressed by a hook, the creator no longer
// authorized).
func (s *Store) Delivered(ctx context.Context, f Firing, evID id.EventID, now time.Time) error {
	outcome := "fired"
	if f.Missed {
		outcome = "missed"
	}
	_, err := s.db.Exec(ctx, `UPDATE schedule_firing SET delivered_at = $1, event_id = $2, outcome = $3
		WHERE task_id = $4 AND due = $5`,
		now.UnixMilli(), string(evID), outcome, f.Task.ID, f.Due.UnixMilli())
	if err != nil {
		return fmt.Errorf("failed to mark the firing of task %s delivered: %w", f.Task.ID, err)
	}
	return nil
}

// Undelivered lists the firings claimed but not delivered (the process
// stopped or the homeserver failed in between), the oldest first.
func (s *Store) Undelivered(ctx context.Context) ([]Firing, error) {
	rows, err := s.db.Query(ctx, `SELECT f.due, f.outcome, `+prefixed("t.", taskColumns)+`
		FROM schedule_firing f JOIN schedule_task t ON t.id = f.task_id
		WHERE f.delivered_at = 0 ORDER BY f.due, f.task_id`)
	if err != nil {
		return nil, fmt.Errorf("failed to list undelivered firings: %w", err)
	}
	defer rows.Close()
	var out []Firing
	for rows.Next() {
		var due int64
		var outcome string
		var t Task
		var room, thread, by, agent, spec, desc, zone, state string
		var next, created int64
		if err := rows.Scan(&due, &outcome, &t.ID, &room, &thread, &by, &agent, &spec, &desc, &zone, &t.Message, &state, &next, &created); err != nil {
			return nil, fmt.Errorf("failed to list undelivered firings: %w", err)
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			loc = time.UTC
		}
		if t.Spec, err = Decode(spec, desc, loc); err != nil {
			return nil, fmt.Errorf("failed to list undelivered firings: task %s: %w", t.ID, err)
		}
		t.RoomID, t.ThreadID, t.CreatedBy, t.Agent = id.RoomID(room), id.EventID(thread), id.UserID(by), hooks.AgentName(agent)
		t.State, t.NextRun, t.CreatedAt = State(state), fromMillis(next), fromMillis(created)
		out = append(out, Firing{Task: t, Due: fromMillis(due), Missed: outcome == "missed"})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to list undelivered firings: %w", err)
	}
	return out, nil
}

// Firings counts the firings of a task by outcome, delivered or not (for
// tests and diagnosis).
func (s *Store) Firings(ctx context.Context, taskID string) (fired, missed int, err error) {
	err = s.db.QueryRow(ctx, `SELECT
		COALESCE(SUM(CASE WHEN outcome = 'fired' THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN outcome = 'missed' THEN 1 ELSE 0 END), 0)
		FROM schedule_firing WHERE task_id = $1`, taskID).Scan(&fired, &missed)
	if err != nil {
		return 0, 0, fmt.Errorf("failed to count the firings of task %s: %w", taskID, err)
	}
	return fired, missed, nil
}

func prefixed(prefix, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
