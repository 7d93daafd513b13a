package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/plugins/process/internal/jsonscan"
)

// Version is the value of the "jsonrpc" member of every message.
const Version = "2.0"

// MethodCancel is the notification either end sends when it gives up on a
// request it sent: params {"id": <the request's id>}. The receiving end
// cancels the context of the request's handler.
const MethodCancel = "$/cancel"

// Defaults of Options.
const (
	DefaultMaxLineBytes = 16 << 20
	DefaultMaxInFlight  = 256
	DefaultWriteTimeout = 5 * time.Second
)

// ErrClosed is returned by calls on a closed connection; the error wraps
// the reason the connection closed.
var ErrClosed = errors.New("connection closed")

// ErrLineTooLong is the reason a line longer than Options.MaxLineBytes is
// discarded.
var ErrLineTooLong = errors.New("line too long")

// Request is an incoming request or notification.
type Request struct {
	// ID is the request's id as sent (a JSON number or string); nil for a
	// notification, which gets no response.
	ID     json.RawMessage
	Method string
	Params json.RawMessage
}

// IsNotification reports whether the sender expects no response.
func (r *Request) IsNotification() bool { return r.ID == nil }

// Handler serves the requests and notifications the other end sends. It is
// called on its own goroutine for each message (except inline methods, see
// Options.Inline); ctx ends when the sender cancels the request with
// $/cancel or the connection closes. A returned *Error is sent as is; any
// other error is sent with CodeInternalError and its message.
type Handler interface {
	ServeRPC(ctx context.Context, req *Request) (result any, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// ServeRPC calls f.
func (f HandlerFunc) ServeRPC(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// Options tune a connection. The zero value is sensible.
type Options struct {
	// MaxLineBytes is the longest line read (default 16 MiB). Longer lines
	// are discarded and logged.
	MaxLineBytes int
	// MaxInFlight bounds the incoming requests served at once (default
	// 256). Requests beyond it are answered with CodeOverloaded at once;
	// notifications beyond it are dropped and logged.
	MaxInFlight int
	// WriteTimeout bounds a write that has no context deadline of its own
	// (responses, notifications), when the writer supports write deadlines
	// (default 5 s).
	WriteTimeout time.Duration
	// Inline reports methods the reader goroutine serves itself, in order,
	// without a goroutine (cheap notifications whose order matters, such as
	// log lines). $/cancel is always served inline.
	Inline func(method string) bool
	// Logger receives protocol problems: garbage lines, unknown response
	// ids, dropped messages. Nil logs nothing.
	Logger *zerolog.Logger
	// Redact, when set, masks what the peer wrote before it reaches the log
	// (a garbage line is logged in part): the peer's secrets, for example.
	Redact func(text string) string
	// Trace, when set, sees every line: sent (out) right before it is
	// written, received (!out) before it is handled. For debugging; it must be safe
	// for concurrent use and must not keep line.
	Trace func(out bool, line []byte)
}

type writeDeadliner interface {
	SetWriteDeadline(t time.Time) error
}

// Conn is one end of a JSON-RPC 2.0 connection over a byte stream carrying
// one JSON object per line. Both ends may send requests and notifications at
// any time and concurrently; responses are matched to calls by id. Garbage
// lines (not JSON, not JSON-RPC 2.0, too long) are logged and skipped.
type Conn struct {
	r    io.Reader
	w    io.Writer
	h    Handler
	opts Options
	log  *zerolog.Logger

	nextID atomic.Uint64
	wsem   chan struct{} // write lock that waiters can give up on

	mu       sync.Mutex
	pending  map[uint64]chan response
	incoming map[string]context.CancelFunc
	closeErr error

	inFlight  atomic.Int32
	done      chan struct{} // closed by closeWith
	readDone  chan struct{} // closed when the read loop returned
	serveWG   sync.WaitGroup
	baseCtx   context.Context
	cancelAll context.CancelFunc
	closeOnce sync.Once

	garbage logLimiter
}

type response struct {
	result json.RawMessage
	err    error
}

// NewConn starts a connection reading r and writing w; h serves incoming
// requests (nil answers every request with CodeMethodNotFound). If w has a
// SetWriteDeadline method (an *os.File pipe), writes are bounded by the
// caller's deadline, so a peer that stops reading cannot block a caller.
func NewConn(r io.Reader, w io.Writer, h Handler, opts Options) *Conn {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	log := opts.Logger
	if log == nil {
		nop := zerolog.Nop()
		log = &nop
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		r: r, w: w, h: h, opts: opts, log: log,
		wsem:     make(chan struct{}, 1),
		pending:  map[uint64]chan response{},
		incoming: map[string]context.CancelFunc{},
		done:     make(chan struct{}),
		readDone: make(chan struct{}),
		baseCtx:  ctx, cancelAll: cancel,
	}
	go c.readLoop(nil)
	return c
}

// Done is closed when the connection closed: Close was called, the stream
// ended, or a write failed half way.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection closed (wrapping ErrClosed), or nil while
// it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeErr
}

// Close closes the connection: pending calls fail, handlers' contexts end,
// and the underlying reader and writer are closed if they are io.Closers.
// It waits for the read loop and the running handlers to return.
func (c *Conn) Close() error {
	c.CloseWithError(errors.New("closed by this end"))
	c.closeStreams()
	<-c.readDone
	c.serveWG.Wait()
	return nil
}

// CloseWithError closes the connection with reason err (pending calls fail
// with an error wrapping ErrClosed and err) without closing the streams or
// waiting.
func (c *Conn) CloseWithError(err error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closeErr = fmt.Errorf("%w: %w", ErrClosed, err)
		pending := c.pending
		c.pending = nil
		c.mu.Unlock()
		for _, ch := range pending {
			ch <- response{err: c.closeErr}
		}
		// done first: a handler woken by the cancellation must find the
		// connection closed, not send a "context canceled" answer.
		close(c.done)
		c.cancelAll()
	})
}

