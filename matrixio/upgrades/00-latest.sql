-- v0 -> v2: Latest revision

-- One row per Matrix account hookroom logs in (the router and every agent).
-- password is set for accounts hookroom registered itself (a generated random
-- password), so it can log in again if the access token stops working.
CREATE TABLE matrixio_account (
	user_id      TEXT   PRIMARY KEY,
	device_id    TEXT   NOT NULL DEFAULT '',
	access_token TEXT   NOT NULL DEFAULT '',
	password     TEXT   NOT NULL DEFAULT '',
	registered   BOOLEAN NOT NULL DEFAULT false,
	updated_at   BIGINT NOT NULL DEFAULT 0
);

-- Sync position per account. next_batch is written only after the events of
-- the sync response that produced it were handed to the event sink.
-- filter_hash identifies the filter definition filter_id was created from, so a
-- changed filter is recreated.
CREATE TABLE matrixio_sync (
	user_id     TEXT PRIMARY KEY,
	next_batch  TEXT NOT NULL DEFAULT '',
	filter_id   TEXT NOT NULL DEFAULT '',
	filter_hash TEXT NOT NULL DEFAULT ''
);

-- Installation-wide secrets. pickle_key encrypts the olm and megolm secrets in
-- mautrix's crypto tables and, through a derived key, the cross-signing keys
-- below. Losing it makes every stored key unreadable.
CREATE TABLE matrixio_secret (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);

-- Each account's cross-signing private keys (master, self-signing,
-- user-signing) and the device last signed with them, sealed with AES-GCM
-- under a key derived from the pickle key.
CREATE TABLE matrixio_cross_signing (
	user_id TEXT PRIMARY KEY,
	sealed  TEXT NOT NULL
);
