package knowledge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/internal/database"
)

// upgradeFiles holds the package's migrations (one file per dialect),
// versioned in their own knowledge_version table (database.Tables).
//
//go:embed upgrades/*.sql
var upgradeFiles embed.FS

// Embedder turns texts into vectors, one per text, in order. It is the
// same shape as the memory package's, so one OpenAI-compatible
// /v1/embeddings client serves both. Embed is called while indexing (with
// batches of chunk texts) and once per search (with the query); it must
// honour ctx and be safe for concurrent use. When it fails, indexing goes
// on without vectors and a search ranks by full text alone.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// embedBatch is how many chunk texts go into one Embed call.
const embedBatch = 64

// insertBatch is how many chunks one INSERT writes.
const insertBatch = 200

// Index is the knowledge bases' store and indexer, on hookroom's database
// (SQLite or PostgreSQL). It is safe for concurrent use; re-indexing one
// base is serialised, also across Indexes on the same database. Its options are fixed: on a configuration change the
// bot makes a new Index (and Watcher) on the same database, whose rows
// carry over.
type Index struct {
	db       *dbutil.Database
	opts     Options
	embedder Embedder
	filters  map[string]filter
	locks    map[string]*sync.Mutex
	now      func() time.Time

	vecMu   sync.Mutex
	vectors map[string]*vectorSet // per base, loaded on first use
}

// New returns an Index of the bases in opts (which Validate accepted) on
// db; embedder may be nil (full-text search only). Call Upgrade before any
// other method.
func New(db *dbutil.Database, opts Options, embedder Embedder) *Index {
	ix := &Index{
		db:       database.Tables(db, "knowledge", upgradeFiles),
		opts:     opts,
		embedder: embedder,
		filters:  map[string]filter{},
		locks:    map[string]*sync.Mutex{},
		now:      time.Now,
		vectors:  map[string]*vectorSet{},
	}
	for name, b := range opts.Bases {
		ix.filters[name], _ = newFilter(b) // Validate rejected bad globs
		ix.locks[name] = baseLock(db, name)
	}
	return ix
}

// baseLocks serialise re-indexing one base of one database across every
// Index on it: after a configuration change the old Index (and its
// watcher) may still be re-indexing while the new one starts.
var baseLocks sync.Map // baseKey → *sync.Mutex

type baseKey struct {
	db   *dbutil.Database
	base string
}

func baseLock(db *dbutil.Database, base string) *sync.Mutex {
	mu, _ := baseLocks.LoadOrStore(baseKey{db, base}, &sync.Mutex{})
	return mu.(*sync.Mutex)
}

// Upgrade creates or migrates the knowledge tables. Call it once at
// start-up.
func (ix *Index) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, ix.db) }

// Options returns the options the Index was made with.
func (ix *Index) Options() Options { return ix.opts }

// ErrUnknownBase is returned for a base that is not configured.
var ErrUnknownBase = errors.New("no such knowledge base")

// FileError is a file that is not indexed, and why.
type FileError struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// Report says what one Reindex did.
type Report struct {
	Base string `json:"base"`
	// Files is how many files of the base are indexed now.
	Files int `json:"files"`
	// Changed files were (re-)chunked; Unchanged ones were not (same size
	// and time, or same content); Removed ones are gone from the folders
	// and now from the index.
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
	Removed   int `json:"removed"`
	// Chunks is how many chunks the changed files gave.
	Chunks int `json:"chunks"`
	// Bytes is how much text was read and chunked (of a PDF: the text
	// extracted from it).
	Bytes int64 `json:"bytes"`
	// Skipped lists the files newly found unfit to index (too big, binary,
	// unreadable; a PDF that is encrypted, broken or has no text), each
	// also logged as a warning naming it.
	Skipped  []FileError   `json:"skipped,omitempty"`
	Duration time.Duration `json:"duration"`
}

// fileRow is what the index knows of a file.
type fileRow struct {
	hash        string
	size, mtime int64
	errText     string
}

