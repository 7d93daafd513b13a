-- v0 -> v1: Latest revision

-- One row per scheduled task. spec is the machine form of the schedule
-- (Spec.Encode: "once <RFC 3339>", "every <Go duration>", "cron <expr>"),
-- description its form for people, timezone the IANA zone its wall-clock
-- times are read in. next_run is the unix milliseconds of the next due
-- time (0 once the task is done, missed or cancelled); state is 'active',
-- 'done' or 'cancelled'. agent is the agent that created the task through
-- the schedule tool ('' for !schedule); thread_id is '' at room level.
CREATE TABLE schedule_task (
	id          TEXT    PRIMARY KEY,
	room_id     TEXT    NOT NULL,
	thread_id   TEXT    NOT NULL,
	created_by  TEXT    NOT NULL,
	agent       TEXT    NOT NULL,
	spec        TEXT    NOT NULL,
	description TEXT    NOT NULL,
	timezone    TEXT    NOT NULL,
	message     TEXT    NOT NULL,
	state       TEXT    NOT NULL,
	next_run    BIGINT  NOT NULL,
	created_at  BIGINT  NOT NULL,

	CONSTRAINT schedule_task_state_check CHECK (state IN ('active', 'done', 'cancelled'))
);
CREATE INDEX schedule_task_due_idx ON schedule_task (state, next_run);
CREATE INDEX schedule_task_room_idx ON schedule_task (room_id, state);

-- One row per due time of a task that was claimed: (task_id, due) is what
-- makes a task fire once per due time. outcome is 'fired' (delivered once
-- delivered_at is set; a claimed firing not yet delivered is delivered
-- again on the next start) or 'missed' (overdue by more than the grace;
-- reported, not run). event_id is the message the firing posted.
CREATE TABLE schedule_firing (
	task_id      TEXT   NOT NULL,
	due          BIGINT NOT NULL,
	outcome      TEXT   NOT NULL,
	claimed_at   BIGINT NOT NULL,
	delivered_at BIGINT NOT NULL,
	event_id     TEXT   NOT NULL,

	PRIMARY KEY (task_id, due),
	CONSTRAINT schedule_firing_outcome_check CHECK (outcome IN ('fired', 'missed'))
);
CREATE INDEX schedule_firing_pending_idx ON schedule_firing (delivered_at);
