package llmtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// created is the fixed "created" timestamp of every reply, so that replies
// are reproducible.
const created = 1767225600

// Server is a scripted OpenAI-compatible chat completions server on
// loopback. It answers POST /v1/chat/completions (streaming with SSE
// "data:" chunks ending in "data: [DONE]", or a single JSON completion) and
// GET /v1/models. Each request takes the next reply of the first route
// whose matcher accepts it (On), else the next reply of the default script
// (Script), else the fallback reply (WithFallback); a request nothing
// answers gets HTTP 500 and is counted as unscripted. Every request is
// recorded (Requests). Safe for concurrent use.
type Server struct {
	// URL is the API base URL to give an OpenAI-compatible client, ending
	// in "/v1".
	URL string
	// RootURL is the server's root, the base URL to give an Anthropic
	// client (which appends "/v1/messages" itself).
	RootURL string

	srv  *httptest.Server
	opts options

	mu         sync.Mutex
	script     []Reply
	routes     []*route
	requests   []Request
	count      int
	unscripted int
	audio      audioState // audio.go
	embeddings embeddingState
}

type route struct {
	match   Matcher
	replies []Reply
}

type options struct {
	instant  bool
	fallback *Reply
}

// Option configures a Server.
type Option func(*options)

// Instant makes the server as fast as it can be, for benchmarks: delays are
// ignored, a stream is written in one go, and requests are counted but not
// kept (Requests returns none).
func Instant() Option { return func(o *options) { o.instant = true } }

// WithFallback answers every request that no route or script reply takes
// with r, as often as needed.
func WithFallback(r Reply) Option { return func(o *options) { o.fallback = &r } }

// New starts a server; Close stops it. Tests usually call NewServer.
func New(opts ...Option) *Server {
	s := &Server{}
	for _, o := range opts {
		o(&s.opts)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handle(FormatOpenAI))
	mux.HandleFunc("POST /chat/completions", s.handle(FormatOpenAI))
	mux.HandleFunc("POST /v1/messages", s.handle(FormatAnthropic))
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /models", s.handleModels)
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("POST /embeddings", s.handleEmbeddings)
	s.routeAudio(mux)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	s.RootURL = s.srv.URL
	return s
}

// NewServer starts a server with a default script of replies, closed when
// the test ends. The test fails then if any request found no reply.
func NewServer(t testing.TB, replies ...Reply) *Server {
	return NewServerWith(t, nil, replies...)
}

// NewServerWith is NewServer with options.
func NewServerWith(t testing.TB, opts []Option, replies ...Reply) *Server {
	t.Helper()
	s := New(opts...)
	s.Script(replies...)
	t.Cleanup(func() {
		s.Close()
		if n := s.Unscripted(); n > 0 {
			t.Errorf("llmtest: %d request(s) found no scripted reply", n)
		}
	})
	return s
}

// Close stops the server, cutting open streams.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// Script appends replies to the default script.
func (s *Server) Script(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// On adds a route: requests that match take the route's replies in order
// (routes are asked in the order they were added, before the default
// script). Use it to script independent callers, e.g. a router call and an
// agent's call. Calling On again with more replies adds a new route.
func (s *Server) On(match Matcher, replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes = append(s.routes, &route{match: match, replies: replies})
}

// Requests returns the requests received so far, in order of arrival.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// LastRequest returns the latest request; it fails the test if none came.
func (s *Server) LastRequest(t testing.TB) Request {
	t.Helper()
	reqs := s.Requests()
	if len(reqs) == 0 {
		t.Fatalf("llmtest: no request received")
	}
	return reqs[len(reqs)-1]
}

// Count returns how many chat requests arrived.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count
}

// Pending returns how many scripted replies (script and routes) are left.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.script)
	for _, r := range s.routes {
		n += len(r.replies)
	}
	return n
}

// Unscripted returns how many requests found no reply.
func (s *Server) Unscripted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unscripted
}

// next records req and picks its reply.
func (s *Server) next(req *Request) (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count++
	var (
		reply Reply
		ok    bool
	)
	if req.DecodeErr == nil {
		if reply, ok = s.pick(req); !ok {
			s.unscripted++
		}
	}
	if !s.opts.instant {
		s.requests = append(s.requests, *req)
	}
	return reply, ok
}