func (c *Conn) closeStreams() {
	if cl, ok := c.w.(io.Closer); ok {
		_ = cl.Close()
	}
	if cl, ok := c.r.(io.Closer); ok {
		_ = cl.Close()
	}
}

// Wait blocks until the read loop and every handler returned (the stream
// ended or Close was called).
func (c *Conn) Wait() {
	<-c.readDone
	c.serveWG.Wait()
}

// Call sends a request and waits for its response. It returns the raw
// result, an *Error sent by the other end, or an error if the connection
// closed. If ctx ends first, Call sends $/cancel for the request (without
// waiting) and returns ctx's error; a late response is dropped.
//
// params may be any value json.Marshal accepts; a json.RawMessage is sent
// as is and must be valid JSON.
func (c *Conn) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.pending == nil {
		err := c.closeErr
		c.mu.Unlock()
		return nil, err
	}
	c.pending[id] = ch
	c.mu.Unlock()

	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.WriteString(strconv.FormatUint(id, 10))
	if err := writeMethodParams(buf, method, params); err != nil {
		c.forget(id)
		return nil, err
	}
	if err := c.write(ctx, buf.Bytes()); err != nil {
		c.forget(id)
		return nil, err
	}
	select {
	case r := <-ch:
		return r.result, r.err
	case <-ctx.Done():
		if c.forget(id) {
			go c.sendCancel(id)
		}
		return nil, ctx.Err()
	}
}

// forget removes a pending call; it reports whether the call was still
// pending (no response arrived and the connection is open).
func (c *Conn) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; ok {
		delete(c.pending, id)
		return true
	}
	return false
}

func (c *Conn) sendCancel(id uint64) {
	ctx, cancel := context.WithTimeout(c.baseCtx, 100*time.Millisecond)
	defer cancel()
	_ = c.Notify(ctx, MethodCancel, struct {
		ID uint64 `json:"id"`
	}{id})
}

