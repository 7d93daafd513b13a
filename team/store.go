package team

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds the package's numbered migrations, versioned in their
// own team_version table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// Step is one step of a team run: the leader's plan, a member's answer,
// the leader's synthesis; or a delegation (DelegateStep).
type Step string

const (
	StepPlan      Step = "plan"
	StepAnswer    Step = "answer"
	StepSynthesis Step = "synthesis"
)

// Status is where a step stands in the Store.
type Status string

const (
	// StatusRunning: started and not finished; after a crash, interrupted
	// (a replay runs it again).
	StatusRunning Status = "running"
	// StatusDone: finished with an answer; final (a replay reuses it).
	StatusDone Status = "done"
	// StatusFailed: finished with an error (a replay runs it again).
	StatusFailed Status = "failed"
)

// Key names one step: the message whose turn runs it, the team (for a
// delegation: the delegating agent), the agent that runs it and the step.
type Key struct {
	SourceEventID id.EventID
	Team          hooks.AgentName
	Member        hooks.AgentName
	Step          Step
}

// String is the key as one string, the run id of subagent events.
func (k Key) String() string {
	return string(k.SourceEventID) + "/" + string(k.Team) + "/" + string(k.Member) + "/" + string(k.Step)
}

// Record is one step as the Store keeps it.
type Record struct {
	Key
	Status Status
	// Task is what the step was asked.
	Task string
	// Text is the answer (done), Error what went wrong (failed).
	Text, Error string
	// Model, Usage and ModelCalls are what the step's model calls used.
	Model      string
	Usage      agents.Usage
	ModelCalls int
	// Attempts counts how often the step was started (Begin).
	Attempts  int
	StartedAt time.Time
	EndedAt   time.Time // zero while running
}

// Store records the steps of team runs and delegations, so that a turn
// replayed after a crash reuses what completed. It works on SQLite and
// PostgreSQL alike and is safe for concurrent use.
type Store struct {
	db  *dbutil.Database
	now func() time.Time
}

// NewStore returns a Store on db. Call Upgrade before any other method.
func NewStore(db *dbutil.Database) *Store {
	return &Store{db: database.Tables(db, "team", upgradeFiles), now: time.Now}
}

// Upgrade creates or migrates the team tables. Call it once at start-up.
func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }

const stepColumns = `source_event_id, team, member, step, status, task, text, error, model,
	input_tokens, output_tokens, cached_tokens, total_tokens, model_calls, attempts, started_at, ended_at`

