// Package knowledge owns an agent's knowledge bases: named sets of folders
// of Markdown, plain-text and PDF files, split into chunks that remember
// their source file, line range (page, for a PDF) and heading path,
// indexed in hookroom's database (SQLite FTS5 or PostgreSQL full-text
// search, plus optional embeddings ranked in Go) and kept current by a file
// watcher.
//
// Index is the store and the indexer. Reindex brings one base up to date
// incrementally: a file whose size and modification time are unchanged is
// not read, one whose content hash is unchanged is not re-chunked, and a
// file that is gone is removed from the index for real (its rows and its
// full-text entries). Watcher runs Reindex for a base shortly (debounced)
// after anything under its folders changed, and watches new
// subdirectories. Search ranks chunks of one or more bases for a query:
// full-text rank alone, or fused with cosine similarity (reciprocal-rank
// fusion) when an Embedder is set; every hit cites "path:start-end", or
// "path:pN" for page N of a PDF.
//
// The built-in plugin "knowledge" (plugins/builtin/knowledge) plugs the
// bases into turns: a message:enrich collector adds Enrichment's item (the
// top chunks for the person's message, byte-stable for the same hits), the
// agents with bases get the search_knowledge tool (Call), and its
// !knowledge command calls Status and Reindex.
//
// A PDF's text is extracted page by page with github.com/ledongthuc/pdf
// (pure Go), under a recover: the reader panics on some malformed files.
// Its chunks never span two pages. An encrypted PDF that needs a password,
// a broken one and one without text (scanned) are skipped with a warning
// naming the file and the reason, like a binary file; MaxPDFBytes bounds
// the file and MaxFileBytes the text extracted from it.
package knowledge
