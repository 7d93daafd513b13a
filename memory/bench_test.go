package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

// benchVocabulary is the words of the recall fixture (about 400), the
// benchmark's memories and queries draw from: a realistic spread, where a
// few words (the, person, is…) are in most memories and most words in few.
func benchVocabulary(tb testing.TB) []string {
	raw, err := os.ReadFile("testdata/recall.json")
	if err != nil {
		tb.Fatal(err)
	}
	var fx recallFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		tb.Fatal(err)
	}
	var words []string
	add := func(text string) {
		for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) }) {
			if !slices.Contains(words, w) {
				words = append(words, w)
			}
		}
	}
	for _, f := range fx.Facts {
		add(f.Text)
	}
	for _, text := range append(fx.OtherPerson, fx.SameScope...) {
		add(text)
	}
	for _, q := range fx.Questions {
		add(q.Q)
	}
	return words
}

// fill stores n memories over n/100 people (person scope) of agent helper,
// with one SQL statement per memory in a single transaction: "The person "
// and 6 to 12 words of the vocabulary.
func fill(tb testing.TB, s *Store, vocabulary []string, n int, vectors bool) {
	tb.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	err := s.db.DoTxn(tb.Context(), nil, func(ctx context.Context) error {
		for i := range n {
			person := fmt.Sprintf("@p%d:x", i/100)
			words := []string{"The person"}
			for range 6 + r.IntN(7) {
				words = append(words, vocabulary[r.IntN(len(vocabulary))])
			}
			text := strings.Join(words, " ") + fmt.Sprintf(" (%d)", i)
			sum := sha256.Sum256([]byte(text))
			var vec []byte
			model := ""
			if vectors {
				v := make([]float32, 256)
				for j := range v {
					v[j] = r.Float32() - 0.5
				}
				vec, model = encodeVector(v), s.model
			}
			if _, err := s.db.Exec(ctx, `INSERT INTO memory (id, agent, scope, owner, author, room, text, text_hash, scope_key,
				source, encrypted, created_at, embedding, embedding_model) VALUES ($1, $2, 'person', $3, $3, '!r:x', $4, $5, $6,
				'bench', $7, $8, $9, $10)`, fmt.Sprintf("b%d", i), string(helper), person, text, hex.EncodeToString(sum[:]),
				scopeKey(helper, ScopePerson, person), false, int64(i), vec, model); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

type constEmbedder struct{ v []float32 }

func (e constEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i := range out {
		out[i] = e.v
	}
	return out, nil
}

// BenchmarkRecall measures Recall over 100,000 memories (1,000 people with
// 100 each) and reports the 95th percentile (target: 10 ms).
func BenchmarkRecall(b *testing.B) {
	for _, d := range []dbtest.Dialect{dbtest.SQLite, dbtest.Postgres} {
		for _, hybrid := range []bool{false, true} {
			name := d.Name + "/full-text"
			if hybrid {
				name = d.Name + "/hybrid"
			}
			b.Run(name, func(b *testing.B) {
				var emb Embedder
				if hybrid {
					v := make([]float32, 256)
					v[0] = 1
					emb = constEmbedder{v}
				}
				s := New(d.Fresh(b), Config{}, emb)
				s.Configure(map[hooks.AgentName]Options{helper: {Enabled: true}})
				if err := s.Upgrade(b.Context()); err != nil {
					b.Fatal(err)
				}
				vocabulary := benchVocabulary(b)
				fill(b, s, vocabulary, 100_000, hybrid)
				r := rand.New(rand.NewPCG(3, 4))
				var questions []string
				for range 200 {
					q := []string{"what"}
					for range 3 + r.IntN(4) {
						q = append(q, vocabulary[r.IntN(len(vocabulary))])
					}
					questions = append(questions, strings.Join(q, " ")+"?")
				}
				durations := make([]time.Duration, 0, b.N)
				b.ResetTimer()
				for b.Loop() {
					who := Who{Agent: helper, Person: id.UserID(fmt.Sprintf("@p%d:x", r.IntN(1000))), Room: "!r:x"}
					q := questions[r.IntN(len(questions))]
					t0 := time.Now()
					got, err := s.Recall(b.Context(), who, q, 5)
					durations = append(durations, time.Since(t0))
					if err != nil {
						b.Fatalf("Recall = %d memories, %v", len(got), err)
					}
				}
				slices.Sort(durations)
				p95 := durations[len(durations)*95/100]
				b.ReportMetric(float64(p95.Microseconds())/1000, "p95-ms")
			})
		}
	}
}
