-- v4 -> v5: Remember the provisioned rooms, so a restart does not provision them again

-- The rooms config.yaml provisions, as last provisioned: a restart whose configuration
-- still hashes to spec_hash skips creating, joining and inviting (it only checks that the
-- accounts are still joined). room_key: "room:<key>" for a room of the rooms section,
-- "ref:<id or alias>" for a room an agent names directly. accounts: the user ids joined,
-- one per line, sorted. provisioned_at: unix milliseconds.
CREATE TABLE tracking_provisioned_room (
	room_key       TEXT   PRIMARY KEY,
	room_id        TEXT   NOT NULL,
	spec_hash      TEXT   NOT NULL,
	accounts       TEXT   NOT NULL,
	provisioned_at BIGINT NOT NULL
);
