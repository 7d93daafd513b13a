-- v0 -> v1: Latest revision

-- One row per setting a person changed from chat: for a room (thread_id
-- '') or one thread of it. set_at is unix milliseconds.
CREATE TABLE prefs_setting (
	room_id   TEXT   NOT NULL,
	thread_id TEXT   NOT NULL,
	name      TEXT   NOT NULL,
	value     TEXT   NOT NULL,
	set_by    TEXT   NOT NULL,
	set_at    BIGINT NOT NULL,
	PRIMARY KEY (room_id, thread_id, name)
);