// Reindex brings base up to date with its folders: new and changed files
// are chunked (with full, every file is, as if new), files that are gone
// are removed from the index. A folder that cannot be read is reported in
// Status and its files are kept until it can. The watcher calls it after
// changes; hookroom knowledge reindex calls it on demand.
func (ix *Index) Reindex(ctx context.Context, base string, full bool) (Report, error) {
	b, ok := ix.opts.Bases[base]
	if !ok {
		return Report{}, fmt.Errorf("failed to reindex %q: %w", base, ErrUnknownBase)
	}
	mu := ix.locks[base]
	mu.Lock()
	defer mu.Unlock()
	t0 := ix.now()
	rep := Report{Base: base}
	known, err := ix.files(ctx, base)
	if err != nil {
		return rep, fmt.Errorf("failed to reindex %s: %w", base, err)
	}
	w := &writer{ix: ix, base: base}
	seen := map[string]bool{}
	var baseErrs []string
	var keepPrefixes []string // the files under folders that could not be read stay
	for _, root := range b.Paths {
		prefix := ""
		if len(b.Paths) > 1 {
			prefix = filepath.Base(filepath.Clean(root)) + "/"
		}
		err := ix.walk(ctx, base, root, func(abs, rel string, info fs.FileInfo) error {
			path := prefix + rel
			seen[path] = true
			return ix.indexFile(ctx, w, b, abs, path, info, known, full, &rep)
		})
		if err != nil {
			if ctx.Err() != nil {
				return rep, fmt.Errorf("failed to reindex %s: %w", base, ctx.Err())
			}
			var walkErr *rootError
			if !errors.As(err, &walkErr) {
				return rep, fmt.Errorf("failed to reindex %s: %w", base, err)
			}
			baseErrs = append(baseErrs, walkErr.Error())
			keepPrefixes = append(keepPrefixes, prefix)
			zerolog.Ctx(ctx).Warn().Str("base", base).Str("folder", root).Err(walkErr.err).Msg("failed to read a knowledge folder")
		}
	}
	for path := range known {
		if seen[path] || slices.ContainsFunc(keepPrefixes, func(p string) bool { return strings.HasPrefix(path, p) }) {
			continue
		}
		if err := w.remove(ctx, path); err != nil {
			return rep, fmt.Errorf("failed to reindex %s: %w", base, err)
		}
		rep.Removed++
	}
	if err := w.flush(ctx); err != nil {
		return rep, fmt.Errorf("failed to reindex %s: %w", base, err)
	}
	if rep.Changed > 0 || rep.Removed > 0 {
		ix.dropVectors(base)
	}
	if _, err := ix.db.Exec(ctx, `
		INSERT INTO knowledge_base (base, indexed_at, error) VALUES ($1, $2, $3)
		ON CONFLICT (base) DO UPDATE SET indexed_at=excluded.indexed_at, error=excluded.error`,
		base, ix.now().UnixMilli(), strings.Join(baseErrs, "; ")); err != nil {
		return rep, fmt.Errorf("failed to record the indexing of %s: %w", base, err)
	}
	if err := ix.db.QueryRow(ctx, `SELECT COUNT(*) FROM knowledge_file WHERE base=$1 AND error=''`, base).Scan(&rep.Files); err != nil {
		return rep, fmt.Errorf("failed to count the files of %s: %w", base, err)
	}
	rep.Duration = ix.now().Sub(t0)
	return rep, nil
}

// ReindexAll runs Reindex on every base, in name order, and returns the
// reports of those it could and the errors of the others.
func (ix *Index) ReindexAll(ctx context.Context, full bool) ([]Report, error) {
	var reps []Report
	var errs []error
	for _, name := range ix.opts.Names() {
		rep, err := ix.Reindex(ctx, name, full)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		reps = append(reps, rep)
	}
	return reps, errors.Join(errs...)
}

func (ix *Index) files(ctx context.Context, base string) (map[string]fileRow, error) {
	rows, err := ix.db.Query(ctx, `SELECT path, hash, size, mtime, error FROM knowledge_file WHERE base=$1`, base)
	if err != nil {
		return nil, fmt.Errorf("failed to read the indexed files: %w", err)
	}
	defer rows.Close()
	out := map[string]fileRow{}
	for rows.Next() {
		var path string
		var r fileRow
		if err := rows.Scan(&path, &r.hash, &r.size, &r.mtime, &r.errText); err != nil {
			return nil, fmt.Errorf("failed to read the indexed files: %w", err)
		}
		out[path] = r
	}
	return out, rows.Err()
}

// rootError is a base's folder that could not be walked.
type rootError struct {
	root string
	err  error
}

func (e *rootError) Error() string { return fmt.Sprintf("folder %s: %v", e.root, e.err) }

