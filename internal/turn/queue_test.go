package turn

import (
	"context"
	"errors"
	"testing"

	"maunium.net/go/mautrix/id"
)

func TestTurnIndexStop(t *testing.T) {
	tests := []struct {
		name     string
		running  bool
		target   id.EventID
		viaReply bool
		found    bool
		cause    error // what the turn's context ends with
	}{
		{name: "running, by its message", running: true, target: "$q", found: true, cause: ErrRedacted},
		{name: "queued, by its message", target: "$q", found: true, cause: ErrRedacted},
		{name: "running, by its reply", running: true, target: "$reply", viaReply: true, found: true, cause: ErrRedacted},
		{name: "a reply does not count for a redaction", running: true, target: "$reply", found: false},
		{name: "unknown", running: true, target: "$nope", found: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var x Index
			x.Queue("$q", "scope")
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tt.running {
				x.start("$q", cancel)
				x.Alias("$reply", "$q")
			}
			scope, ok := x.Stop(tt.target, ErrRedacted, tt.viaReply)
			if ok != tt.found || (ok && scope != "scope") {
				t.Fatalf("stop = %q, %v; want found %v", scope, ok, tt.found)
			}
			if !tt.running {
				x.start("$q", cancel) // the queued turn's turn comes
			}
			if got := context.Cause(ctx); !errors.Is(got, tt.cause) || (tt.cause == nil && got != nil) {
				t.Errorf("turn context ends with %v, want %v", got, tt.cause)
			}
			x.remove("$q")
			if _, ok := x.Stop("$q", ErrStopped, true); ok {
				t.Error("a removed turn was found")
			}
		})
	}
}
