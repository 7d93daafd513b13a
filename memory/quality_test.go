package memory

import (
	"encoding/json"
	"os"
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/dbtest"
)

// recallFixture is testdata/recall.json: one person's facts, questions that
// paraphrase them, and distractors (another person's memories, which must
// never come back, and small talk in the same scope).
type recallFixture struct {
	Facts []struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	} `json:"facts"`
	OtherPerson []string `json:"distractors_other_person"`
	SameScope   []string `json:"distractors_same_scope"`
	Questions   []struct {
		Q    string `json:"q"`
		Fact string `json:"fact"`
	} `json:"questions"`
}

// Retrieval quality: recall@5 of the questions' facts, with full text alone
// and with (llmtest's bag-of-words) embeddings; both must reach 0.9.
func TestRecallQuality(t *testing.T) {
	raw, err := os.ReadFile("testdata/recall.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx recallFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Facts) < 50 || len(fx.Questions) < 50 {
		t.Fatalf("fixture has %d facts and %d questions; want at least 50 each", len(fx.Facts), len(fx.Questions))
	}
	srv := llmtest.NewServer(t)
	for _, mode := range []struct {
		name string
		emb  Embedder
	}{
		{"full text", nil},
		{"hybrid", NewHTTPEmbedderWithKey(srv.URL, "bag-of-words", "", 0, nil)},
	} {
		t.Run(mode.name, func(t *testing.T) {
			dbtest.ForStores(t, newStore(mode.emb), func(t *testing.T, _ *dbutil.Database, s *Store) {
				aliceA := Who{Agent: helper, Person: alice, Room: roomA}
				byID := map[string]string{}
				for _, f := range fx.Facts {
					byID[f.ID] = remember(t, s, aliceA, ScopePerson, f.Text).ID
				}
				for _, text := range fx.SameScope {
					remember(t, s, aliceA, ScopePerson, text)
				}
				others := map[string]bool{}
				for _, text := range fx.OtherPerson {
					others[remember(t, s, Who{Agent: helper, Person: bob, Room: roomA}, ScopePerson, text).ID] = true
				}
				hits := 0
				for _, q := range fx.Questions {
					want, ok := byID[q.Fact]
					if !ok {
						t.Fatalf("question %q names unknown fact %q", q.Q, q.Fact)
					}
					got, err := s.Recall(t.Context(), aliceA, q.Q, 5)
					if err != nil {
						t.Fatal(err)
					}
					found := false
					for _, m := range got {
						found = found || m.ID == want
						if others[m.ID] {
							t.Errorf("%q recalled another person's memory %q", q.Q, m.Text)
						}
					}
					if found {
						hits++
					} else {
						t.Logf("miss: %q → %q", q.Q, texts(got))
					}
				}
				r := float64(hits) / float64(len(fx.Questions))
				t.Logf("recall@5 (%s): %.3f (%d/%d)", mode.name, r, hits, len(fx.Questions))
				if r < 0.9 {
					t.Errorf("recall@5 = %.3f, want >= 0.9", r)
				}
			})
		})
	}
}
