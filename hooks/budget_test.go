package hooks_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// A hook's deadline is its own start plus its timeout: what the engine does
// about the hook before it (the failure's log line, the observer, the
// handoff after an abandonment) is not charged to it. Here reporting the
// first hook's failure takes 60 ms, longer than the next hook's whole 40 ms
// timeout; the next hook must still keep its decision.
func TestNextHookKeepsItsBudget(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	tests := []struct {
		name  string
		first hooks.Hook
		slow  hooks.Outcome // the outcome whose report is slow
	}{
		{"after a hook that failed", hooks.Handle(hooks.MessageReceived, "first", func(context.Context, *hooks.MessageReceivedContext) error {
			return errors.New("no")
		}, hooks.Priority(1)), hooks.OutcomeError},
		{"after an inline hook that failed", hooks.Handle(hooks.MessageReceived, "first", func(context.Context, *hooks.MessageReceivedContext) error {
			return errors.New("no")
		}, hooks.Inline(), hooks.Priority(1)), hooks.OutcomeError},
		{"after a hook that was abandoned", hooks.Handle(hooks.MessageReceived, "first", func(context.Context, *hooks.MessageReceivedContext) error {
			<-release
			return nil
		}, hooks.Timeout(10*time.Millisecond), hooks.Priority(1)), hooks.OutcomeTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := observerFunc(func(_ context.Context, r hooks.HookRun) {
				if r.Outcome == tt.slow {
					time.Sleep(60 * time.Millisecond) // a slow observer or log writer
				}
			})
			left := make(chan time.Duration, 1)
			reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p", tt.first,
				hooks.Handle(hooks.MessageReceived, "quick", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
					dl, _ := ctx.Deadline()
					left <- time.Until(dl)
					c.Suppress = true
					return nil
				}, hooks.Timeout(40*time.Millisecond)),
			)}, hooks.Options{Observer: obs})
			c := hooktest.MessageReceived("hi")
			if err := hooks.Emit(context.Background(), reg, hooks.MessageReceived, c); err != nil {
				t.Fatal(err)
			}
			if budget := <-left; !c.Suppress || budget <= 0 {
				t.Errorf("the second hook saw %v of its 40ms and its decision kept = %v; want time left and the decision kept", budget, c.Suppress)
			}
		})
	}
}

// Inside a synctest bubble whose fake time has passed the process's
// wall-clock start (a test of something due in 40 years), the engine still
// knows it is in a bubble: an emission with a stuck hook ends in fake time
// instead of hanging on the shared scheduler outside the bubble.
func TestStuckHookInBubbleAfterLongFakeSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.MessageReceived, "stuck", func(context.Context, *hooks.MessageReceivedContext) error {
				time.Sleep(time.Hour)
				return nil
			}, hooks.Timeout(10*time.Millisecond)),
		)
		time.Sleep(40 * 365 * 24 * time.Hour)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = hooks.Emit(context.Background(), reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("the emission did not end within a minute of fake time")
		}
		time.Sleep(2 * time.Hour) // let the abandoned hook return
	})
}

// A hook's copy never shares spare capacity with the caller's slices: an
// empty slice with room to grow is copied too, so a hook that appends to it
// writes into its own array, not the caller's.
func TestCopyDoesNotShareSpareCapacity(t *testing.T) {
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.MessageReceived, "appender", func(_ context.Context, c *hooks.MessageReceivedContext) error {
			c.Envelope.MentionedAgents = append(c.Envelope.MentionedAgents, "mallory")
			return nil
		}))
	backing := make([]hooks.AgentName, 0, 4)
	c := hooktest.MessageReceived("hi")
	c.Envelope.MentionedAgents = backing
	if err := hooks.Emit(context.Background(), reg, hooks.MessageReceived, c); err != nil {
		t.Fatal(err)
	}
	if got := backing[:1][0]; got != "" {
		t.Errorf("the hook wrote %q into the caller's backing array", got)
	}
}
