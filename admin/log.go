package admin

import (
	"log"
	"strings"

	"github.com/rs/zerolog"
)

// newErrorLog routes net/http's own messages (TLS handshake noise, bad
// requests) to the zerolog logger at debug level.
func newErrorLog(l *zerolog.Logger) *log.Logger {
	return log.New(errorWriter{l}, "", 0)
}

type errorWriter struct{ l *zerolog.Logger }

func (w errorWriter) Write(p []byte) (int, error) {
	w.l.Debug().Str("component", "http").Msg(strings.TrimSpace(string(p)))
	return len(p), nil
}