// walk calls fn for each file of the folder root that base indexes, with
// its slash-separated path from root.
func (ix *Index) walk(ctx context.Context, base, root string, fn func(abs, rel string, info fs.FileInfo) error) error {
	f := ix.filters[base]
	if st, err := os.Stat(root); err != nil {
		return &rootError{root, err}
	} else if !st.IsDir() {
		return &rootError{root, errors.New("not a folder")}
	}
	return filepath.WalkDir(root, func(abs string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if abs == root {
			if err != nil {
				return &rootError{root, err}
			}
			return nil
		}
		relOS, _ := filepath.Rel(root, abs)
		rel := filepath.ToSlash(relOS)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Str("base", base).Str("path", abs).Err(err).Msg("failed to read a knowledge path; skipped")
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if f.skipDir(rel) {
				return fs.SkipDir
			}
			return nil
		}
		if !f.file(rel) {
			return nil
		}
		info, err := os.Stat(abs) // follows a symbolic link to a file
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		return fn(abs, rel, info)
	})
}

// indexFile brings one file's rows up to date.
func (ix *Index) indexFile(ctx context.Context, w *writer, b BaseOptions, abs, path string, info fs.FileInfo, known map[string]fileRow, full bool, rep *Report) error {
	base := w.base
	size, mtime := info.Size(), info.ModTime().UnixNano()
	row, had := known[path]
	if !full && had && row.size == size && row.mtime == mtime {
		rep.Unchanged++
		return nil
	}
	skip := func(reason string) error {
		zerolog.Ctx(ctx).Warn().Str("base", base).Str("path", abs).Str("reason", reason).Msg("skipped a knowledge file")
		rep.Skipped = append(rep.Skipped, FileError{Path: path, Error: reason})
		return w.store(ctx, path, fileRow{size: size, mtime: mtime, errText: reason}, nil, nil, 0)
	}
	pdfFile := isPDF(path)
	if max := ix.opts.maxFileBytes(); !pdfFile && size > max {
		return skip(fmt.Sprintf("too big: %d bytes, more than max_file_bytes %d", size, max))
	}
	if max := ix.opts.maxPDFBytes(); pdfFile && size > max {
		return skip(fmt.Sprintf("too big: %d bytes, more than max_pdf_bytes %d", size, max))
	}
	data, err := os.ReadFile(abs)
	if err != nil {
		return skip(fmt.Sprintf("unreadable: %v", err))
	}
	if !pdfFile && (bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 || !utf8.Valid(data)) {
		return skip("not a text file (binary or not UTF-8)")
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	if !full && had && row.errText == "" && row.hash == hash {
		rep.Unchanged++
		return w.touch(ctx, path, size, mtime)
	}
	var chunks []Chunk
	textBytes := len(data)
	if pdfFile {
		pages, err := pdfPages(ctx, path, data, pdfLimits{text: ix.opts.maxFileBytes()})
		if pe := (*pdfError)(nil); errors.As(err, &pe) {
			return skip(pe.reason)
		} else if err != nil {
			return err // ctx is done
		}
		textBytes = 0
		for _, p := range pages {
			textBytes += len(p)
		}
		if max := ix.opts.maxFileBytes(); int64(textBytes) > max {
			return skip(fmt.Sprintf("too much text: %d bytes extracted, more than max_file_bytes %d", textBytes, max))
		}
		chunks = splitPDF(base, path, pages, b.chunkSize())
	} else {
		chunks = Split(base, path, string(data), isMarkdown(path), b.chunkSize())
	}
	vecs := ix.embedChunks(ctx, base, path, chunks)
	rep.Changed++
	rep.Chunks += len(chunks)
	rep.Bytes += int64(textBytes)
	return w.store(ctx, path, fileRow{hash: hash, size: size, mtime: mtime}, chunks, vecs, textBytes)
}

// embedChunks returns the chunks' vectors, or nil (logged) when there is
// no embedder or it failed.
func (ix *Index) embedChunks(ctx context.Context, base, path string, chunks []Chunk) [][]float32 {
	if ix.embedder == nil || len(chunks) == 0 {
		return nil
	}
	out := make([][]float32, 0, len(chunks))
	for batch := range slices.Chunk(chunks, embedBatch) {
		texts := make([]string, len(batch))
		for i, c := range batch {
			texts[i] = embedText(c)
		}
		vecs, err := ix.embedder.Embed(ctx, texts)
		if err == nil && len(vecs) != len(texts) {
			err = fmt.Errorf("%d vectors for %d texts", len(vecs), len(texts))
		}
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Str("base", base).Str("path", path).Msg("failed to embed knowledge chunks; indexed for full-text search only")
			return nil
		}
		out = append(out, vecs...)
	}
	return out
}