// Notify sends a notification (a request without id; no response comes).
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.WriteString(`{"jsonrpc":"2.0"`)
	if err := writeMethodParams(buf, method, params); err != nil {
		return err
	}
	return c.write(ctx, buf.Bytes())
}

func writeMethodParams(buf *bytes.Buffer, method string, params any) error {
	buf.WriteString(`,"method":`)
	m, err := json.Marshal(method)
	if err != nil {
		return fmt.Errorf("failed to encode method: %w", err)
	}
	buf.Write(m)
	if params != nil {
		buf.WriteString(`,"params":`)
		if err := appendJSON(buf, params); err != nil {
			return fmt.Errorf("failed to encode params of %s: %w", method, err)
		}
	}
	buf.WriteString("}\n")
	return nil
}

func appendJSON(buf *bytes.Buffer, v any) error {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			buf.WriteString("null")
			return nil
		}
		buf.Write(raw)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putBuf(b *bytes.Buffer) {
	if b.Cap() > 1<<20 {
		return
	}
	b.Reset()
	bufPool.Put(b)
}

// write writes one message under the write lock. The wait for the lock and
// the write itself are bounded by ctx (or WriteTimeout without a deadline).
// A write that fails after writing part of the message breaks the stream:
// the connection closes.
func (c *Conn) write(ctx context.Context, b []byte) error {
	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.Err()
	}
	defer func() { <-c.wsem }()
	select {
	case <-c.done:
		return c.Err()
	default:
	}
	dw, ok := c.w.(writeDeadliner)
	if ok {
		dl, has := ctx.Deadline()
		if !has {
			dl = time.Now().Add(c.opts.WriteTimeout)
		}
		if err := dw.SetWriteDeadline(dl); err != nil {
			ok = false
		}
	}
	if c.opts.Trace != nil {
		c.opts.Trace(true, b)
	}
	n, err := c.w.Write(b)
	if err == nil {
		return nil
	}
	if n > 0 && n < len(b) {
		c.CloseWithError(fmt.Errorf("failed to write a whole message (%d of %d bytes): %w", n, len(b), err))
		return c.Err()
	}
	if ok && errors.Is(err, os.ErrDeadlineExceeded) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("failed to write message: the other end is not reading: %w", context.DeadlineExceeded)
	}
	c.CloseWithError(fmt.Errorf("failed to write message: %w", err))
	return c.Err()
}

// wireMessage is any JSON-RPC message as read; the raw fields are
// sub-slices of the line.
type wireMessage struct {
	JSONRPC string
	ID      json.RawMessage
	Method  string
	Params  json.RawMessage
	Result  json.RawMessage
	Error   *Error
}

func parseMessage(line []byte) (wireMessage, error) {
	var m wireMessage
	err := jsonscan.Object(line, func(key string, v []byte) error {
		var err error
		switch key {
		case "jsonrpc":
			m.JSONRPC, err = jsonscan.String(v)
		case "id":
			m.ID = v
		case "method":
			m.Method, err = jsonscan.String(v)
		case "params":
			m.Params = v
		case "result":
			m.Result = v
		case "error":
			if !jsonscan.IsNull(v) {
				m.Error = new(Error)
				err = json.Unmarshal(v, m.Error)
			}
		}
		return err
	})
	return m, err
}

// lineReader is the read side's state. One goroutine at a time owns it:
// when a request arrives, the goroutine that read it serves it and hands
// the reader to a new goroutine (the request runs without waiting for a
// goroutine to be scheduled, which on a busy machine costs tens of
// microseconds per call).
type lineReader struct {
	br   *bufio.Reader
	long []byte
}

