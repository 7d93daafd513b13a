package memory

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents/llmtest"
)

const testKey = "sk-very-secret-key"

// The client against llmtest's /v1/embeddings: the real wire format, one
// vector per text, in order, batched.
func TestHTTPEmbedder(t *testing.T) {
	srv := llmtest.NewServer(t)
	e := NewHTTPEmbedderWithKey(srv.URL+"/", "nomic-embed-text", testKey, 0, nil)
	e.MaxBatch = 2
	texts := []string{"alice likes tea", "bob repairs trucks", "alice likes green tea"}
	vecs, err := e.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 {
		t.Fatalf("%d vectors", len(vecs))
	}
	for i, text := range texts {
		if c := cosine(vecs[i], llmtest.Embedding(text, 0)); math.Abs(c-1) > 1e-6 {
			t.Errorf("vector %d is not the server's for %q (cosine %v)", i, text, c)
		}
	}
	if near, far := cosine(vecs[0], vecs[2]), cosine(vecs[0], vecs[1]); near <= far {
		t.Errorf("similar texts %v not nearer than unrelated ones %v", near, far)
	}
	reqs := srv.EmbeddingRequests()
	if len(reqs) != 2 || len(reqs[0].Input) != 2 || len(reqs[1].Input) != 1 || reqs[0].Model != "nomic-embed-text" ||
		reqs[0].Header.Get("Authorization") != "Bearer "+testKey || reqs[0].Path != "/v1/embeddings" {
		t.Errorf("requests %+v", reqs)
	}
}

// Failures are errors naming the endpoint, never holding the key.
func TestHTTPEmbedderErrors(t *testing.T) {
	srv := llmtest.NewServer(t)
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	// Only the timeout case has a short timeout: on a loaded machine 50 ms
	// can pass before any answer, and a request given up on would leave its
	// scripted reply to the next case.
	for _, tc := range []struct {
		name    string
		reply   llmtest.Reply
		timeout time.Duration
		want    string
	}{
		{"HTTP error echoing the key", llmtest.Reply{Status: http.StatusUnauthorized, ErrMessage: "bad key " + testKey}, time.Minute, "HTTP 401: bad key REDACTED"},
		{"garbage", llmtest.Reply{Garbage: []string{"<html>oops"}}, time.Minute, "answer is not an embeddings list"},
		{"missing vectors", llmtest.Reply{EmptyChoices: true}, time.Minute, "asked for 1 vectors, got 0"},
		{"truncated", llmtest.Reply{Truncate: true}, time.Minute, "answer is not an embeddings list"},
		{"timeout", llmtest.Reply{Hold: hold}, 50 * time.Millisecond, "no answer within 50ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.ScriptEmbeddings(tc.reply)
			e := NewHTTPEmbedderWithKey(srv.URL, "m", testKey, tc.timeout, nil)
			_, err := e.Embed(t.Context(), []string{"x"})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, srv.URL+"/embeddings") || !strings.Contains(msg, tc.want) || strings.Contains(msg, testKey) {
				t.Errorf("error %q: want the endpoint and %q, and never the key", msg, tc.want)
			}
		})
	}
	// A server that is not there.
	e := NewHTTPEmbedderWithKey("http://127.0.0.1:1/v1", "m", testKey, time.Second, nil)
	if _, err := e.Embed(t.Context(), []string{"x"}); err == nil || !strings.Contains(err.Error(), "http://127.0.0.1:1/v1/embeddings") {
		t.Errorf("unreachable server: %v", err)
	}
}

func TestNewHTTPEmbedderReadsTheKeyFromTheEnvironment(t *testing.T) {
	srv := llmtest.NewServer(t)
	t.Setenv("HOOKROOM_TEST_EMBED_KEY", testKey)
	e, err := NewHTTPEmbedder(EmbeddingsOptions{BaseURL: srv.URL, Model: "m", APIKeyEnv: "HOOKROOM_TEST_EMBED_KEY"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Embed(t.Context(), []string{"x"}); err != nil {
		t.Fatal(err)
	}
	if h := srv.EmbeddingRequests()[0].Header.Get("Authorization"); h != "Bearer "+testKey {
		t.Errorf("Authorization %q", h)
	}
	if _, err := NewHTTPEmbedder(EmbeddingsOptions{}, nil); err == nil {
		t.Error("an embedder without base_url")
	}
}

func TestVectorEncoding(t *testing.T) {
	v := []float32{1, -0.5, 3.25e-8, 0}
	got, err := decodeVector(encodeVector(v))
	if err != nil || len(got) != 4 || got[0] != 1 || got[1] != -0.5 || got[2] != 3.25e-8 {
		t.Errorf("round trip = %v, %v", got, err)
	}
	if b := encodeVector([]float32{1}); string(b) != "\x00\x00\x80\x3f" {
		t.Errorf("1 encodes as % x, want little-endian float32", b)
	}
	if _, err := decodeVector([]byte{1, 2, 3}); err == nil {
		t.Error("3 bytes decoded")
	}
	if _, err := decodeVector(encodeVector([]float32{float32(math.NaN())})); err == nil {
		t.Error("NaN decoded")
	}
	if c := cosine([]float32{1, 0}, []float32{1}); c != 0 {
		t.Errorf("cosine of different lengths = %v", c)
	}
	if _, err := decodeEmbedding([]byte(`"AACAPw=="`)); err != nil {
		t.Errorf("base64: %v", err)
	}
	if _, err := decodeEmbedding([]byte(`{}`)); err == nil || errors.Is(err, nil) {
		t.Error("an object decoded as a vector")
	}
}
