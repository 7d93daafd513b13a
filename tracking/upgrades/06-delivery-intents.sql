-- v5 -> v6: Record each new message's intent before it is sent

-- A message hookroom is about to post in answer to a source event, written before the
-- send: a turn replayed after a crash looks for it among the account's own events (by
-- its transaction id, in a sync from since) before posting anything, since a homeserver
-- does not reliably remember the transaction id of a request whose client died. The row
-- is deleted when the message's event id is recorded in tracking_delivery.
-- The rows of a killed run stay until a later run of the turn has finished it and looked
-- for their messages once more (a request may reach the homeserver late).
-- txn_key: the send's transaction key; run_key: the run of the turn that sends it;
-- part: as in tracking_delivery; sender: the account that sends it; since: that
-- account's sync position when the intent was recorded ('' before its first sync);
-- created_at: unix milliseconds.
CREATE TABLE tracking_delivery_intent (
	source_event_id TEXT    NOT NULL,
	txn_key         TEXT    NOT NULL,
	run_key         TEXT    NOT NULL,
	part            INTEGER NOT NULL,
	room_id         TEXT    NOT NULL,
	sender          TEXT    NOT NULL,
	since           TEXT    NOT NULL,
	created_at      BIGINT  NOT NULL,

	PRIMARY KEY (source_event_id, txn_key, run_key)
);
