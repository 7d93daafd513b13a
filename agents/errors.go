package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
)

// ErrorKind classifies a model failure.
type ErrorKind string

const (
	// ErrorHTTP: the server answered with a non-2xx status (StatusCode).
	ErrorHTTP ErrorKind = "http"
	// ErrorServer: the server reported an error inside a successful stream.
	ErrorServer ErrorKind = "server"
	// ErrorTimeout: the request timeout or the caller's deadline passed.
	ErrorTimeout ErrorKind = "timeout"
	// ErrorCancelled: the caller cancelled the request.
	ErrorCancelled ErrorKind = "cancelled"
	// ErrorNetwork: the connection failed or broke.
	ErrorNetwork ErrorKind = "network"
	// ErrorProtocol: the server sent something that is not a valid reply:
	// invalid JSON, a truncated stream, no choices.
	ErrorProtocol ErrorKind = "protocol"
)

// ModelError is how every model failure surfaces. Check for it with
// errors.As; errors.Is also sees the cause (context.DeadlineExceeded,
// context.Canceled, …) through Unwrap.
type ModelError struct {
	// Model is the model name the request was for ("" if unknown).
	Model string
	Kind  ErrorKind
	// StatusCode is the HTTP status for ErrorHTTP, else 0.
	StatusCode int
	// Retryable says whether the same request may succeed later: rate
	// limits, 5xx, timeouts, network failures and truncated streams.
	Retryable bool
	// Message explains the failure in a sentence fit for a log or a short
	// note to the person waiting for the reply. It never holds credentials.
	Message string
	// Err is the underlying error, if any.
	Err error
}

func (e *ModelError) Error() string {
	var b strings.Builder
	b.WriteString("model request failed")
	if e.Model != "" {
		fmt.Fprintf(&b, " (%s)", e.Model)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.Retryable {
		b.WriteString(" (retryable)")
	}
	return b.String()
}

func (e *ModelError) Unwrap() error { return e.Err }

// ErrToolIterations ends a turn whose model kept asking for tools past the
// iteration bound.
var ErrToolIterations = errors.New("too many tool iterations")

// ErrNoSession is returned for a scope that has no stored history.
var ErrNoSession = errors.New("no session for this scope")

// ErrHistoryChanged is returned by compaction when the history was changed
// by someone else while the summary was being written; nothing was stored.
var ErrHistoryChanged = errors.New("history changed during compaction")

// retryableStatus reports whether a request that got HTTP status code may
// succeed when repeated.
func retryableStatus(code int) bool {
	switch {
	case code == 408, code == 409, code == 425, code == 429:
		return true
	case code >= 500:
		return code != 501 && code != 505
	}
	return false
}

// classifyError turns the error of a model request into a *ModelError; a
// provider's stream (streamCore) calls it for every failure. sctx is the
// request's own context (cancelled by the watchdog), parent the caller's.
// A request whose sctx ended is a timeout or a cancellation
// (stoppedError); any other err goes to the provider's own fill, which
// sets me's kind and message. The
// message and the cause hold no credential: the API key, and anything
// that looks like one, is scrubbed from both (servers and proxies may
// echo a refused key).
func classifyError(spec ModelSpec, sctx, parent context.Context, err error, fill func(me *ModelError, err error)) *ModelError {
	me := stoppedError(spec, sctx, parent)
	if me == nil {
		me = &ModelError{Model: spec.Model, Err: err}
		fill(me, err)
	}
	me.Message = scrubCredentials(me.Message, spec.APIKey)
	me.Err = scrubbedCause(me.Err, spec.APIKey)
	return me
}

// scrubbedCause is the cause a *ModelError may wrap: err itself when it
// carries nothing the server sent (the context's errors, a cut-off reply,
// a bare connection error, which names addresses only and is kept for
// errors.Is), else its text, clipped and scrubbed of key and of anything
// that looks like a credential: the SDKs' errors quote the request URL and
// the response body.
func scrubbedCause(err error, key string) error {
	var opErr *net.OpError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), err == io.ErrUnexpectedEOF:
		return err
	case errors.As(err, &opErr) && err == error(opErr):
		return err
	}
	return errors.New(scrubCredentials(clip(err.Error()), key))
}

// httpError fills me for a request the server refused with HTTP status
// code; body is what it said, clipped here. Every provider calls it for a
// non-2xx answer.
func httpError(me *ModelError, code int, body string) {
	me.Kind, me.StatusCode, me.Retryable = ErrorHTTP, code, retryableStatus(code)
	me.Message = fmt.Sprintf("the server answered %s: %s", statusText(code), clip(body))
}

// streamError fills me for an error the server reported inside a stream
// that had started (HTTP 200); msg is what it said, clipped here.
func streamError(me *ModelError, retryable bool, msg string) {
	me.Kind, me.Retryable = ErrorServer, retryable
	me.Message = "the server reported an error in the stream: " + clip(msg)
}

// invalidJSON fills me for a stream item that is not valid JSON (or not
// of the shape the provider's API has).
func invalidJSON(me *ModelError, err error) {
	me.Kind = ErrorProtocol
	me.Message = "the server sent invalid JSON in the stream: " + err.Error()
}

// stoppedError classifies a model request whose own context sctx ended:
// the server stayed silent longer than spec.RequestTimeout (the watchdog),
// the caller's deadline (parent) passed, or the caller cancelled. It
// returns nil while sctx is live: the error is the provider's to classify.
func stoppedError(spec ModelSpec, sctx, parent context.Context) *ModelError {
	if sctx.Err() == nil {
		return nil
	}
	me := &ModelError{Model: spec.Model}
	switch {
	case errors.Is(context.Cause(sctx), errIdleTimeout):
		me.Kind, me.Retryable, me.Err = ErrorTimeout, true, errIdleTimeout
		me.Message = fmt.Sprintf("the model server sent nothing for %s", spec.RequestTimeout)
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		me.Kind, me.Retryable, me.Err = ErrorTimeout, true, context.DeadlineExceeded
		me.Message = "the reply did not finish before the deadline"
	default:
		me.Kind, me.Err = ErrorCancelled, context.Canceled
		me.Message = "the request was cancelled"
	}
	return me
}

// transportError fills me for a failure of the connection itself, the same
// for every provider: a reply cut off, a server that cannot be reached. It
// reports false, leaving me alone, for any other error.
func transportError(me *ModelError, err error) bool {
	var (
		netErr net.Error
		urlErr *url.Error
	)
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		me.Kind, me.Retryable = ErrorNetwork, true
		me.Message = "the connection closed in the middle of the reply"
	case errors.As(err, &urlErr):
		// Not urlErr.Error(): it quotes the whole request URL, whose path
		// or query may carry a credential (a gateway token in the base
		// URL); the server's origin says which server it was.
		me.Kind, me.Retryable = ErrorNetwork, true
		me.Message = fmt.Sprintf("could not talk to the model server at %s: %v", urlOrigin(urlErr.URL), urlErr.Err)
		me.Err = urlErr.Err // the cause without the request URL
	case errors.As(err, &netErr):
		me.Kind, me.Retryable = ErrorNetwork, true
		me.Message = "could not talk to the model server: " + err.Error()
	default:
		return false
	}
	return true
}
