package turn

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
)

// Emit runs the hooks of ev on c (hooks.Emit) and logs when they did not
// all finish: a warning, or a debug line when the turn was stopped on
// purpose (🛑, a redaction of its message), which ends its hooks too.
// What the hooks decided before is in c either way; callers that must
// not go on without every hook's answer call hooks.Emit themselves.
func Emit[T any, P hooks.ContextOf[T]](ctx context.Context, reg *hooks.Registry, ev hooks.Event[T], c P) {
	err := hooks.Emit(ctx, reg, ev, c)
	if err == nil {
		return
	}
	level := zerolog.WarnLevel
	if _, stopped := StopCause(ctx); stopped != nil {
		level = zerolog.DebugLevel
	}
	zerolog.Ctx(ctx).WithLevel(level).Err(err).Str("event", ev.Name()).Msgf("%s hooks did not finish", ev.Name())
}
