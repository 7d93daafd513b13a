package hooks_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// A hook context whose correlation id was left empty gets the one the
// emission's context carries; one set on the hook context wins; without
// either, the engine makes one.
func TestCorrelationIDFromContext(t *testing.T) {
	var seen string
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.MessageReceived, "see", func(_ context.Context, c *hooks.MessageReceivedContext) error {
			seen = c.CorrelationID
			return nil
		}),
	)
	for _, tc := range []struct {
		name, ctxID, own, want string
	}{
		{"from the context", "$event", "", "$event"},
		{"the hook context's own wins", "$event", "mine", "mine"},
		{"neither: a new one", "", "", "message:received:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hooktest.MessageReceived("hello")
			c.CorrelationID = tc.own
			ctx := hooks.WithCorrelationID(context.Background(), tc.ctxID)
			if got := hooks.CorrelationID(ctx); got != tc.ctxID {
				t.Errorf("CorrelationID(ctx) = %q, want %q", got, tc.ctxID)
			}
			if err := hooks.Emit(ctx, reg, hooks.MessageReceived, c); err != nil {
				t.Fatal(err)
			}
			if seen != tc.want && !(strings.HasSuffix(tc.want, ":") && strings.HasPrefix(seen, tc.want) && len(seen) > len(tc.want)) {
				t.Errorf("the hook saw correlation id %q, want %q", seen, tc.want)
			}
		})
	}
}
