-- v0 -> v2: Latest revision

-- One row per conversation scope (room + thread root). session_id is made
-- when the scope's first messages are stored and stays until the scope is
-- deleted; next_seq is the seq the next stored message gets.
CREATE TABLE agents_session (
	scope_key   TEXT    PRIMARY KEY,
	session_id  TEXT    NOT NULL,
	agent       TEXT    NOT NULL,
	created_at  BIGINT  NOT NULL,
	updated_at  BIGINT  NOT NULL,
	next_seq    BIGINT  NOT NULL DEFAULT 1,
	compactions INTEGER NOT NULL DEFAULT 0
);

-- The messages of a scope in order of seq, exactly as the model saw them.
-- content is binary so that every byte comes back as it was stored;
-- tool_calls is the JSON array of an assistant message's tool calls ('' for
-- none); source_event_id is the Matrix event whose turn stored the message
-- ('' for summaries and messages stored without one), so that a redaction
-- can remove the turn.
CREATE TABLE agents_message (
	scope_key    TEXT   NOT NULL,
	seq          BIGINT NOT NULL,
	role         TEXT   NOT NULL,
-- only: postgres for next 1 lines
	content      BYTEA  NOT NULL,
-- only: sqlite for next 1 lines
	content      BLOB   NOT NULL,
	name         TEXT   NOT NULL DEFAULT '',
	tool_call_id TEXT   NOT NULL DEFAULT '',
	tool_calls   TEXT   NOT NULL DEFAULT '',
	source_event_id TEXT NOT NULL DEFAULT '',

	PRIMARY KEY (scope_key, seq),
	CONSTRAINT agents_message_session_fkey FOREIGN KEY (scope_key)
		REFERENCES agents_session (scope_key) ON DELETE CASCADE
);
CREATE INDEX agents_message_source_idx ON agents_message (source_event_id) WHERE source_event_id <> '';
