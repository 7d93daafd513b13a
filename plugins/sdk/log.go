package sdk

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// failureMessage is the message of the hooks engine's record of a failed
// hook, which the SDK does not forward (the host logs the failure itself).
const failureMessage = "hook failed; its effects are dropped"

// hostLogWriter turns zerolog records into host.log notifications, so the
// host logs them under the plugin's name (and, during a hook, the hook's
// name and the turn's correlation id).
type hostLogWriter struct {
	s    *server
	call *call // nil outside an invocation
}

var _ zerolog.LevelWriter = (*hostLogWriter)(nil)

func (w *hostLogWriter) Write(p []byte) (int, error) {
	return w.WriteLevel(zerolog.NoLevel, p)
}

func (w *hostLogWriter) WriteLevel(_ zerolog.Level, p []byte) (int, error) {
	if w.call != nil && capture(w.call, p) {
		return len(p), nil
	}
	w.forward(p)
	return len(p), nil
}

// capture drops the engine's own record of the call's failed hook: the
// failure is answered to the host as the call's error (see runObserver),
// and the host logs it once, with the plugin's and the hook's names.
func capture(_ *call, p []byte) bool {
	var rec struct {
		Message string `json:"message"`
	}
	return json.Unmarshal(p, &rec) == nil && rec.Message == failureMessage
}

func (w *hostLogWriter) forward(p []byte) {
	var fields map[string]any
	if err := json.Unmarshal(p, &fields); err != nil {
		fields = map[string]any{"message": string(p)}
	}
	params := protocol.LogParams{Level: "info"}
	if lvl, ok := fields[zerolog.LevelFieldName].(string); ok {
		params.Level = lvl
	}
	if msg, ok := fields[zerolog.MessageFieldName].(string); ok {
		params.Message = msg
	}
	// The host adds these itself.
	for _, k := range []string{zerolog.LevelFieldName, zerolog.MessageFieldName, zerolog.TimestampFieldName, "plugin", "hook", "event", "correlation_id"} {
		delete(fields, k)
	}
	if len(fields) > 0 {
		params.Fields = fields
	}
	if w.call != nil {
		params.Invocation = w.call.inv
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = w.s.conn.Notify(ctx, protocol.MethodLog, params)
}
