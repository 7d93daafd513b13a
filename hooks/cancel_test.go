package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// stepFunc is what the i-th hook of a chain does before it returns
// successfully.
type stepFunc func(ctx context.Context, i int)

// emitter builds a registry of n hooks of one event, each calling step
// with its index, and emits the event once with ctx.
type emitter func(t *testing.T, ctx context.Context, n int, step stepFunc) error

func emitWith[T any, P hooks.ContextOf[T]](ev hooks.Event[T], newC func() P, opts hooks.Options, hookOpts ...hooks.Option) emitter {
	return func(t *testing.T, ctx context.Context, n int, step stepFunc) error {
		hs := make([]hooks.Hook, n)
		for i := range hs {
			hs[i] = hooks.Handle(ev, fmt.Sprintf("h%d", i), func(ctx context.Context, _ *T) error {
				step(ctx, i)
				return nil
			}, append([]hooks.Option{hooks.Timeout(time.Hour)}, hookOpts...)...)
		}
		reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p", hs...)}, opts)
		return hooks.Emit(ctx, reg, ev, newC())
	}
}

var modes = []struct {
	name string
	emit emitter
}{
	{"observer", emitWith(hooks.MessageReceived, func() *hooks.MessageReceivedContext { return hooktest.MessageReceived("hi") }, hooks.Options{})},
	{"transformer", emitWith(hooks.MessageBeforeResponse, func() *hooks.BeforeResponseContext { return hooktest.BeforeResponse("draft") }, hooks.Options{})},
	{"gate", emitWith(hooks.ToolBeforeCall, func() *hooks.ToolBeforeCallContext { return hooktest.ToolBeforeCall("t", `{}`) }, hooks.Options{})},
	{"claim", emitWith(hooks.MessageClaim, func() *hooks.MessageClaimContext { return hooktest.MessageClaim("hi") }, hooks.Options{})},
	// One slot: every hook but the first waits for it.
	{"collector", emitWith(hooks.MessageEnrich, func() *hooks.MessageEnrichContext { return hooktest.MessageEnrich("hi") }, hooks.Options{CollectorConcurrency: 1})},
	// The same with Inline hooks, which run on the emitter.
	{"inline/observer", emitWith(hooks.MessageReceived, func() *hooks.MessageReceivedContext { return hooktest.MessageReceived("hi") }, hooks.Options{}, hooks.Inline())},
	{"inline/transformer", emitWith(hooks.MessageBeforeResponse, func() *hooks.BeforeResponseContext { return hooktest.BeforeResponse("draft") }, hooks.Options{}, hooks.Inline())},
	{"inline/gate", emitWith(hooks.ToolBeforeCall, func() *hooks.ToolBeforeCallContext { return hooktest.ToolBeforeCall("t", `{}`) }, hooks.Options{}, hooks.Inline())},
	{"inline/claim", emitWith(hooks.MessageClaim, func() *hooks.MessageClaimContext { return hooktest.MessageClaim("hi") }, hooks.Options{}, hooks.Inline())},
	{"inline/collector", emitWith(hooks.MessageEnrich, func() *hooks.MessageEnrichContext { return hooktest.MessageEnrich("hi") }, hooks.Options{}, hooks.Inline())},
}

// Cancelling the context an emission was started with starts no later
// hook, and the emission returns the context's error.
func TestCancellationStopsTheChain(t *testing.T) {
	for _, m := range modes {
		for _, tc := range []struct {
			name     string
			cancelIn int // the hook that cancels; -1: before the emission
			want     string
		}{
			{"before the emission", -1, ""},
			{"by the first hook", 0, "0"},
			{"by a middle hook", 1, "0,1"},
			{"by the last hook", 2, "0,1,2"},
		} {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				// Repeat: the old engine lost this race only sometimes.
				for range 25 {
					ctx, cancel := context.WithCancel(context.Background())
					if tc.cancelIn < 0 {
						cancel()
					}
					var mu sync.Mutex
					var ran []string
					err := m.emit(t, ctx, 3, func(_ context.Context, i int) {
						mu.Lock()
						ran = append(ran, fmt.Sprint(i))
						mu.Unlock()
						if i == tc.cancelIn {
							cancel()
						}
					})
					cancel()
					mu.Lock()
					got := strings.Join(ran, ",")
					mu.Unlock()
					if got != tc.want || !errors.Is(err, context.Canceled) {
						t.Fatalf("ran %q, err %v; want %q and context.Canceled", got, err, tc.want)
					}
				}
			})
		}
	}
}

// When the emission's deadline passes while a hook waits on its own
// context, that hook ends and no later hook starts.
func TestEmissionDeadlineStopsTheChain(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				defer cancel()
				var mu sync.Mutex
				var ran []int
				start := time.Now()
				err := m.emit(t, ctx, 2, func(ctx context.Context, i int) {
					mu.Lock()
					ran = append(ran, i)
					mu.Unlock()
					if i == 0 {
						<-ctx.Done()
					}
				})
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if !errors.Is(err, context.DeadlineExceeded) || !slices.Equal(ran, []int{0}) {
					t.Errorf("ran %v, err %v; want [0] and context.DeadlineExceeded", ran, err)
				}
				if got := time.Since(start); got != 100*time.Millisecond {
					t.Errorf("emission took %v, want 100ms", got)
				}
			})
		})
	}
}
