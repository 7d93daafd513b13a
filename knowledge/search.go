package knowledge

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
)

// Hit is a chunk a search found.
type Hit struct {
	Chunk
	// Score orders hits, higher first: the full-text rank, or the fused
	// reciprocal rank when an embedder is set. Compare scores of one search
	// only.
	Score float64 `json:"score"`
}

// maxQueryTerms bounds the words of a query that are searched for.
const maxQueryTerms = 24

// rrfK is the constant of reciprocal-rank fusion: a hit's fused score is
// the sum over rankings of 1/(rrfK + rank).
const rrfK = 60

// Search returns at most limit chunks of bases (all bases when none is
// given) that best match query, best first. A query is a question or
// keywords: its words (minus common English ones) are searched for with
// stemming, and a chunk matching more and rarer ones ranks higher; with an
// embedder the ranking is fused with the cosine similarity of the chunks'
// vectors to the query's. An unknown base is ErrUnknownBase.
func (ix *Index) Search(ctx context.Context, bases []string, query string, limit int) ([]Hit, error) {
	if len(bases) == 0 {
		bases = ix.opts.Names()
	}
	for _, b := range bases {
		if _, ok := ix.opts.Bases[b]; !ok {
			return nil, fmt.Errorf("failed to search %q: %w", b, ErrUnknownBase)
		}
	}
	if limit <= 0 {
		limit = DefaultTopK
	}
	if len(bases) == 0 || strings.TrimSpace(query) == "" {
		return nil, nil
	}
	depth := limit
	if ix.embedder != nil {
		depth = max(limit*4, 20)
	}
	text, err := ix.fullText(ctx, bases, queryTerms(query), depth)
	if err != nil {
		return nil, err
	}
	if ix.embedder == nil {
		return toHits(text, limit), nil
	}
	near, err := ix.nearest(ctx, bases, query, depth)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to rank knowledge by embeddings; full-text ranking only")
		return toHits(text, limit), nil
	}
	return ix.fuse(ctx, text, near, limit)
}

// ranked is a chunk (by row id) with its score in one ranking.
type ranked struct {
	rid   int64
	chunk Chunk
	score float64
}

func toHits(rs []ranked, limit int) []Hit {
	out := make([]Hit, 0, min(len(rs), limit))
	for _, r := range rs[:min(len(rs), limit)] {
		out = append(out, Hit{Chunk: r.chunk, Score: r.score})
	}
	return out
}

