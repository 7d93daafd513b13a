package hooks

import "context"

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
