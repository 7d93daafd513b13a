-- v1 -> v2: Remember the Matrix event each stored turn answers

ALTER TABLE agents_message ADD COLUMN source_event_id TEXT NOT NULL DEFAULT '';
CREATE INDEX agents_message_source_idx ON agents_message (source_event_id) WHERE source_event_id <> '';
