package llmtest

import (
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"unicode"
)

// EmbeddingDimensions is the length of the vectors the server answers with
// when a request asks for no particular "dimensions".
const EmbeddingDimensions = 256

// EmbeddingRequest is one POST /v1/embeddings the server received.
type EmbeddingRequest struct {
	Path   string
	Header http.Header
	// Raw is the body as sent.
	Raw []byte
	// Model, Input (a single string input becomes one element),
	// EncodingFormat and Dimensions are the decoded body.
	Model          string
	Input          []string
	EncodingFormat string
	Dimensions     int
	// DecodeErr is why the body could not be decoded (the server answered
	// 400).
	DecodeErr error
}

// embeddingState is the server's embeddings side: scripted replies, fixed
// vectors and the requests received.
type embeddingState struct {
	mu       sync.Mutex
	script   []Reply
	vectors  map[string][]float32
	requests []EmbeddingRequest
	count    int
}

// ScriptEmbeddings queues replies for the next embeddings requests, one
// each, in order. A reply with Status >= 400 answers with that error (Body,
// or an OpenAI error object carrying ErrMessage), Garbage with its lines as
// the body, EmptyChoices with an empty "data" list, Truncate with half the
// JSON body; Delay and Hold wait first. A zero Reply (or no scripted reply)
// answers normally. Embeddings are deterministic, so unlike chat requests
// they need no script.
func (s *Server) ScriptEmbeddings(replies ...Reply) {
	s.embeddings.mu.Lock()
	defer s.embeddings.mu.Unlock()
	s.embeddings.script = append(s.embeddings.script, replies...)
}

// SetEmbedding makes the server answer v for the input text, exactly, instead
// of its hashed bag of words: a test can script a "semantic" neighbour that
// shares no word with its query. v is used as given (not normalized) and
// wins over the request's dimensions.
func (s *Server) SetEmbedding(text string, v []float32) {
	s.embeddings.mu.Lock()
	defer s.embeddings.mu.Unlock()
	if s.embeddings.vectors == nil {
		s.embeddings.vectors = map[string][]float32{}
	}
	s.embeddings.vectors[text] = append([]float32(nil), v...)
}

// EmbeddingRequests returns the embeddings requests received so far, in
// order of arrival (none in Instant mode).
func (s *Server) EmbeddingRequests() []EmbeddingRequest {
	s.embeddings.mu.Lock()
	defer s.embeddings.mu.Unlock()
	return append([]EmbeddingRequest(nil), s.embeddings.requests...)
}

// EmbeddingCount returns how many embeddings requests arrived.
func (s *Server) EmbeddingCount() int {
	s.embeddings.mu.Lock()
	defer s.embeddings.mu.Unlock()
	return s.embeddings.count
}

// Embedding is the vector the server answers for text when no SetEmbedding
// fixes it: a hashed bag of words of dims dimensions, unit length. Each word
// (a lower-cased run of letters and digits, a trailing plural "s" dropped
// from words of four letters or more) adds ±1 at the position its FNV-1a
// hash picks, the hash's top bit choosing the sign. So texts sharing words
// are near (cosine similarity about shared/√(n·m) for n and m distinct
// words), texts sharing none are near orthogonal, and the same text always
// gives the same vector. Text without words gives the zero vector.
func Embedding(text string, dims int) []float32 {
	if dims <= 0 {
		dims = EmbeddingDimensions
	}
	v := make([]float32, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r)
	}) {
		if len(w) >= 4 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		h := fnv.New64a()
		_, _ = h.Write([]byte(w))
		sum := h.Sum64()
		sign := float32(1)
		if sum>>63 == 1 {
			sign = -1
		}
		v[sum%uint64(dims)] += sign
	}
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if norm > 0 {
		inv := float32(1 / math.Sqrt(norm))
		for i := range v {
			v[i] *= inv
		}
	}
	return v
}

type embeddingsBody struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     int             `json:"dimensions"`
}

func decodeEmbeddings(raw []byte, req *EmbeddingRequest) error {
	var b embeddingsBody
	if err := json.Unmarshal(raw, &b); err != nil {
		return err
	}
	req.Model, req.EncodingFormat, req.Dimensions = b.Model, b.EncodingFormat, b.Dimensions
	var one string
	if err := json.Unmarshal(b.Input, &one); err == nil {
		req.Input = []string{one}
	} else if err := json.Unmarshal(b.Input, &req.Input); err != nil {
		return errors.New(`"input" must be a string or an array of strings (token arrays are not supported)`)
	}
	switch {
	case len(req.Input) == 0:
		return errors.New(`"input" is empty`)
	case b.Model == "":
		return errors.New(`"model" is missing`)
	case b.EncodingFormat != "" && b.EncodingFormat != "float" && b.EncodingFormat != "base64":
		return fmt.Errorf(`"encoding_format" must be float or base64, not %q`, b.EncodingFormat)
	case b.Dimensions < 0:
		return errors.New(`"dimensions" must be positive`)
	}
	return nil
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

type embeddingsAnswer struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// handleEmbeddings answers POST /v1/embeddings the way OpenAI does: one
// vector per input, in "data" with its index, as numbers or (encoding_format
// base64) as base64 of little-endian float32s.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	req := EmbeddingRequest{Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
	req.DecodeErr = decodeEmbeddings(raw, &req)
	e := &s.embeddings
	e.mu.Lock()
	e.count++
	if !s.opts.instant {
		e.requests = append(e.requests, req)
	}
	var reply Reply
	if req.DecodeErr == nil && len(e.script) > 0 {
		reply, e.script = e.script[0], e.script[1:]
	}
	vectors := make([][]float32, len(req.Input))
	for i, text := range req.Input {
		if v, ok := e.vectors[text]; ok {
			vectors[i] = v
		} else {
			vectors[i] = Embedding(text, cmp.Or(req.Dimensions, EmbeddingDimensions))
		}
	}
	e.mu.Unlock()

	if req.DecodeErr != nil {
		writeError(w, http.StatusBadRequest, errorBody(http.StatusBadRequest, "llmtest: invalid embeddings request: "+req.DecodeErr.Error()))
		return
	}
	if !s.pace(w, r, reply) {
		return
	}
	if reply.Status >= 400 {
		body := cmp.Or(reply.Body, errorBody(reply.Status, cmp.Or(reply.ErrMessage, http.StatusText(reply.Status))))
		writeError(w, reply.Status, body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if len(reply.Garbage) > 0 {
		_, _ = io.WriteString(w, strings.Join(reply.Garbage, "\n"))
		return
	}
	out := embeddingsAnswer{Object: "list", Model: req.Model, Data: []embeddingData{}}
	tokens := 0
	for i, v := range vectors {
		tokens += (len(req.Input[i]) + 3) / 4
		if reply.EmptyChoices {
			continue
		}
		d := embeddingData{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, f := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(f))
			}
			d.Embedding = base64.StdEncoding.EncodeToString(b)
		}
		out.Data = append(out.Data, d)
	}
	out.Usage.PromptTokens, out.Usage.TotalTokens = tokens, tokens
	b, _ := json.Marshal(out)
	if reply.Truncate {
		b = b[:len(b)/2]
	}
	_, _ = w.Write(b)
}
