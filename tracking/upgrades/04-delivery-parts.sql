-- v3 -> v4: A reply may be several messages, each recorded with the account that sent it

-- part numbers the messages of one reply (0: the placeholder or first message);
-- sender is the account that posted it ('' for replies recorded before v4).
CREATE TABLE tracking_delivery_v3 (
	source_event_id TEXT    NOT NULL,
	part            INTEGER NOT NULL,
	room_id         TEXT    NOT NULL,
	sender          TEXT    NOT NULL DEFAULT '',
	reply_event_id  TEXT    NOT NULL,
	created_at      BIGINT  NOT NULL,

	PRIMARY KEY (source_event_id, part)
);
INSERT INTO tracking_delivery_v3 (source_event_id, part, room_id, reply_event_id, created_at)
	SELECT source_event_id, 0, room_id, reply_event_id, created_at FROM tracking_delivery;
DROP TABLE tracking_delivery;
ALTER TABLE tracking_delivery_v3 RENAME TO tracking_delivery;
