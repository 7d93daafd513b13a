// Package knowledge owns an agent's knowledge bases: named sets of folders
// of Markdown and plain-text files, split into chunks that remember their
// source file, line range and heading path, indexed in hookroom's database
// (SQLite FTS5 or PostgreSQL full-text search, plus optional embeddings
// ranked in Go) and kept current by a file watcher.
//
// Index is the store and the indexer. Reindex brings one base up to date
// incrementally: a file whose size and modification time are unchanged is
// not read, one whose content hash is unchanged is not re-chunked, and a
// file that is gone is removed from the index for real (its rows and its
// full-text entries). Watcher runs Reindex for a base shortly (debounced)
// after anything under its folders changed, and watches new
// subdirectories. Search ranks chunks of one or more bases for a query:
// full-text rank alone, or fused with cosine similarity (reciprocal-rank
// fusion) when an Embedder is set; every hit cites "path:start-end".
//
// The built-in plugin "knowledge" (plugins/builtin/knowledge) plugs the
// bases into turns: a message:enrich collector adds Enrichment's item (the
// top chunks for the person's message, byte-stable for the same hits), the
// agents with bases get the search_knowledge tool (Call), and its
// !knowledge command calls Status and Reindex.
//
// PDF files are not indexed: no maintained pure-Go PDF text reader is among
// the module's dependencies.
package knowledge
