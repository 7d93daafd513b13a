-- v2 -> v3: Remember the rooms accounts joined on a person's invitation

-- Rooms a hookroom account joined because a person invited it (direct messages,
-- ad-hoc rooms), as opposed to the rooms config.yaml provisions. A row lives from
-- the accepted invite until the account leaves, is kicked or banned.
-- account: the router's or an agent's user id; inviter: who sent the invite;
-- is_direct: the invite's is_direct flag; accepted_at: unix milliseconds.
CREATE TABLE tracking_invited_room (
	room_id     TEXT    NOT NULL,
	account     TEXT    NOT NULL,
	inviter     TEXT    NOT NULL,
	is_direct   BOOLEAN NOT NULL,
	accepted_at BIGINT  NOT NULL,

	PRIMARY KEY (room_id, account)
);
