-- v1 -> v2: End-to-end encryption secrets

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