func (s *Server) pick(req *Request) (Reply, bool) {
	req.Route = -1
	for i, r := range s.routes {
		if len(r.replies) > 0 && r.match(req) {
			reply := r.replies[0]
			r.replies = r.replies[1:]
			req.Route = i
			return reply, true
		}
	}
	if len(s.script) > 0 {
		reply := s.script[0]
		s.script = s.script[1:]
		return reply, true
	}
	if s.opts.fallback != nil {
		return *s.opts.fallback, true
	}
	return Reply{}, false
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"llmtest","object":"model","created":1767225600,"owned_by":"llmtest"}]}`)
}

// handle answers a chat request in format: POST /v1/chat/completions
// (openai) or POST /v1/messages (anthropic).
func (s *Server) handle(format Format) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "failed to read body", http.StatusBadRequest)
			return
		}
		req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, Route: -1, Format: format}
		if format == FormatAnthropic {
			req.Anthropic, req.Body, req.DecodeErr = decodeMessages(raw)
		} else {
			req.Body, req.DecodeErr = decodeChat(raw)
		}
		reply, ok := s.next(&req)
		if req.DecodeErr != nil {
			writeError(w, http.StatusBadRequest, errorBodyFor(format, http.StatusBadRequest, "llmtest: request body is not valid JSON: "+req.DecodeErr.Error()))
			return
		}
		if !ok {
			writeError(w, http.StatusInternalServerError, errorBodyFor(format, http.StatusInternalServerError, "llmtest: no scripted reply for this request"))
			return
		}
		if !s.pace(w, r, reply) {
			return
		}
		if reply.Status >= 400 {
			body := reply.Body
			if body == "" {
				body = errorBodyFor(format, reply.Status, cmp.Or(reply.ErrMessage, http.StatusText(reply.Status)))
			}
			writeError(w, reply.Status, body)
			return
		}
		switch {
		case format == FormatAnthropic && req.Body.Stream:
			s.streamMessage(w, r, &req, reply, fmt.Sprintf("msg_llmtest_%d", s.Count()))
		case format == FormatAnthropic:
			s.completeMessage(w, &req, reply, fmt.Sprintf("msg_llmtest_%d", s.Count()))
		case req.Body.Stream:
			s.stream(w, r, &req, reply, fmt.Sprintf("chatcmpl-llmtest-%d", s.Count()))
		default:
			s.complete(w, &req, reply, fmt.Sprintf("chatcmpl-llmtest-%d", s.Count()))
		}
	}
}

func writeError(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func finishReason(reply Reply) string {
	if reply.Finish != "" {
		return reply.Finish
	}
	if len(reply.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

func usage(req *Request, reply Reply) Usage {
	if reply.Usage != nil {
		return *reply.Usage
	}
	n := 0
	for _, t := range reply.Text {
		n += len(t)
	}
	for _, c := range reply.Calls {
		n += len(c.Name) + len(c.Arguments)
	}
	u := Usage{PromptTokens: (len(req.Raw) + 3) / 4, CompletionTokens: (n + 3) / 4}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// sse writes chunks as server-sent events, flushing after each unless the
// server is instant.
type sse struct {
	w       http.ResponseWriter
	flusher http.Flusher
	ctx     context.Context
	buf     bytes.Buffer
	instant bool
	delay   time.Duration
	n       int
}

func (e *sse) data(payload []byte) bool {
	return e.line(append(append([]byte("data: "), payload...), '\n', '\n'))
}

// openSSE answers r with an event stream and returns its writer; the
// handlers of both wire formats call it before their first event.
func (s *Server) openSSE(w http.ResponseWriter, r *http.Request, reply Reply) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, flusher: f, ctx: r.Context(), instant: s.opts.instant, delay: reply.ChunkDelay}
}

func (e *sse) line(b []byte) bool {
	if e.n > 1 && e.delay > 0 && !e.instant && !sleep(e.ctx, e.delay) {
		return false
	}
	e.n++
	if e.instant {
		e.buf.Write(b)
		return true
	}
	if _, err := e.w.Write(b); err != nil {
		return false
	}
	if e.flusher != nil {
		e.flusher.Flush()
	}
	return true
}

func (e *sse) finish() {
	if e.instant {
		_, _ = e.w.Write(e.buf.Bytes())
	}
}

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req *Request, reply Reply, id string) {
	e := s.openSSE(w, r, reply)
	defer e.finish()
	includeUsage := req.Body.StreamOptions != nil && req.Body.StreamOptions.IncludeUsage
	mk := func(d delta, finish *string) []byte {
		c := chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: req.Body.Model}
		if !reply.EmptyChoices {
			c.Choices = []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}
		} else {
			c.Choices = []chunkChoice{}
		}
		b, _ := json.Marshal(c)
		if includeUsage {
			// Every chunk but the last carries "usage": null.
			b = append(b[:len(b)-1], []byte(`,"usage":null}`)...)
		}
		return b
	}
	empty := ""
	if !e.data(mk(delta{Role: "assistant", Content: &empty}, nil)) {
		return
	}
	for _, t := range reply.Text {
		if !e.data(mk(delta{Content: &t}, nil)) {
			return
		}
	}
	for i, c := range reply.Calls {
		if !e.data(mk(delta{ToolCalls: []deltaCall{{Index: i, ID: c.ID, Type: "function", Function: deltaFunction{Name: c.Name}}}}, nil)) {
			return
		}
		for _, piece := range Split(c.Arguments, max(c.Pieces, 1)) {
			if piece == "" {
				continue
			}
			if !e.data(mk(delta{ToolCalls: []deltaCall{{Index: i, Function: deltaFunction{Arguments: piece}}}}, nil)) {
				return
			}
		}
	}
	if len(reply.Garbage) > 0 {
		for _, g := range reply.Garbage {
			if !e.line([]byte(g + "\n")) {
				return
			}
		}
		return
	}
	if reply.StreamError != nil {
		var eo errorObject
		eo.Error.Type, eo.Error.Message = reply.StreamError.Type, reply.StreamError.Message
		b, _ := json.Marshal(eo)
		e.data(b)
		return
	}
	if reply.Truncate {
		b := mk(delta{}, nil)
		e.line(append([]byte("data: "), b[:len(b)/2]...))
		return
	}
	fr := finishReason(reply)
	if !e.data(mk(delta{}, &fr)) {
		return
	}
	if includeUsage {
		u := usage(req, reply)
		b, _ := json.Marshal(chunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: req.Body.Model, Choices: []chunkChoice{}, Usage: &u})
		if !e.data(b) {
			return
		}
	}
	e.data([]byte("[DONE]"))
}

func (s *Server) complete(w http.ResponseWriter, req *Request, reply Reply, id string) {
	if len(reply.Garbage) > 0 {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.Join(reply.Garbage, "\n"))
		return
	}
	text := strings.Join(reply.Text, "")
	msg := completionMessage{Role: "assistant"}
	if text != "" || len(reply.Calls) == 0 {
		msg.Content = &text
	}
	for _, c := range reply.Calls {
		msg.ToolCalls = append(msg.ToolCalls, WireCall{ID: c.ID, Type: "function", Function: FunctionCall{Name: c.Name, Arguments: c.Arguments}})
	}
	out := completion{ID: id, Object: "chat.completion", Created: created, Model: req.Body.Model, Usage: usage(req, reply), Choices: []completionChoice{}}
	if !reply.EmptyChoices {
		out.Choices = []completionChoice{{Index: 0, Message: msg, FinishReason: finishReason(reply)}}
	}
	b, _ := json.Marshal(out)
	if reply.Truncate {
		b = b[:len(b)/2]
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// pace holds a scripted reply back as it says (Delay, unless the server is
// Instant; Hold) and writes its extra headers. It reports false when the
// request ended meanwhile.
func (s *Server) pace(w http.ResponseWriter, r *http.Request, reply Reply) bool {
	if !s.opts.instant && reply.Delay > 0 && !sleep(r.Context(), reply.Delay) {
		return false
	}
	if reply.Hold != nil {
		select {
		case <-reply.Hold:
		case <-r.Context().Done():
			return false
		}
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	return true
}
