package memory

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
)

// rrfK is the constant of reciprocal-rank fusion: a memory ranked r in a
// list scores 1/(rrfK+r). 60 is the value of the original paper (Cormack et
// al., 2009); it keeps one list's top rank from drowning the other list.
const rrfK = 60

// candidatesPer is how many candidates each ranking contributes per
// recalled memory.
const candidatesPer = 4

// maxQueryTerms bounds the words of a query that are searched for.
const maxQueryTerms = 32

// Recall returns the memories of who most relevant to query, at most limit
// (0: the agent's recall_limit), best first. It sees only what who may see
// (see List) in the scopes the agent has enabled, and nothing when the
// agent has no memory.
//
// Ranking: full-text search (SQLite FTS5's bm25 with porter stemming;
// PostgreSQL's ts_rank over the english configuration) for any of the
// query's words, stop words left out. With an embedder (and not in an
// encrypted room) the query is embedded too, every vector of the visible
// memories is compared with it in Go (cosine similarity above
// min_similarity), and the two rankings are fused by reciprocal rank: a
// memory scores the sum of 1/(60+rank) over the rankings it is in, ties
// going to the semantically closer one. A memory that both rankings find
// thus beats one only the words match. When the embeddings endpoint fails,
// Recall logs a warning (zerolog.Ctx) and ranks by full text alone.
func (s *Store) Recall(ctx context.Context, who Who, query string, limit int) ([]Memory, error) {
	opts := s.Options(who.Agent)
	if !opts.Enabled {
		return nil, nil
	}
	if limit <= 0 {
		limit = opts.recallLimit()
	}
	scopes := opts.scopes()
	n := limit * candidatesPer
	text, err := s.searchText(ctx, who, scopes, queryTerms(query), n)
	if err != nil {
		return nil, err
	}
	var semantic []ranked
	if s.embedder != nil && !who.Encrypted && strings.TrimSpace(query) != "" {
		vs, err := s.embedder.Embed(ctx, []string{Normalize(query, s.cfg.maxTextLength())})
		if err != nil || len(vs) != 1 {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("memory: embeddings unavailable, recall ranks by full text alone")
		} else if semantic, err = s.searchVectors(ctx, who, scopes, vs[0], n); err != nil {
			return nil, err
		}
	}
	return fuse(text, semantic, limit), nil
}

// ranked is a memory with its similarity (semantic ranking only).
type ranked struct {
	Memory
	sim float64
}

// fuse merges the rankings by reciprocal rank (see Recall).
func fuse(text, semantic []ranked, limit int) []Memory {
	type entry struct {
		m     Memory
		score float64
		sim   float64
	}
	byID := map[string]*entry{}
	var order []*entry
	add := func(list []ranked) {
		for r, x := range list {
			e, ok := byID[x.ID]
			if !ok {
				e = &entry{m: x.Memory}
				byID[x.ID] = e
				order = append(order, e)
			}
			e.score += 1 / float64(rrfK+r+1)
			e.sim = max(e.sim, x.sim)
		}
	}
	add(text)
	add(semantic)
	slices.SortStableFunc(order, func(a, b *entry) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(b.sim, a.sim)
	})
	out := make([]Memory, 0, min(limit, len(order)))
	for _, e := range order[:min(limit, len(order))] {
		e.m.Score = e.score
		out = append(out, e.m)
	}
	return out
}

