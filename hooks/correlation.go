package hooks

import (
	"context"

	"maunium.net/go/mautrix/id"
)

type correlationKey struct{}

// WithCorrelationID returns ctx carrying the correlation id of what it is
// about (for a person's message, its event id). Emit sets it on every hook
// context whose CorrelationID was left empty, so the host puts it in the
// context once per event instead of on every hook context it builds.
func WithCorrelationID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, correlationKey{}, id)
}

// CorrelationID returns the correlation id ctx carries ("" for none).
func CorrelationID(ctx context.Context) string {
	id, _ := ctx.Value(correlationKey{}).(string)
	return id
}

// Where is the conversation an emission is about: the agent answering, the
// room, the thread, the person it answers and the session (room and
// thread). The host puts it in the context once per turn (WithWhere); the
// agents' tool loop and the history's compaction read it from there for the
// hook contexts they build, instead of having it copied into every request.
// The model events' contexts embed it (its JSON fields are flattened into
// theirs).
type Where struct {
	Agent       AgentName  `json:"agent"`
	RoomID      id.RoomID  `json:"room_id,omitempty"`
	ThreadID    id.EventID `json:"thread_id,omitempty"`
	RequesterID id.UserID  `json:"requester_id,omitempty"`
	SessionID   string     `json:"session_id,omitempty"`
}

type whereKey struct{}

// WithWhere returns ctx carrying w.
func WithWhere(ctx context.Context, w Where) context.Context {
	return context.WithValue(ctx, whereKey{}, w)
}

// WhereFrom returns the Where ctx carries (the zero Where for none).
func WhereFrom(ctx context.Context) Where {
	w, _ := ctx.Value(whereKey{}).(Where)
	return w
}