// Begin records that the step k starts, asked task: a new step, or one
// that was interrupted or failed before (its attempts counted up). A step
// done already stays as it is; Begin reports whether it was (the caller
// then reuses it instead of running it again).
func (s *Store) Begin(ctx context.Context, k Key, task string) (done bool, err error) {
	if err := k.check(); err != nil {
		return false, err
	}
	now := s.now().UnixMilli()
	res, err := s.db.Exec(ctx, `
		INSERT INTO team_step (`+stepColumns+`)
		VALUES ($1, $2, $3, $4, 'running', $5, '', '', '', 0, 0, 0, 0, 0, 1, $6, 0)
		ON CONFLICT (source_event_id, team, member, step) DO UPDATE
		SET status = 'running', task = excluded.task, text = '', error = '', attempts = team_step.attempts + 1,
			started_at = excluded.started_at, ended_at = 0
		WHERE team_step.status <> 'done'`,
		string(k.SourceEventID), string(k.Team), string(k.Member), string(k.Step), task, now)
	if err != nil {
		return false, fmt.Errorf("failed to record the start of %s: %w", k, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("failed to record the start of %s: %w", k, err)
	}
	return n == 0, nil
}

// Finish records how step r.Key ended (r.Status done or failed, with its
// text or error and usage) and returns the step as stored. The first
// answer stays: finishing a step that is done already changes nothing and
// returns the stored answer, so concurrent or repeated writes agree on one.
// A zero r.StartedAt keeps the start Begin recorded.
func (s *Store) Finish(ctx context.Context, r Record) (Record, error) {
	if err := r.check(); err != nil {
		return Record{}, err
	}
	if r.Status != StatusDone && r.Status != StatusFailed {
		return Record{}, fmt.Errorf("failed to record the end of %s: status %q is not an end", r.Key, r.Status)
	}
	now := s.now()
	ended := r.EndedAt
	if ended.IsZero() {
		ended = now
	}
	started, keepStart := r.StartedAt, 0
	if started.IsZero() {
		started, keepStart = ended, 1 // Begin's start stays
	}
	total := r.Usage.TotalTokens
	if total == 0 {
		total = r.Usage.PromptTokens + r.Usage.CompletionTokens
	}
	_, err := s.db.Exec(ctx, `
		INSERT INTO team_step (`+stepColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, 1, $15, $16)
		ON CONFLICT (source_event_id, team, member, step) DO UPDATE
		SET status = excluded.status, text = excluded.text, error = excluded.error, model = excluded.model,
			input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
			cached_tokens = excluded.cached_tokens, total_tokens = excluded.total_tokens,
			model_calls = excluded.model_calls, ended_at = excluded.ended_at,
			started_at = CASE WHEN $17 = 1 THEN team_step.started_at ELSE excluded.started_at END
		WHERE team_step.status <> 'done'`,
		string(r.SourceEventID), string(r.Team), string(r.Member), string(r.Step), string(r.Status), r.Task,
		r.Text, r.Error, r.Model, r.Usage.PromptTokens, r.Usage.CompletionTokens, r.Usage.CachedTokens, total,
		r.ModelCalls, started.UnixMilli(), ended.UnixMilli(), keepStart)
	if err != nil {
		return Record{}, fmt.Errorf("failed to record the end of %s: %w", r.Key, err)
	}
	got, ok, err := s.Get(ctx, r.Key)
	if err != nil {
		return Record{}, err
	}
	if !ok {
		return Record{}, fmt.Errorf("failed to record the end of %s: the step vanished", r.Key)
	}
	return got, nil
}

// Get returns the step k, and false when it was never begun.
func (s *Store) Get(ctx context.Context, k Key) (Record, bool, error) {
	row := s.db.QueryRow(ctx, `SELECT `+stepColumns+` FROM team_step
		WHERE source_event_id = $1 AND team = $2 AND member = $3 AND step = $4`,
		string(k.SourceEventID), string(k.Team), string(k.Member), string(k.Step))
	r, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("failed to read %s: %w", k, err)
	}
	return r, true, nil
}

// List returns the steps of team (or delegating agent) recorded for the
// message event, ordered by member and step; team "" lists every team's.
func (s *Store) List(ctx context.Context, event id.EventID, team hooks.AgentName) ([]Record, error) {
	rows, err := s.db.Query(ctx, `SELECT `+stepColumns+` FROM team_step
		WHERE source_event_id = $1 AND ($2 = '' OR team = $2) ORDER BY team, member, step`,
		string(event), string(team))
	if err != nil {
		return nil, fmt.Errorf("failed to list the team steps of %s: %w", event, err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("failed to list the team steps of %s: %w", event, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to list the team steps of %s: %w", event, err)
	}
	return out, nil
}

// Prune deletes the steps started before before (their turns are long
// over) and returns how many.
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.Exec(ctx, `DELETE FROM team_step WHERE started_at < $1`, before.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("failed to prune team steps: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("failed to prune team steps: %w", err)
	}
	return n, nil
}

func (k Key) check() error {
	if k.SourceEventID == "" || k.Team == "" || k.Member == "" || k.Step == "" {
		return fmt.Errorf("failed to record team step %s: it needs a source event, a team, a member and a step", k)
	}
	return nil
}

func scanRecord(row dbutil.Scannable) (Record, error) {
	var (
		r                                 Record
		event, team, member, step, status string
		in, out, cached, total            int64
		calls, attempts                   int
		started, ended                    int64
	)
	err := row.Scan(&event, &team, &member, &step, &status, &r.Task, &r.Text, &r.Error, &r.Model,
		&in, &out, &cached, &total, &calls, &attempts, &started, &ended)
	if err != nil {
		return Record{}, err
	}
	r.Key = Key{SourceEventID: id.EventID(event), Team: hooks.AgentName(team), Member: hooks.AgentName(member), Step: Step(step)}
	r.Status = Status(status)
	r.Usage = agents.Usage{PromptTokens: int(in), CompletionTokens: int(out), CachedTokens: int(cached), TotalTokens: int(total)}
	r.ModelCalls, r.Attempts = calls, attempts
	r.StartedAt = time.UnixMilli(started)
	if ended > 0 {
		r.EndedAt = time.UnixMilli(ended)
	}
	return r, nil
}

// Usage sums what the recorded steps of the message event used, per agent
// (the member column: the leader for plan and synthesis, the asked agent
// for a delegation), over every team and delegation of its turn, in
// order of agent name. The turn records one usage row per entry when it
// ends; a replayed turn counts the steps its killed run completed too.
// Steps still running (interrupted) recorded no usage.
func (s *Store) Usage(ctx context.Context, event id.EventID) ([]AgentUsage, error) {
	rows, err := s.db.Query(ctx, `
		SELECT member, MAX(model), SUM(input_tokens), SUM(output_tokens), SUM(cached_tokens), SUM(total_tokens), SUM(model_calls)
		FROM team_step WHERE source_event_id = $1 AND status <> 'running'
		GROUP BY member ORDER BY member`, string(event))
	if err != nil {
		return nil, fmt.Errorf("failed to sum the team usage of %s: %w", event, err)
	}
	defer rows.Close()
	var out []AgentUsage
	for rows.Next() {
		var (
			member, model             string
			in, output, cached, total int64
			calls                     int64
		)
		if err := rows.Scan(&member, &model, &in, &output, &cached, &total, &calls); err != nil {
			return nil, fmt.Errorf("failed to sum the team usage of %s: %w", event, err)
		}
		if calls == 0 && in == 0 && output == 0 && total == 0 {
			continue
		}
		out = append(out, AgentUsage{Agent: hooks.AgentName(member), Model: model, ModelCalls: int(calls),
			Usage: agents.Usage{PromptTokens: int(in), CompletionTokens: int(output), CachedTokens: int(cached), TotalTokens: int(total)}})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to sum the team usage of %s: %w", event, err)
	}
	return out, nil
}