// searchText ranks the visible memories that contain any of terms.
func (s *Store) searchText(ctx context.Context, who Who, scopes []Scope, terms []string, n int) ([]ranked, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	clause, args := visible(who, scopes, 3)
	if clause == "" {
		return nil, nil
	}
	var q string
	var match string
	switch s.db.Dialect {
	case dbutil.Postgres:
		// Words only ([\pL\pN]+), so the text is a valid tsquery.
		match = strings.Join(terms, " | ")
		q = `SELECT ` + memoryColumns + ` FROM memory m, to_tsquery('english', $1) q
			WHERE m.tsv @@ q AND ` + clause + ` ORDER BY ts_rank(m.tsv, q) DESC, m.seq DESC LIMIT $2`
	default:
		// The index holds each memory's scope key beside its text, so the
		// engine intersects the query's words with the visible scopes' keys
		// before ranking; the join re-checks visibility all the same.
		keys := scopeKeys(who, scopes)
		match = `text: ("` + strings.Join(terms, `" OR "`) + `") AND scope_key: ("` + strings.Join(keys, `" OR "`) + `")`
		q = `SELECT ` + memoryColumns + ` FROM memory_fts JOIN memory m ON m.seq = memory_fts.rowid
			WHERE memory_fts MATCH $1 AND ` + clause + ` ORDER BY bm25(memory_fts, 1.0, 0.0), m.seq DESC LIMIT $2`
	}
	mems, err := s.query(ctx, q, append([]any{match, n}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("failed to search memories: %w", err)
	}
	out := make([]ranked, len(mems))
	for i, m := range mems {
		out[i] = ranked{Memory: m}
	}
	return out, nil
}

// scopeKeys are the scope keys of what who may see in scopes.
func scopeKeys(who Who, scopes []Scope) []string {
	var keys []string
	for _, sc := range scopes {
		owner, err := ownerOf(who, sc)
		if err != nil {
			continue
		}
		keys = append(keys, scopeKey(who.Agent, sc, owner))
	}
	return keys
}

// searchVectors ranks the visible memories with a vector of the current
// embedder by cosine similarity to qv, best n above min_similarity.
func (s *Store) searchVectors(ctx context.Context, who Who, scopes []Scope, qv []float32, n int) ([]ranked, error) {
	clause, args := visible(who, scopes, 2)
	if clause == "" {
		return nil, nil
	}
	rows, err := s.db.Query(ctx, `SELECT `+memoryColumns+`, m.embedding FROM memory m
		WHERE m.embedding IS NOT NULL AND m.embedding_model=$1 AND `+clause, append([]any{s.model}, args...)...)
	minSim := s.cfg.Embeddings.MinSimilarity
	list, err := dbutil.NewRowIterWithError(rows, func(r dbutil.Scannable) (ranked, error) {
		var blob []byte
		m, err := scanMemory(r, &blob)
		if err != nil {
			return ranked{}, err
		}
		v, err := decodeVector(blob)
		if err != nil {
			return ranked{}, nil // a damaged vector ranks nowhere
		}
		return ranked{Memory: m, sim: cosine(qv, v)}, nil
	}, err).AsList()
	if err != nil {
		return nil, fmt.Errorf("failed to read memory vectors: %w", err)
	}
	list = slices.DeleteFunc(list, func(r ranked) bool { return r.ID == "" || r.sim <= minSim })
	slices.SortStableFunc(list, func(a, b ranked) int {
		if c := cmp.Compare(b.sim, a.sim); c != 0 {
			return c
		}
		return cmp.Compare(b.CreatedAt.UnixMilli(), a.CreatedAt.UnixMilli())
	})
	return list[:min(n, len(list))], nil
}

// queryTerms are the words of query worth searching for: lower-cased runs
// of letters and digits, stop words and duplicates left out, at most
// maxQueryTerms.
func queryTerms(query string) []string {
	var terms []string
	for _, w := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	}) {
		if len(w) > 64 || stopWords[w] || slices.Contains(terms, w) {
			continue
		}
		terms = append(terms, w)
		if len(terms) == maxQueryTerms {
			break
		}
	}
	return terms
}

// stopWords are English words too common to rank by (PostgreSQL's english
// configuration drops the same kind); leaving them out keeps SQLite from
// walking nearly every memory for "what is my …". "person" is one here:
// extracted memories are written about "the person".
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because been
		before being below between both but by can could did do does doing down during each few for from further had
		has have having he her here hers herself him himself his how i if in into is it its itself just me more most
		my myself no nor not now of off on once only or other our ours ourselves out over own same she should so some
		such than that the their theirs them themselves then there these they this those through to too under until
		up very was we were what when where which while who whom why will with would you your yours yourself
		yourselves s t d ll m re ve person`) {
		m[w] = true
	}
	return m
}()
