package jsonrpc

import (
	"encoding/json"
	"fmt"
)

// Error codes defined by JSON-RPC 2.0, and the two this package adds.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeRequestCancelled answers a request whose sender cancelled it
	// with $/cancel (the value LSP uses).
	CodeRequestCancelled = -32800
	// CodeOverloaded answers a request that arrived while MaxInFlight
	// requests were being served.
	CodeOverloaded = -32099
)

// Error is a JSON-RPC error object: what a handler returns to send a
// specific code, and what Call returns when the other end answered with an
// error.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// InvalidParams returns an *Error with CodeInvalidParams saying why the
// params of method could not be decoded.
func InvalidParams(method string, err error) *Error {
	return &Error{Code: CodeInvalidParams, Message: fmt.Sprintf("invalid params for %s: %v", method, err)}
}
