package memory

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hookroom/hookroom/internal/runes"
)

// Embedder turns texts into vectors, one per text, in order. Embed is
// called when a memory is stored (its text) and when one is recalled (the
// query); it must honour ctx and be safe for concurrent use. Vectors of one
// embedder must all have the same length.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// HTTPEmbedder is an Embedder on an OpenAI-compatible POST {base}/embeddings
// endpoint (OpenAI, Ollama, vLLM, llama.cpp's server, LocalAI). It is safe
// for concurrent use.
type HTTPEmbedder struct {
	endpoint string // base URL + "/embeddings"
	model    string
	apiKey   string
	timeout  time.Duration
	client   *http.Client
	// MaxBatch bounds the texts of one request (default 64); more are sent
	// in several requests.
	MaxBatch int
}

var _ Embedder = (*HTTPEmbedder)(nil)

// NewHTTPEmbedder returns the embedder o describes, reading its API key from
// the environment variable o.APIKeyEnv (if set). client may be nil
// (http.DefaultClient); each request is bounded by o.Timeout (default 10s).
func NewHTTPEmbedder(o EmbeddingsOptions, client *http.Client) (*HTTPEmbedder, error) {
	if err := (Config{Embeddings: o}).Validate(); err != nil {
		return nil, err
	}
	if !o.Enabled() {
		return nil, errors.New("memory.embeddings.base_url: not set")
	}
	key := ""
	if o.APIKeyEnv != "" {
		key = os.Getenv(o.APIKeyEnv)
	}
	return NewHTTPEmbedderWithKey(o.BaseURL, o.Model, key, o.Timeout, client), nil
}

// NewHTTPEmbedderWithKey returns an embedder on baseURL (ending in /v1)
// asking for model, authenticating with apiKey ("" for none). A timeout of 0
// means DefaultEmbedTimeout.
func NewHTTPEmbedderWithKey(baseURL, model, apiKey string, timeout time.Duration, client *http.Client) *HTTPEmbedder {
	if client == nil {
		client = http.DefaultClient
	}
	if timeout <= 0 {
		timeout = DefaultEmbedTimeout
	}
	return &HTTPEmbedder{
		endpoint: strings.TrimRight(baseURL, "/") + "/embeddings",
		model:    model, apiKey: apiKey, timeout: timeout, client: client,
	}
}

// Endpoint returns the URL the embedder posts to.
func (e *HTTPEmbedder) Endpoint() string { return e.endpoint }

// Model returns the model the embedder asks for.
func (e *HTTPEmbedder) Model() string { return e.model }

// maxEmbeddingsResponse bounds what the embedder reads of an answer.
const maxEmbeddingsResponse = 64 << 20

type embeddingsRequest struct {
	Model          string   `json:"model"`
	Input          []string `json:"input"`
	EncodingFormat string   `json:"encoding_format"`
}

type embeddingsResponse struct {
	Data []struct {
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Embed asks the endpoint for the vectors of texts, in batches of MaxBatch.
// Errors name the endpoint and never contain the API key.
func (e *HTTPEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	batch := e.MaxBatch
	if batch <= 0 {
		batch = 64
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += batch {
		vecs, err := e.embed(ctx, texts[start:min(start+batch, len(texts))])
		if err != nil {
			return nil, err
		}
		out = append(out, vecs...)
	}
	return out, nil
}

func (e *HTTPEmbedder) embed(ctx context.Context, texts []string) ([][]float32, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("failed to get embeddings from %s: %s", e.endpoint, e.scrub(fmt.Sprintf(format, args...)))
	}
	body, err := json.Marshal(embeddingsRequest{Model: e.model, Input: texts, EncodingFormat: "float"})
	if err != nil {
		return nil, fail("%v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fail("%v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if e.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+e.apiKey)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, fail("no answer within %s", e.timeout)
		}
		return nil, fail("%v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxEmbeddingsResponse+1))
	if err != nil {
		return nil, fail("failed to read the answer: %v", err)
	}
	if len(raw) > maxEmbeddingsResponse {
		return nil, fail("answer larger than %d bytes", maxEmbeddingsResponse)
	}
	var r embeddingsResponse
	jsonErr := json.Unmarshal(raw, &r)
	if resp.StatusCode != http.StatusOK {
		msg := ""
		if jsonErr == nil && r.Error != nil {
			msg = ": " + r.Error.Message
		}
		return nil, fail("HTTP %d%s", resp.StatusCode, runes.Truncate(msg, 300))
	}
	if jsonErr != nil {
		return nil, fail("answer is not an embeddings list: %v", jsonErr)
	}
	if len(r.Data) != len(texts) {
		return nil, fail("asked for %d vectors, got %d", len(texts), len(r.Data))
	}
	out := make([][]float32, len(texts))
	dims := -1
	for _, d := range r.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fail("answer has a bad or repeated index %d", d.Index)
		}
		v, err := decodeEmbedding(d.Embedding)
		if err != nil {
			return nil, fail("vector %d: %v", d.Index, err)
		}
		if len(v) == 0 || (dims >= 0 && len(v) != dims) {
			return nil, fail("vector %d has %d dimensions, want %d", d.Index, len(v), max(dims, 1))
		}
		dims = len(v)
		out[d.Index] = v
	}
	return out, nil
}

// scrub removes the API key from s, should a server or transport echo it.
func (e *HTTPEmbedder) scrub(s string) string {
	if e.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, e.apiKey, "REDACTED")
}

// decodeEmbedding reads a vector as a JSON array of numbers or as base64 of
// little-endian float32 (what servers answer to encoding_format base64).
func decodeEmbedding(raw json.RawMessage) ([]float32, error) {
	var floats []float64
	if err := json.Unmarshal(raw, &floats); err == nil {
		v := make([]float32, len(floats))
		for i, f := range floats {
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, errors.New("not a finite number")
			}
			v[i] = float32(f)
		}
		return v, nil
	}
	var b64 string
	if err := json.Unmarshal(raw, &b64); err != nil {
		return nil, errors.New("want an array of numbers or base64")
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b)%4 != 0 {
		return nil, errors.New("invalid base64 vector")
	}
	return decodeVector(b)
}

// encodeVector is a vector's stored form: little-endian float32s.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// decodeVector reads encodeVector's form.
func decodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("vector of %d bytes is not float32s", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		f := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, errors.New("not a finite number")
		}
		v[i] = f
	}
	return v, nil
}

// cosine returns the cosine similarity of a and b (0 when either is zero or
// their lengths differ).
func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		dot += x * y
		na += x * x
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / (math.Sqrt(na) * math.Sqrt(nb))
}