func (c *Conn) readLoop(rd *lineReader) {
	if rd == nil {
		rd = &lineReader{br: bufio.NewReaderSize(c.r, 64<<10)}
	}
	for {
		line, err := rd.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: gather it up to the limit.
			rd.long = append(rd.long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = rd.br.ReadSlice('\n')
				if len(rd.long) <= c.opts.MaxLineBytes {
					rd.long = append(rd.long, line...)
				}
			}
			line = rd.long
		}
		if len(line) > c.opts.MaxLineBytes {
			c.garbageLine(line[:min(len(line), 4096)], fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, c.opts.MaxLineBytes))
			line = nil
		}
		var job *job
		if len(line) > 0 {
			if c.opts.Trace != nil {
				c.opts.Trace(false, line)
			}
			job = c.dispatch(line)
		}
		if cap(rd.long) > 1<<20 {
			rd.long = nil
		}
		if err != nil {
			c.CloseWithError(streamEnded(err))
			if job != nil {
				c.runJob(job)
			}
			close(c.readDone)
			return
		}
		if job != nil {
			go c.readLoop(rd)
			c.runJob(job)
			return
		}
	}
}

// job is a request to serve on its own goroutine.
type job struct {
	ctx context.Context
	req *Request
	key string
}

func (c *Conn) runJob(j *job) {
	defer c.inFlight.Add(-1)
	c.run(j.ctx, j.req, j.key)
}

func streamEnded(err error) error {
	if errors.Is(err, io.EOF) {
		return errors.New("the other end closed the stream")
	}
	return fmt.Errorf("failed to read: %w", err)
}

