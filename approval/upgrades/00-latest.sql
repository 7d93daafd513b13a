-- v0 -> v1: Latest revision

-- One row per tool call that waited for a person's approval. status is
-- pending until someone (or a tool:approval_requested hook) decides, the
-- deadline passes, or the turn no longer makes the call: approved, denied,
-- expired or cancelled. arguments is the call's JSON object; card_event_id
-- the approval card the router posted ('' before it was sent). Times are
-- unix milliseconds.
CREATE TABLE approval (
	id              TEXT    PRIMARY KEY,
	source_event_id TEXT    NOT NULL,
	room_id         TEXT    NOT NULL,
	thread_id       TEXT    NOT NULL,
	agent           TEXT    NOT NULL,
	requester       TEXT    NOT NULL,
	tool            TEXT    NOT NULL,
	arguments       TEXT    NOT NULL,
	call_id         TEXT    NOT NULL,
	reason          TEXT    NOT NULL,
	card_event_id   TEXT    NOT NULL,
	status          TEXT    NOT NULL,
	decided_by      TEXT    NOT NULL,
	decision_reason TEXT    NOT NULL,
	created_at      BIGINT  NOT NULL,
	expires_at      BIGINT  NOT NULL,
	decided_at      BIGINT  NOT NULL
);
CREATE INDEX approval_source_idx ON approval (source_event_id);
CREATE INDEX approval_card_idx ON approval (card_event_id);
CREATE INDEX approval_thread_idx ON approval (room_id, thread_id, status);
