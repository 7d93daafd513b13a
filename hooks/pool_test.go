package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// These tests run in real time, outside a synctest bubble: the path with
// the shared deadline scheduler and pooled workers (inside a bubble the
// engine falls back to a timer and goroutines of the emission's own).

// stuckTimeout is the deadline of a hook that ignores its context.
const stuckTimeout = 20 * time.Millisecond

// A hook that ignores its context is abandoned by the shared scheduler in
// the serial modes and in the collector; the workers it leaves stuck do
// not keep later emissions from running.
func TestPooledEmissionAbandonsStuckHook(t *testing.T) {
	for _, collector := range []bool{false, true} {
		name := map[bool]string{false: "serial", true: "collector"}[collector]
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			defer close(release)
			var started sync.WaitGroup
			stuck := func() { started.Done(); <-release }
			var reg *hooks.Registry
			if collector {
				reg = hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p",
					hooks.Handle(hooks.MessageEnrich, "stuck", func(context.Context, *hooks.MessageEnrichContext) error {
						stuck()
						return nil
					}, hooks.Timeout(stuckTimeout)),
					hooks.Handle(hooks.MessageEnrich, "quick", func(_ context.Context, c *hooks.MessageEnrichContext) error {
						c.AddMetadata("quick", "yes")
						return nil
					}),
				)}, hooks.Options{CollectorConcurrency: 1})
			} else {
				reg = hooktest.NewRegistry(t,
					hooks.Handle(hooks.MessageBeforeResponse, "stuck", func(_ context.Context, c *hooks.BeforeResponseContext) error {
						c.Draft.Text = "stuck"
						stuck()
						return nil
					}, hooks.Timeout(stuckTimeout), hooks.Priority(1)),
					hooks.Handle(hooks.MessageBeforeResponse, "quick", func(_ context.Context, c *hooks.BeforeResponseContext) error {
						c.Draft.Text += "+quick"
						return nil
					}),
				)
			}
			const emissions = 3
			started.Add(emissions)
			for i := range emissions {
				start := time.Now()
				if collector {
					c := hooktest.MessageEnrich("hi")
					hooktest.Emit(t, reg, hooks.MessageEnrich, c)
					if len(c.Items) != 1 || c.Items[0].Key != "quick" {
						t.Errorf("emission %d: items = %+v, want the quick hook's", i, c.Items)
					}
				} else {
					c := hooktest.BeforeResponse("draft")
					hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c)
					if c.Draft.Text != "draft+quick" {
						t.Errorf("emission %d: text = %q, want draft+quick", i, c.Draft.Text)
					}
				}
				if got := time.Since(start); got < stuckTimeout {
					t.Errorf("emission %d returned after %v, before the stuck hook's deadline", i, got)
				}
			}
			started.Wait() // every stuck hook is still blocked: they were abandoned
			for _, s := range reg.Stats() {
				want := hooks.HookStats{Event: s.Event, Plugin: s.Plugin, Hook: s.Hook, Invocations: emissions, Total: s.Total, Max: s.Max, Buckets: s.Buckets}
				if s.Hook == "stuck" {
					want.Timeouts, want.Abandoned = emissions, emissions
				}
				if !reflect.DeepEqual(s, want) {
					t.Errorf("stats = %+v, want %+v", s, want)
				}
			}
		})
	}
}

// Cancelling the emitter's context while an ordinary hook blocks on its
// own context ends the emission with the context's error.
func TestPooledEmissionCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	running := make(chan struct{})
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.ToolBeforeCall, "waits", func(ctx context.Context, c *hooks.ToolBeforeCallContext) error {
			close(running)
			<-ctx.Done()
			c.Decline("too late")
			return nil
		}),
	)
	go func() { <-running; cancel() }()
	c := hooktest.ToolBeforeCall("t", `{}`)
	if err := hooks.Emit(ctx, reg, hooks.ToolBeforeCall, c); !errors.Is(err, context.Canceled) {
		t.Errorf("Emit = %v, want context.Canceled", err)
	}
	if c.Declined {
		t.Error("a hook that ended with the cancelled emission declined the call")
	}
}

