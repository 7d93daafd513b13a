-- v0 -> v1: Latest revision

-- One row per file of a base the index has seen: its content hash, size
-- and modification time (unix nanoseconds) when it was last indexed, how
-- many chunks it gave, and why it was skipped ('' when it was indexed).
-- Times are unix milliseconds unless said otherwise.
CREATE TABLE knowledge_file (
	base       TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	hash       TEXT    NOT NULL,
	size       BIGINT  NOT NULL,
	mtime      BIGINT  NOT NULL,
	chunks     INTEGER NOT NULL,
	indexed_at BIGINT  NOT NULL,
	error      TEXT    NOT NULL,
	PRIMARY KEY (base, path)
);

-- One row per indexed base: when it was last brought up to date, and what
-- went wrong with the base as a whole ('' when nothing).
CREATE TABLE knowledge_base (
	base       TEXT   PRIMARY KEY,
	indexed_at BIGINT NOT NULL,
	error      TEXT   NOT NULL
);

-- only: sqlite until "end only"
-- The chunks; embedding holds little-endian float32s, NULL without an
-- embedder.
CREATE TABLE knowledge_chunk (
	rid        INTEGER PRIMARY KEY,
	id         TEXT    NOT NULL UNIQUE,
	base       TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	start_line INTEGER NOT NULL,
	end_line   INTEGER NOT NULL,
	heading    TEXT    NOT NULL,
	content    TEXT    NOT NULL,
	embedding  BLOB
);
CREATE INDEX knowledge_chunk_file_idx ON knowledge_chunk (base, path);

-- The full-text index of the chunks (external content: triggers keep it
-- in step with knowledge_chunk, so a deleted chunk is gone from it too).
CREATE VIRTUAL TABLE knowledge_fts USING fts5(
	heading, content, content='knowledge_chunk', content_rowid='rid', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER knowledge_chunk_ai AFTER INSERT ON knowledge_chunk BEGIN
	INSERT INTO knowledge_fts (rowid, heading, content) VALUES (new.rid, new.heading, new.content);
END;
CREATE TRIGGER knowledge_chunk_ad AFTER DELETE ON knowledge_chunk BEGIN
	INSERT INTO knowledge_fts (knowledge_fts, rowid, heading, content) VALUES ('delete', old.rid, old.heading, old.content);
END;
CREATE TRIGGER knowledge_chunk_au AFTER UPDATE OF heading, content ON knowledge_chunk BEGIN
	INSERT INTO knowledge_fts (knowledge_fts, rowid, heading, content) VALUES ('delete', old.rid, old.heading, old.content);
	INSERT INTO knowledge_fts (rowid, heading, content) VALUES (new.rid, new.heading, new.content);
END;
-- end only sqlite

-- only: postgres until "end only"
-- The chunks, with their full-text vector (the heading weighted above the
-- text) under a GIN index; embedding holds little-endian float32s, NULL
-- without an embedder.
CREATE TABLE knowledge_chunk (
	rid        BIGSERIAL PRIMARY KEY,
	id         TEXT    NOT NULL UNIQUE,
	base       TEXT    NOT NULL,
	path       TEXT    NOT NULL,
	start_line INTEGER NOT NULL,
	end_line   INTEGER NOT NULL,
	heading    TEXT    NOT NULL,
	content    TEXT    NOT NULL,
	embedding  BYTEA,
	tsv        tsvector GENERATED ALWAYS AS (
		setweight(to_tsvector('english', heading), 'B') || setweight(to_tsvector('english', content), 'D')
	) STORED
);
CREATE INDEX knowledge_chunk_file_idx ON knowledge_chunk (base, path);
CREATE INDEX knowledge_chunk_tsv_idx ON knowledge_chunk USING GIN (tsv);
-- end only postgres