// embedText is what is embedded of a chunk: its heading path and text.
func embedText(c Chunk) string {
	if c.Heading == "" {
		return c.Text
	}
	return c.Heading + "\n" + c.Text
}

// Batches of writes: many files per transaction, since SQLite's FTS5
// flushes and merges its index at every commit.
const (
	writeBatchFiles = 100
	writeBatchBytes = 4 << 20
)

// writer batches the writes of one Reindex.
type writer struct {
	ix    *Index
	base  string
	ops   []fileWrite
	bytes int
}

// fileWrite is one file's change: its chunks and row replaced (store), its
// size and time updated (touch), or it removed.
type fileWrite struct {
	path          string
	row           fileRow
	chunks        []Chunk
	vecs          [][]float32
	touch, remove bool
}

func (w *writer) add(ctx context.Context, op fileWrite, size int) error {
	w.ops = append(w.ops, op)
	w.bytes += size
	if len(w.ops) >= writeBatchFiles || w.bytes >= writeBatchBytes {
		return w.flush(ctx)
	}
	return nil
}

// store replaces a file's chunks and row; size is its text's length.
func (w *writer) store(ctx context.Context, path string, row fileRow, chunks []Chunk, vecs [][]float32, size int) error {
	return w.add(ctx, fileWrite{path: path, row: row, chunks: chunks, vecs: vecs}, size)
}

// touch records a new size and time of an unchanged file.
func (w *writer) touch(ctx context.Context, path string, size, mtime int64) error {
	return w.add(ctx, fileWrite{path: path, row: fileRow{size: size, mtime: mtime}, touch: true}, 0)
}

// remove deletes a file's chunks (and so their full-text entries) and row.
func (w *writer) remove(ctx context.Context, path string) error {
	return w.add(ctx, fileWrite{path: path, remove: true}, 0)
}

// flush writes the pending changes in one transaction.
func (w *writer) flush(ctx context.Context) error {
	if len(w.ops) == 0 {
		return nil
	}
	db, base := w.ix.db, w.base
	err := db.DoTxn(ctx, nil, func(ctx context.Context) error {
		for _, op := range w.ops {
			if op.touch {
				if _, err := db.Exec(ctx, `UPDATE knowledge_file SET size=$3, mtime=$4 WHERE base=$1 AND path=$2`,
					base, op.path, op.row.size, op.row.mtime); err != nil {
					return fmt.Errorf("%s: %w", op.path, err)
				}
				continue
			}
			if _, err := db.Exec(ctx, `DELETE FROM knowledge_chunk WHERE base=$1 AND path=$2`, base, op.path); err != nil {
				return fmt.Errorf("%s: %w", op.path, err)
			}
			if op.remove {
				if _, err := db.Exec(ctx, `DELETE FROM knowledge_file WHERE base=$1 AND path=$2`, base, op.path); err != nil {
					return fmt.Errorf("%s: %w", op.path, err)
				}
				continue
			}
			if err := w.insertChunks(ctx, op); err != nil {
				return fmt.Errorf("%s: %w", op.path, err)
			}
			if _, err := db.Exec(ctx, `
				INSERT INTO knowledge_file (base, path, hash, size, mtime, chunks, indexed_at, error)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
				ON CONFLICT (base, path) DO UPDATE SET hash=excluded.hash, size=excluded.size, mtime=excluded.mtime,
					chunks=excluded.chunks, indexed_at=excluded.indexed_at, error=excluded.error`,
				base, op.path, op.row.hash, op.row.size, op.row.mtime, len(op.chunks), w.ix.now().UnixMilli(), op.row.errText); err != nil {
				return fmt.Errorf("%s: %w", op.path, err)
			}
		}
		return nil
	})
	w.ops, w.bytes = w.ops[:0], 0
	if err != nil {
		return fmt.Errorf("failed to write the index of %s: %w", base, err)
	}
	return nil
}

