package memory

import (
	"net/http"
	"slices"
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

// Texts of the hybrid ranking test. The query shares three words with
// lexical and one with semantic; the scripted embedding model puts semantic
// next to the query and lexical nowhere near it.
const (
	hybridQuery = "What food should I cook for Alice?"
	lexical     = "Alice cooks food for the food bank every week"
	semantic    = "Alice is allergic to peanuts"
	distractor  = "Bob likes jazz"
)

func scriptHybrid(srv *llmtest.Server) {
	srv.SetEmbedding(hybridQuery, []float32{1, 0, 0, 0})
	srv.SetEmbedding(semantic, []float32{0.9, 0.1, 0, 0})
	srv.SetEmbedding(lexical, []float32{0, 0, 1, 0})
	srv.SetEmbedding(distractor, []float32{0, 0, 0, 1})
}

// With embeddings, the semantic neighbour that both rankings find beats the
// memory that only matches the words; full text alone ranks them the other
// way round.
func TestHybridRanking(t *testing.T) {
	srv := llmtest.NewServer(t)
	scriptHybrid(srv)
	emb := NewHTTPEmbedderWithKey(srv.URL, "scripted", "", 0, nil)
	dbtest.ForStores(t, newStore(emb), func(t *testing.T, db *dbutil.Database, s *Store) {
		ctx := t.Context()
		who := Who{Agent: helper, Person: alice, Room: roomA}
		for _, text := range []string{lexical, semantic, distractor} {
			remember(t, s, who, ScopePerson, text)
		}
		textOnly := New(db, Config{}, nil)
		textOnly.Configure(map[hooks.AgentName]Options{helper: allScopes})
		got, err := textOnly.Recall(ctx, who, hybridQuery, 5)
		if want := []string{lexical, semantic}; err != nil || !slices.Equal(texts(got), want) {
			t.Errorf("full text alone = %q, %v; want %q", texts(got), err, want)
		}
		got, err = s.Recall(ctx, who, hybridQuery, 5)
		if want := []string{semantic, lexical}; err != nil || !slices.Equal(texts(got), want) {
			t.Errorf("hybrid = %q, %v; want %q", texts(got), err, want)
		}
		if len(got) == 2 && got[0].Score <= got[1].Score {
			t.Errorf("scores %v, %v: want the first higher", got[0].Score, got[1].Score)
		}
		// A memory no word matches is found by meaning alone.
		srv.SetEmbedding("nuts", []float32{0.8, 0.2, 0, 0})
		got, err = s.Recall(ctx, who, "nuts", 1)
		if err != nil || !slices.Equal(texts(got), []string{semantic}) {
			t.Errorf("Recall(nuts) = %q, %v; want the semantic neighbour", texts(got), err)
		}
	})
}

// When the embeddings endpoint fails, Remember stores without a vector and
// Recall ranks by full text; Backfill embeds what was missed.
func TestEmbeddingsDown(t *testing.T) {
	srv := llmtest.NewServer(t)
	scriptHybrid(srv)
	emb := NewHTTPEmbedderWithKey(srv.URL, "scripted", "", 0, nil)
	dbtest.ForStores(t, newStore(emb), func(t *testing.T, db *dbutil.Database, s *Store) {
		ctx := t.Context()
		who := Who{Agent: helper, Person: alice, Room: roomA}
		down := llmtest.Reply{Status: http.StatusServiceUnavailable}
		srv.ScriptEmbeddings(down, down, down, down)
		for _, text := range []string{lexical, semantic, distractor} {
			remember(t, s, who, ScopePerson, text)
		}
		got, err := s.Recall(ctx, who, hybridQuery, 5)
		if want := []string{lexical, semantic}; err != nil || !slices.Equal(texts(got), want) {
			t.Errorf("Recall with the endpoint down = %q, %v; want full-text order %q", texts(got), err, want)
		}
		n, err := s.Backfill(ctx, 2)
		if err != nil || n != 2 {
			t.Fatalf("Backfill = %d, %v; want 2", n, err)
		}
		if n, err = s.Backfill(ctx, 2); err != nil || n != 1 {
			t.Fatalf("second Backfill = %d, %v; want 1", n, err)
		}
		if n, err = s.Backfill(ctx, 2); err != nil || n != 0 {
			t.Fatalf("third Backfill = %d, %v; want 0", n, err)
		}
		got, err = s.Recall(ctx, who, hybridQuery, 5)
		if want := []string{semantic, lexical}; err != nil || !slices.Equal(texts(got), want) {
			t.Errorf("Recall after Backfill = %q, %v; want %q", texts(got), err, want)
		}
	})
}

// What is said in an encrypted room never reaches the embeddings endpoint.
func TestEncryptedRoomsAreNotEmbedded(t *testing.T) {
	srv := llmtest.NewServer(t)
	emb := NewHTTPEmbedderWithKey(srv.URL, "scripted", "", 0, nil)
	dbtest.ForStores(t, newStore(emb), func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		before := srv.EmbeddingCount()
		who := Who{Agent: helper, Person: alice, Room: roomA, Encrypted: true}
		m := remember(t, s, who, ScopePerson, "alice's secret project is called bluebird")
		if !m.Encrypted {
			t.Error("memory not marked encrypted")
		}
		got, err := s.Recall(ctx, who, "bluebird project", 5)
		if err != nil || len(got) != 1 {
			t.Errorf("Recall = %q, %v", texts(got), err)
		}
		if n, err := s.Backfill(ctx, 10); err != nil || n != 0 {
			t.Errorf("Backfill = %d, %v; want 0", n, err)
		}
		if n := srv.EmbeddingCount() - before; n != 0 {
			t.Errorf("%d embeddings requests for an encrypted room", n)
		}
		// The same person in an unencrypted room: the query is embedded, the
		// encrypted room's memory still is not.
		got, err = s.Recall(ctx, Who{Agent: helper, Person: alice, Room: roomB}, "bluebird project", 5)
		if err != nil || len(got) != 1 {
			t.Errorf("Recall elsewhere = %q, %v", texts(got), err)
		}
		for _, r := range srv.EmbeddingRequests() {
			if slices.Contains(r.Input, m.Text) {
				t.Errorf("the encrypted room's memory was sent: %q", r.Input)
			}
		}
	})
}
