-- v0 -> v1: Latest revision

-- One row per person and agent an administrator paired (DM policy
-- pairing): the person may talk to the agent in DMs until unpaired.
-- person is the canonical user id (after aliases); paired_by the
-- administrator who confirmed the code (or '' when set another way);
-- code the code they confirmed. paired_at is unix milliseconds.
CREATE TABLE policy_pairing (
	agent     TEXT   NOT NULL,
	person    TEXT   NOT NULL,
	paired_by TEXT   NOT NULL,
	code      TEXT   NOT NULL,
	paired_at BIGINT NOT NULL,

	PRIMARY KEY (agent, person)
);

-- One row per live pairing code: given to a person who wrote to an agent
-- under DM policy pairing, waiting for an administrator's !pair CODE.
-- At most one code per agent and person; a confirmed code is deleted (a
-- code works once), an expired one when the next code is issued. room_id
-- is the DM where it was given. Times are unix milliseconds.
CREATE TABLE policy_pairing_code (
	code       TEXT   PRIMARY KEY,
	agent      TEXT   NOT NULL,
	person     TEXT   NOT NULL,
	room_id    TEXT   NOT NULL,
	created_at BIGINT NOT NULL,
	expires_at BIGINT NOT NULL,

	CONSTRAINT policy_pairing_code_once UNIQUE (agent, person)
);
CREATE INDEX policy_pairing_code_expires_idx ON policy_pairing_code (expires_at);