// insertChunks writes a file's chunks, many rows per statement: FTS5
// flushes its pending terms at the end of every statement that writes to
// it.
func (w *writer) insertChunks(ctx context.Context, op fileWrite) error {
	for start := 0; start < len(op.chunks); start += insertBatch {
		batch := op.chunks[start:min(start+insertBatch, len(op.chunks))]
		var q strings.Builder
		q.WriteString(`INSERT INTO knowledge_chunk (id, base, path, start_line, end_line, heading, content, embedding) VALUES `)
		args := make([]any, 0, 8*len(batch))
		for i, c := range batch {
			var vec []byte
			if start+i < len(op.vecs) {
				vec = encodeVector(op.vecs[start+i])
			}
			if i > 0 {
				q.WriteString(", ")
			}
			n := len(args)
			fmt.Fprintf(&q, "($%d, $%d, $%d, $%d, $%d, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8)
			args = append(args, c.ID, w.base, op.path, c.StartLine, c.EndLine, c.Heading, c.Text, vec)
		}
		q.WriteString(" ON CONFLICT (id) DO NOTHING")
		if _, err := w.ix.db.Exec(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// Prune removes from the database every base that is no longer configured
// and returns their names. The bot calls it after a configuration change.
func (ix *Index) Prune(ctx context.Context) ([]string, error) {
	rows, err := ix.db.Query(ctx, `SELECT base FROM knowledge_base UNION SELECT DISTINCT base FROM knowledge_file`)
	if err != nil {
		return nil, fmt.Errorf("failed to list the indexed bases: %w", err)
	}
	var stale []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return nil, fmt.Errorf("failed to list the indexed bases: %w", err)
		}
		if _, ok := ix.opts.Bases[b]; !ok {
			stale = append(stale, b)
		}
	}
	rows.Close()
	slices.Sort(stale)
	for _, b := range stale {
		err := ix.db.DoTxn(ctx, nil, func(ctx context.Context) error {
			for _, q := range []string{
				`DELETE FROM knowledge_chunk WHERE base=$1`,
				`DELETE FROM knowledge_file WHERE base=$1`,
				`DELETE FROM knowledge_base WHERE base=$1`,
			} {
				if _, err := ix.db.Exec(ctx, q, b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("failed to remove knowledge base %s: %w", b, err)
		}
	}
	return stale, nil
}

// BaseStatus is what Status says of one base.
type BaseStatus struct {
	Base   string `json:"base"`
	Files  int    `json:"files"`
	Chunks int    `json:"chunks"`
	// Bytes is the size of the indexed files, together.
	Bytes int64 `json:"bytes"`
	// Embedded is how many chunks have a vector.
	Embedded int `json:"embedded"`
	// LastIndexed is when Reindex last finished (zero: never).
	LastIndexed time.Time `json:"last_indexed,omitzero"`
	// Error is what went wrong with the base as a whole at the last
	// Reindex (a folder that could not be read), "" when nothing.
	Error string `json:"error,omitempty"`
	// Skipped are the files not indexed, by path.
	Skipped []FileError `json:"skipped,omitempty"`
}

// Status returns the state of every configured base, in name order.
func (ix *Index) Status(ctx context.Context) ([]BaseStatus, error) {
	byBase := map[string]*BaseStatus{}
	out := make([]BaseStatus, 0, len(ix.opts.Bases))
	for _, n := range ix.opts.Names() {
		out = append(out, BaseStatus{Base: n})
	}
	for i := range out {
		byBase[out[i].Base] = &out[i]
	}
	scan := func(query string, fn func(rows dbutil.Rows) error) error {
		rows, err := ix.db.Query(ctx, query)
		if err != nil {
			return fmt.Errorf("failed to read the knowledge status: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			if err := fn(rows); err != nil {
				return fmt.Errorf("failed to read the knowledge status: %w", err)
			}
		}
		return rows.Err()
	}
	err := scan(`SELECT base, indexed_at, error FROM knowledge_base`, func(rows dbutil.Rows) error {
		var b, e string
		var at int64
		if err := rows.Scan(&b, &at, &e); err != nil {
			return err
		}
		if s := byBase[b]; s != nil {
			s.LastIndexed, s.Error = time.UnixMilli(at), e
		}
		return nil
	})
	if err == nil {
		err = scan(`SELECT base, path, error, size FROM knowledge_file ORDER BY base, path`, func(rows dbutil.Rows) error {
			var b, p, e string
			var size int64
			if err := rows.Scan(&b, &p, &e, &size); err != nil {
				return err
			}
			if s := byBase[b]; s != nil {
				if e == "" {
					s.Files++
					s.Bytes += size
				} else {
					s.Skipped = append(s.Skipped, FileError{Path: p, Error: e})
				}
			}
			return nil
		})
	}
	if err == nil {
		err = scan(`SELECT base, COUNT(*), COUNT(embedding) FROM knowledge_chunk GROUP BY base`, func(rows dbutil.Rows) error {
			var b string
			var n, e int
			if err := rows.Scan(&b, &n, &e); err != nil {
				return err
			}
			if s := byBase[b]; s != nil {
				s.Chunks, s.Embedded = n, e
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}
