package agents

import (
	"errors"
	"fmt"
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
