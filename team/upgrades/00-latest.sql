-- v0 -> v1: Latest revision

-- One row per step of a team run or a delegation, keyed by the message the
-- turn answers (source_event_id), the team (or, for a delegation, the
-- delegating agent), the agent that runs (member) and the step: 'plan' and
-- 'synthesis' (the leader's calls), 'answer' (a member's answer) or
-- 'delegate-<hash of the question>'. status is running while the step runs
-- (also when the process died during it: a replay runs it again), then done
-- or failed, and stays done: a replay reuses the text. attempts counts the
-- runs started. Usage is what the step's model calls used, as the provider
-- reported it. Times are unix milliseconds; ended_at is 0 while running.
CREATE TABLE team_step (
	source_event_id TEXT    NOT NULL,
	team            TEXT    NOT NULL,
	member          TEXT    NOT NULL,
	step            TEXT    NOT NULL,
	status          TEXT    NOT NULL,
	task            TEXT    NOT NULL,
	text            TEXT    NOT NULL,
	error           TEXT    NOT NULL,
	model           TEXT    NOT NULL,
	input_tokens    BIGINT  NOT NULL,
	output_tokens   BIGINT  NOT NULL,
	cached_tokens   BIGINT  NOT NULL,
	total_tokens    BIGINT  NOT NULL,
	model_calls     INTEGER NOT NULL,
	attempts        INTEGER NOT NULL,
	started_at      BIGINT  NOT NULL,
	ended_at        BIGINT  NOT NULL,

	PRIMARY KEY (source_event_id, team, member, step),
	CONSTRAINT team_step_status_check CHECK (status IN ('running', 'done', 'failed'))
);
CREATE INDEX team_step_started_idx ON team_step (started_at);
