-- v1 -> v2: Record the reply of each answered event

-- The reply hookroom posted for a source event (its placeholder, or the reply
-- itself), so that a turn replayed after a crash edits that reply instead of
-- posting a second one.
CREATE TABLE tracking_delivery (
	source_event_id TEXT   PRIMARY KEY,
	room_id         TEXT   NOT NULL,
	reply_event_id  TEXT   NOT NULL,
	created_at      BIGINT NOT NULL
);
