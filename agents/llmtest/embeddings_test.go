package llmtest_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/hookroom/hookroom/agents/llmtest"
)

func cos(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// The vectors are a deterministic hashed bag of words: the same text gives
// the same unit vector, texts sharing words are nearer than texts that share
// none.
func TestEmbeddingIsABagOfWords(t *testing.T) {
	a := llmtest.Embedding("Alice likes green tea", 0)
	if len(a) != llmtest.EmbeddingDimensions {
		t.Fatalf("len = %d, want %d", len(a), llmtest.EmbeddingDimensions)
	}
	if c := cos(a, llmtest.Embedding("alice LIKES green tea!", 0)); math.Abs(c-1) > 1e-6 {
		t.Errorf("same words, other case and punctuation: cosine %v, want 1", c)
	}
	near := cos(a, llmtest.Embedding("Alice likes tea", 0))
	far := cos(a, llmtest.Embedding("Bob repairs trucks", 0))
	if near < 0.8 || math.Abs(far) > 0.2 {
		t.Errorf("cosine with a similar text %v (want >= 0.8), with an unrelated one %v (want about 0)", near, far)
	}
	if c := cos(llmtest.Embedding("cats", 0), llmtest.Embedding("cat", 0)); math.Abs(c-1) > 1e-6 {
		t.Errorf("plural: cosine %v, want 1", c)
	}
	if v := llmtest.Embedding("", 8); len(v) != 8 || cos(v, v) != 0 {
		t.Errorf("empty text = %v, want the zero vector of 8", v)
	}
}

// A real OpenAI client gets one vector per input, in order, and the request
// is recorded.
func TestEmbeddingsWithAnOpenAIClient(t *testing.T) {
	s := llmtest.NewServer(t)
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = s.URL
	client := openai.NewClientWithConfig(cfg)
	resp, err := client.CreateEmbeddings(t.Context(), openai.EmbeddingRequestStrings{
		Input: []string{"alice likes tea", "bob repairs trucks"}, Model: "nomic-embed-text",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Data) != 2 || resp.Data[1].Index != 1 {
		t.Fatalf("data = %+v", resp.Data)
	}
	for i, text := range []string{"alice likes tea", "bob repairs trucks"} {
		if c := cos(resp.Data[i].Embedding, llmtest.Embedding(text, 0)); math.Abs(c-1) > 1e-6 {
			t.Errorf("vector %d: cosine with Embedding(%q) = %v", i, text, c)
		}
	}
	reqs := s.EmbeddingRequests()
	if len(reqs) != 1 || reqs[0].Model != "nomic-embed-text" || len(reqs[0].Input) != 2 ||
		reqs[0].Header.Get("Authorization") != "Bearer sk-test" || s.EmbeddingCount() != 1 {
		t.Errorf("recorded %+v", reqs)
	}
	if s.Count() != 0 {
		t.Errorf("embeddings counted as chat requests: %d", s.Count())
	}
}

func TestEmbeddingsWire(t *testing.T) {
	s := llmtest.NewServer(t)
	s.SetEmbedding("fixed", []float32{1, 0, 0})

	type answer struct {
		Object string `json:"object"`
		Data   []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	for _, tc := range []struct {
		name, body string
		status     int
		check      func(t *testing.T, a answer)
	}{
		{"single string, dimensions", `{"model":"m","input":"one two","dimensions":16}`, 200, func(t *testing.T, a answer) {
			var v []float32
			if err := json.Unmarshal(a.Data[0].Embedding, &v); err != nil || len(v) != 16 {
				t.Errorf("vector %s: %v", a.Data[0].Embedding, err)
			}
		}},
		{"fixed vector", `{"model":"m","input":["fixed"]}`, 200, func(t *testing.T, a answer) {
			if string(a.Data[0].Embedding) != "[1,0,0]" {
				t.Errorf("vector %s, want [1,0,0]", a.Data[0].Embedding)
			}
		}},
		{"base64", `{"model":"m","input":["fixed"],"encoding_format":"base64"}`, 200, func(t *testing.T, a answer) {
			var s string
			_ = json.Unmarshal(a.Data[0].Embedding, &s)
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(b) != 12 || math.Float32frombits(binary.LittleEndian.Uint32(b)) != 1 {
				t.Errorf("base64 vector %q: %v", s, err)
			}
		}},
		{"token input", `{"model":"m","input":[[1,2,3]]}`, 400, nil},
		{"no model", `{"input":"x"}`, 400, nil},
		{"not json", `{`, 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := postTo(t, s.URL+"/embeddings", tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			var a answer
			if err := json.Unmarshal(body, &a); err != nil {
				t.Fatalf("body %s: %v", body, err)
			}
			if tc.status != 200 {
				if a.Error == nil || !strings.Contains(a.Error.Message, "llmtest") {
					t.Errorf("error body %s", body)
				}
				return
			}
			if a.Object != "list" || len(a.Data) == 0 {
				t.Fatalf("answer %s", body)
			}
			tc.check(t, a)
		})
	}
}

// Scripted replies answer the next requests with errors or garbage; then the
// server answers normally again.
func TestEmbeddingsScript(t *testing.T) {
	s := llmtest.NewServer(t)
	s.ScriptEmbeddings(
		llmtest.Reply{Status: http.StatusServiceUnavailable, ErrMessage: "loading model"},
		llmtest.Reply{Garbage: []string{"<html>"}},
		llmtest.Reply{EmptyChoices: true},
	)
	const body = `{"model":"m","input":["a"]}`
	resp, out := postTo(t, s.URL+"/embeddings", body)
	if resp.StatusCode != 503 || !strings.Contains(string(out), "loading model") {
		t.Errorf("first: %d %s", resp.StatusCode, out)
	}
	if _, out = postTo(t, s.URL+"/embeddings", body); string(out) != "<html>" {
		t.Errorf("second: %s", out)
	}
	if _, out = postTo(t, s.URL+"/embeddings", body); !strings.Contains(string(out), `"data":[]`) {
		t.Errorf("third: %s", out)
	}
	if resp, out = postTo(t, s.URL+"/embeddings", body); resp.StatusCode != 200 || !strings.Contains(string(out), `"index":0`) {
		t.Errorf("fourth: %d %s", resp.StatusCode, out)
	}
	if n := s.EmbeddingCount(); n != 4 {
		t.Errorf("EmbeddingCount = %d, want 4", n)
	}
}