// dispatch handles one line; a request that needs a goroutine of its own
// is returned as a job.
func (c *Conn) dispatch(line []byte) *job {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	// The message is split without decoding the params or result, which
	// their receivers decode once; the copy outlives the read buffer.
	line = append([]byte(nil), line...)
	m, err := parseMessage(line)
	if err != nil {
		c.garbageLine(line, fmt.Errorf("not a JSON object: %w", err))
		return nil
	}
	if m.JSONRPC != Version {
		c.garbageLine(line, fmt.Errorf("not JSON-RPC 2.0 (jsonrpc=%q)", m.JSONRPC))
		return nil
	}
	if isNull(m.ID) {
		m.ID = nil
	}
	switch {
	case m.Method != "":
		return c.serve(&Request{ID: m.ID, Method: m.Method, Params: m.Params})
	case m.ID != nil:
		c.deliver(line, m)
	default:
		c.garbageLine(line, errors.New("neither a request nor a response"))
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func (c *Conn) deliver(line []byte, m wireMessage) {
	id, err := strconv.ParseUint(string(m.ID), 10, 64)
	if err != nil {
		c.garbageLine(line, fmt.Errorf("response id %s was never sent", m.ID))
		return
	}
	c.mu.Lock()
	ch, ok := c.pending[id]
	if ok {
		delete(c.pending, id)
	}
	c.mu.Unlock()
	if !ok {
		// A response to a call that was cancelled or timed out.
		c.log.Debug().Uint64("id", id).Msg("dropping response to a call nobody waits for")
		return
	}
	switch {
	case m.Error != nil:
		ch <- response{err: m.Error}
	case m.Result == nil:
		ch <- response{result: json.RawMessage("null")}
	default:
		ch <- response{result: m.Result}
	}
}

// serve serves cancellations, inline methods and overload answers at once
// and returns any other request as a job.
func (c *Conn) serve(req *Request) *job {
	if req.Method == MethodCancel {
		c.cancelIncoming(req.Params)
		return nil
	}
	if c.opts.Inline != nil && c.opts.Inline(req.Method) {
		c.serveWG.Add(1)
		c.run(c.baseCtx, req, "")
		return nil
	}
	if int(c.inFlight.Add(1)) > c.opts.MaxInFlight {
		c.inFlight.Add(-1)
		if req.IsNotification() {
			if ev := c.garbage.event(c.log.Warn()); ev != nil {
				ev.Str("method", req.Method).Msg("dropping notification: too many requests in flight")
			}
			return nil
		}
		c.serveWG.Add(1)
		go func() {
			defer c.serveWG.Done()
			c.reply(req.ID, nil, &Error{Code: CodeOverloaded, Message: fmt.Sprintf("too many requests in flight (limit %d)", c.opts.MaxInFlight)})
		}()
		return nil
	}
	key := ""
	ctx := c.baseCtx
	if !req.IsNotification() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(c.baseCtx)
		key = string(req.ID)
		c.mu.Lock()
		c.incoming[key] = cancel
		c.mu.Unlock()
	}
	c.serveWG.Add(1)
	return &job{ctx: ctx, req: req, key: key}
}

func (c *Conn) run(ctx context.Context, req *Request, key string) {
	defer c.serveWG.Done()
	var result any
	var err error
	if c.h == nil {
		err = &Error{Code: CodeMethodNotFound, Message: "method not found: " + req.Method}
	} else {
		result, err = c.h.ServeRPC(ctx, req)
	}
	if key != "" {
		c.mu.Lock()
		cancel := c.incoming[key]
		delete(c.incoming, key)
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}
	if req.IsNotification() {
		if err != nil {
			c.log.Debug().Err(err).Str("method", req.Method).Msg("notification handler failed")
		}
		return
	}
	c.reply(req.ID, result, err)
}

func (c *Conn) cancelIncoming(params json.RawMessage) {
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(params, &p); err != nil || isNull(p.ID) {
		if ev := c.garbage.event(c.log.Warn()); ev != nil {
			ev.Msg("ignoring $/cancel without an id")
		}
		return
	}
	c.mu.Lock()
	cancel := c.incoming[string(p.ID)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (c *Conn) reply(id json.RawMessage, result any, err error) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	buf.Write(id)
	if err != nil {
		var re *Error
		if !errors.As(err, &re) {
			re = &Error{Code: CodeInternalError, Message: err.Error()}
		}
		buf.WriteString(`,"error":`)
		if e := appendJSON(buf, re); e != nil {
			return
		}
	} else {
		buf.WriteString(`,"result":`)
		if result == nil {
			buf.WriteString("{}")
		} else if e := appendJSON(buf, result); e != nil {
			buf.Truncate(0)
			buf.WriteString(`{"jsonrpc":"2.0","id":`)
			buf.Write(id)
			buf.WriteString(`,"error":`)
			_ = appendJSON(buf, &Error{Code: CodeInternalError, Message: "failed to encode result: " + e.Error()})
		}
	}
	buf.WriteString("}\n")
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.WriteTimeout)
	defer cancel()
	if err := c.write(ctx, buf.Bytes()); err != nil && !errors.Is(err, ErrClosed) {
		c.log.Debug().Err(err).Msg("failed to send response")
	}
}

func (c *Conn) garbageLine(line []byte, err error) {
	const show = 200
	text := string(line)
	if c.opts.Redact != nil {
		text = c.opts.Redact(text) // before the cut, which could split a secret
	}
	if len(text) > show {
		n := show
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n] + "…"
	}
	if ev := c.garbage.event(c.log.Warn()); ev != nil {
		ev.Err(err).Str("line", text).Msg("skipping a line that is not a valid JSON-RPC 2.0 message")
	}
}

// logLimiter lets through at most 10 log lines per second and reports how
// many it held back with the next line it lets through.
type logLimiter struct {
	mu      sync.Mutex
	window  time.Time
	n       int
	dropped int
}

// event returns ev, or nil (discarding ev) when the limit is reached.
func (l *logLimiter) event(ev *zerolog.Event) *zerolog.Event {
	if ev == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.window) >= time.Second {
		l.window, l.n = now, 0
	}
	l.n++
	if l.n > 10 {
		l.dropped++
		return ev.Discard()
	}
	if l.dropped > 0 {
		ev = ev.Int("suppressed_before", l.dropped)
		l.dropped = 0
	}
	return ev
}