// stopwords are left out of queries: they match nearly every chunk.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because been before being
		below between both but by can could did do does doing down during each few for from further had has have having he her
		here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on
		once only or other our ours ourselves out over own same she should so some such than that the their theirs them themselves
		then there these they this those through to too under until up very was we were what when where which while who whom why
		will with would you your yours yourself yourselves tell know please`) {
		m[w] = true
	}
	return m
}()

// queryTerms returns a query's distinct searchable words, lowercase: runs
// of letters and digits, without stopwords.
func queryTerms(q string) []string {
	var terms []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if stopwords[w] || seen[w] || (len(w) < 2 && !unicode.IsDigit(rune(w[0]))) {
			continue
		}
		seen[w] = true
		terms = append(terms, w)
		if len(terms) == maxQueryTerms {
			break
		}
	}
	return terms
}

// fullText ranks chunks of bases by terms (any of them): SQLite FTS5's
// bm25, PostgreSQL's ts_rank_cd.
func (ix *Index) fullText(ctx context.Context, bases, terms []string, limit int) ([]ranked, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	args := []any{nil}
	in := make([]string, len(bases))
	for i, b := range bases {
		args = append(args, b)
		in[i] = fmt.Sprintf("$%d", i+2)
	}
	args = append(args, limit)
	lim := fmt.Sprintf("$%d", len(args))
	var query string
	if ix.db.Dialect == dbutil.Postgres {
		args[0] = strings.Join(terms, " | ")
		query = `SELECT rid, id, base, path, start_line, end_line, heading, content, ts_rank_cd(tsv, q, 1) AS score
			FROM knowledge_chunk, to_tsquery('english', $1) q
			WHERE tsv @@ q AND base IN (` + strings.Join(in, ", ") + `)
			ORDER BY score DESC, id LIMIT ` + lim
	} else {
		quoted := make([]string, len(terms))
		for i, t := range terms {
			quoted[i] = `"` + t + `"`
		}
		args[0] = strings.Join(quoted, " OR ")
		query = `SELECT c.rid, c.id, c.base, c.path, c.start_line, c.end_line, c.heading, c.content, -bm25(knowledge_fts, 2.0, 1.0) AS score
			FROM knowledge_fts JOIN knowledge_chunk c ON c.rid = knowledge_fts.rowid
			WHERE knowledge_fts MATCH $1 AND c.base IN (` + strings.Join(in, ", ") + `)
			ORDER BY score DESC, c.id LIMIT ` + lim
	}
	rows, err := ix.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("failed to search knowledge: %w", err)
	}
	defer rows.Close()
	var out []ranked
	for rows.Next() {
		var r ranked
		c := &r.chunk
		if err := rows.Scan(&r.rid, &c.ID, &c.Base, &c.Path, &c.StartLine, &c.EndLine, &c.Heading, &c.Text, &r.score); err != nil {
			return nil, fmt.Errorf("failed to search knowledge: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to search knowledge: %w", err)
	}
	return out, nil
}

// vectorSet is the vectors of one base's chunks, held in memory.
type vectorSet struct {
	// stamp is the base's last indexing time (knowledge_base.indexed_at)
	// when the vectors were loaded: another Index on the database (hookroom
	// knowledge reindex next to the server) changes it.
	stamp int64
	rids  []int64
	vecs  [][]float32
	norms []float64
}

func (ix *Index) dropVectors(base string) {
	ix.vecMu.Lock()
	defer ix.vecMu.Unlock()
	delete(ix.vectors, base)
}

// vectorsOf returns base's vectors, loading them on first use and again
// after any Index on the database re-indexed the base.
func (ix *Index) vectorsOf(ctx context.Context, base string) (*vectorSet, error) {
	ix.vecMu.Lock()
	defer ix.vecMu.Unlock()
	var stamp int64
	if err := ix.db.QueryRow(ctx, `SELECT COALESCE(MAX(indexed_at), 0) FROM knowledge_base WHERE base=$1`, base).Scan(&stamp); err != nil {
		return nil, fmt.Errorf("failed to load the vectors of %s: %w", base, err)
	}
	if vs := ix.vectors[base]; vs != nil && vs.stamp == stamp {
		return vs, nil
	}
	rows, err := ix.db.Query(ctx, `SELECT rid, embedding FROM knowledge_chunk WHERE base=$1 AND embedding IS NOT NULL ORDER BY rid`, base)
	if err != nil {
		return nil, fmt.Errorf("failed to load the vectors of %s: %w", base, err)
	}
	defer rows.Close()
	vs := &vectorSet{stamp: stamp}
	for rows.Next() {
		var rid int64
		var raw []byte
		if err := rows.Scan(&rid, &raw); err != nil {
			return nil, fmt.Errorf("failed to load the vectors of %s: %w", base, err)
		}
		v := decodeVector(raw)
		vs.rids, vs.vecs, vs.norms = append(vs.rids, rid), append(vs.vecs, v), append(vs.norms, norm(v))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failed to load the vectors of %s: %w", base, err)
	}
	ix.vectors[base] = vs
	return vs, nil
}

// nearest ranks the chunks of bases by cosine similarity to the query's
// vector.
func (ix *Index) nearest(ctx context.Context, bases []string, query string, limit int) ([]ranked, error) {
	qv, err := ix.embedder.Embed(ctx, []string{query})
	if err != nil {
		return nil, fmt.Errorf("failed to embed the query: %w", err)
	}
	if len(qv) != 1 {
		return nil, fmt.Errorf("failed to embed the query: %d vectors for 1 text", len(qv))
	}
	q, qn := qv[0], norm(qv[0])
	if qn == 0 {
		return nil, nil
	}
	var out []ranked
	for _, b := range bases {
		vs, err := ix.vectorsOf(ctx, b)
		if err != nil {
			return nil, err
		}
		for i, v := range vs.vecs {
			if len(v) != len(q) || vs.norms[i] == 0 {
				continue
			}
			out = append(out, ranked{rid: vs.rids[i], score: dot(q, v) / (qn * vs.norms[i])})
		}
	}
	slices.SortFunc(out, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.rid, b.rid))
	})
	return out[:min(len(out), limit)], nil
}

// fuse merges the full-text and vector rankings by reciprocal rank and
// fetches the chunks only the vector ranking found.
func (ix *Index) fuse(ctx context.Context, text, near []ranked, limit int) ([]Hit, error) {
	type fused struct {
		ranked
		score float64
	}
	byRID := map[int64]*fused{}
	for i, r := range text {
		byRID[r.rid] = &fused{ranked: r, score: 1.0 / float64(rrfK+i+1)}
	}
	var missing []int64
	for i, r := range near {
		f := byRID[r.rid]
		if f == nil {
			f = &fused{ranked: r}
			byRID[r.rid] = f
			missing = append(missing, r.rid)
		}
		f.score += 1.0 / float64(rrfK+i+1)
	}
	if len(missing) > 0 {
		chunks, err := ix.chunksByRID(ctx, missing)
		if err != nil {
			return nil, err
		}
		for rid, c := range chunks {
			byRID[rid].chunk = c
		}
	}
	all := make([]*fused, 0, len(byRID))
	for _, f := range byRID {
		if f.chunk.ID != "" {
			all = append(all, f)
		}
	}
	slices.SortFunc(all, func(a, b *fused) int {
		return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.chunk.ID, b.chunk.ID))
	})
	out := make([]Hit, 0, min(len(all), limit))
	for _, f := range all[:min(len(all), limit)] {
		out = append(out, Hit{Chunk: f.chunk, Score: f.score})
	}
	return out, nil
}

func (ix *Index) chunksByRID(ctx context.Context, rids []int64) (map[int64]Chunk, error) {
	args := make([]any, len(rids))
	in := make([]string, len(rids))
	for i, r := range rids {
		args[i], in[i] = r, fmt.Sprintf("$%d", i+1)
	}
	rows, err := ix.db.Query(ctx, `SELECT rid, id, base, path, start_line, end_line, heading, content
		FROM knowledge_chunk WHERE rid IN (`+strings.Join(in, ", ")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("failed to read knowledge chunks: %w", err)
	}
	defer rows.Close()
	out := map[int64]Chunk{}
	for rows.Next() {
		var rid int64
		var c Chunk
		if err := rows.Scan(&rid, &c.ID, &c.Base, &c.Path, &c.StartLine, &c.EndLine, &c.Heading, &c.Text); err != nil {
			return nil, fmt.Errorf("failed to read knowledge chunks: %w", err)
		}
		out[rid] = c
	}
	return out, rows.Err()
}

func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func norm(v []float32) float64 { return math.Sqrt(dot(v, v)) }