// Many emissions at once share the scheduler and the workers; each gets
// its own result (run with -race).
func TestPooledEmissionsInParallel(t *testing.T) {
	hs := []hooks.Hook{
		hooks.Handle(hooks.MessageBeforeResponse, "inline", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			c.Draft.Text += "+i"
			return nil
		}, hooks.Inline(), hooks.Priority(1)),
	}
	for i := range 3 {
		hs = append(hs, hooks.Handle(hooks.MessageBeforeResponse, fmt.Sprintf("h%d", i), func(ctx context.Context, c *hooks.BeforeResponseContext) error {
			if _, ok := ctx.Deadline(); !ok {
				return errors.New("no deadline")
			}
			c.Draft.Text += fmt.Sprintf("+%d", i)
			return nil
		}))
	}
	enrich := []hooks.Hook{}
	for i := range 4 {
		var opts []hooks.Option
		if i%2 == 0 {
			opts = append(opts, hooks.Inline())
		}
		enrich = append(enrich, hooks.Handle(hooks.MessageEnrich, fmt.Sprintf("e%d", i), func(_ context.Context, c *hooks.MessageEnrichContext) error {
			c.AddMetadata(fmt.Sprintf("e%d", i), "v")
			return nil
		}, opts...))
	}
	reg := hooktest.NewRegistry(t, append(hs, enrich...)...)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				body := fmt.Sprintf("g%d-%d", g, i)
				c := hooktest.BeforeResponse(body)
				if err := hooks.Emit(context.Background(), reg, hooks.MessageBeforeResponse, c); err != nil {
					t.Error(err)
					return
				}
				if want := body + "+i+0+1+2"; c.Draft.Text != want {
					t.Errorf("text = %q, want %q", c.Draft.Text, want)
					return
				}
				e := hooktest.MessageEnrich(body)
				if err := hooks.Emit(context.Background(), reg, hooks.MessageEnrich, e); err != nil {
					t.Error(err)
					return
				}
				var keys []string
				for _, it := range e.Items {
					keys = append(keys, it.Key)
				}
				if got := strings.Join(keys, ","); got != "e0,e1,e2,e3" {
					t.Errorf("items = %s, want e0,e1,e2,e3", got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// Serial runs are reused by later emissions, but a context.Context a hook
// kept stays ended, ordinary or Inline.
func TestKeptContextStaysEndedAcrossEmissions(t *testing.T) {
	for _, inline := range []bool{false, true} {
		t.Run(map[bool]string{false: "ordinary", true: "inline"}[inline], func(t *testing.T) {
			var kept []context.Context
			var opts []hooks.Option
			if inline {
				opts = append(opts, hooks.Inline())
			}
			reg := hooktest.NewRegistry(t, hooks.Handle(hooks.MessageReceived, "keeps", func(ctx context.Context, _ *hooks.MessageReceivedContext) error {
				for i, k := range kept {
					if k.Err() == nil {
						t.Errorf("context of emission %d is live during a later emission", i)
					}
				}
				kept = append(kept, ctx)
				return nil
			}, opts...))
			for range 5 {
				hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
			}
			for i, k := range kept {
				select {
				case <-k.Done():
				default:
					t.Errorf("context of emission %d not done after the emission", i)
				}
			}
		})
	}
}

// A run with an abandoned hook is never reused: the hook may still write
// to its copy when it finally returns (run with -race).
func TestAbandonedRunIsNotReused(t *testing.T) {
	release, stop := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	var lateDone sync.WaitGroup
	lateDone.Add(1)
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.MessageBeforeResponse, "first-stuck", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			if calls.Add(1) == 1 {
				defer lateDone.Done()
				<-release
				// Scribble on its own copy, long after it was abandoned,
				// while later emissions run.
				for {
					select {
					case <-stop:
						return nil
					default:
						c.Draft.Text = "scribbled"
						runtime.Gosched()
					}
				}
			}
			return nil
		}, hooks.Timeout(stuckTimeout)),
		hooks.Handle(hooks.MessageBeforeResponse, "suffix", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			c.Draft.Text += "+s"
			return nil
		}, hooks.Priority(200)),
	)
	c := hooktest.BeforeResponse("first")
	hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c)
	if c.Draft.Text != "first+s" {
		t.Errorf("text = %q, want first+s", c.Draft.Text)
	}
	close(release)
	for i := range 200 {
		body := fmt.Sprintf("m%d", i)
		c := hooktest.BeforeResponse(body)
		hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c)
		if c.Draft.Text != body+"+s" {
			t.Errorf("text = %q, want %q", c.Draft.Text, body+"+s")
			break
		}
	}
	close(stop)
	lateDone.Wait()
}
