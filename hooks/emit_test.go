package hooks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// behaviour is how the hook under test ends after it changed its context.
type behaviour int

const (
	succeed behaviour = iota
	fail              // returns an error
	late              // returns nil, but after its deadline
	panics            // panics
	ignores           // ignores its context and runs for an hour
)

var behaviours = []struct {
	name string
	b    behaviour
}{
	{"success", succeed}, {"error", fail}, {"timeout", late}, {"panic", panics}, {"ignores context", ignores},
}

const subjectTimeout = 50 * time.Millisecond

// finish ends the subject hook as b says. It is called after the hook made
// its change, so a failing hook's change must be dropped by the engine.
func finish(b behaviour) error {
	switch b {
	case fail:
		return errors.New("boom")
	case late:
		time.Sleep(2 * subjectTimeout)
	case panics:
		panic("kaboom")
	case ignores:
		time.Sleep(time.Hour)
	}
	return nil
}

// wantStats checks the subject's statistics after one run of an ordinary
// hook.
func wantStats(t *testing.T, reg *hooks.Registry, b behaviour) {
	t.Helper()
	checkStats(t, reg, b, false)
}

// wantInlineStats checks the subject's statistics after one run: like
// wantStats, except that an Inline hook is never abandoned.
func wantInlineStats(t *testing.T, reg *hooks.Registry, b behaviour) {
	t.Helper()
	checkStats(t, reg, b, true)
}

func checkStats(t *testing.T, reg *hooks.Registry, b behaviour, inline bool) {
	t.Helper()
	for _, s := range reg.Stats() {
		if s.Hook != "subject" {
			continue
		}
		want := hooks.HookStats{Event: s.Event, Plugin: s.Plugin, Hook: s.Hook, Invocations: 1, Total: s.Total, Max: s.Max, Buckets: s.Buckets}
		switch {
		case b == fail:
			want.Errors = 1
		case b == late && inline:
			want.Timeouts = 1 // waited for, not abandoned
		case b == late || b == ignores:
			// Both outlive their deadline by more than the grace: the
			// emission gives up on them.
			want.Timeouts, want.Abandoned = 1, 1
		case b == panics:
			want.Panics = 1
		}
		// The one run is in the bucket of its duration and every one above.
		for i, n := range s.Buckets {
			if in := s.Total <= hooks.LatencyBuckets[i]; (n == 1) != in || n > 1 {
				t.Errorf("bucket %d (≤%v) = %d for a run of %v", i, hooks.LatencyBuckets[i], n, s.Total)
			}
		}
		if len(s.Buckets) != len(hooks.LatencyBuckets) {
			t.Errorf("%d buckets, want %d", len(s.Buckets), len(hooks.LatencyBuckets))
		}
		if !reflect.DeepEqual(s, want) {
			t.Errorf("stats = %+v, want %+v", s, want)
		}
		return
	}
	t.Fatal("no stats for the subject hook")
}

// drain lets abandoned hooks (still sleeping in fake time) finish before
// the synctest bubble ends.
func drain() {
	time.Sleep(2 * time.Hour)
	synctest.Wait()
}

// timed runs emit inside a synctest bubble and checks that a hook ignoring
// its context was abandoned at its deadline instead of being waited for.
func timed(t *testing.T, b behaviour, emit func()) {
	t.Helper()
	start := time.Now()
	emit()
	elapsed := time.Since(start)
	limit := time.Millisecond
	if b == late || b == ignores {
		limit = 2 * subjectTimeout
	}
	if elapsed > limit {
		t.Errorf("emission took %v (fake time), want at most %v", elapsed, limit)
	}
	drain()
}

func TestObserverMatrix(t *testing.T) {
	for _, tc := range behaviours {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var followerSaw atomic.Int32
				reg := hooktest.NewRegistry(t,
					hooks.Handle(hooks.MessageReceived, "subject", func(_ context.Context, c *hooks.MessageReceivedContext) error {
						c.Suppress = true
						c.Envelope.Body = "tampered"
						return finish(tc.b)
					}, hooks.Priority(1), hooks.Timeout(subjectTimeout)),
					hooks.Handle(hooks.MessageReceived, "follower", func(_ context.Context, c *hooks.MessageReceivedContext) error {
						if c.Envelope.Body != "hello" {
							t.Errorf("follower saw body %q", c.Envelope.Body)
						}
						if c.Suppress {
							followerSaw.Store(2)
						} else {
							followerSaw.Store(1)
						}
						return nil
					}),
				)
				c := hooktest.MessageReceived("hello")
				timed(t, tc.b, func() { hooktest.Emit(t, reg, hooks.MessageReceived, c) })
				wantSuppress := tc.b == succeed
				if c.Suppress != wantSuppress {
					t.Errorf("Suppress = %v, want %v", c.Suppress, wantSuppress)
				}
				if c.Envelope.Body != "hello" {
					t.Errorf("caller's body changed to %q", c.Envelope.Body)
				}
				if want := map[bool]int32{true: 2, false: 1}[wantSuppress]; followerSaw.Load() != want {
					t.Errorf("follower saw state %d, want %d", followerSaw.Load(), want)
				}
				wantStats(t, reg, tc.b)
			})
		})
	}
}

func TestCollectorMatrix(t *testing.T) {
	for _, tc := range behaviours {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := hooktest.NewRegistry(t,
					hooks.Handle(hooks.MessageEnrich, "subject", func(_ context.Context, c *hooks.MessageEnrichContext) error {
						c.AddMetadata("subject", "from subject")
						return finish(tc.b)
					}, hooks.Priority(1), hooks.Timeout(subjectTimeout)),
					hooks.Handle(hooks.MessageEnrich, "follower", func(_ context.Context, c *hooks.MessageEnrichContext) error {
						c.AddMetadata("follower", "from follower", hooks.StableItem)
						return nil
					}),
				)
				c := hooktest.MessageEnrich("hello")
				timed(t, tc.b, func() { hooktest.Emit(t, reg, hooks.MessageEnrich, c) })
				var keys []string
				for _, it := range c.Items {
					keys = append(keys, it.Key)
				}
				want := "follower"
				if tc.b == succeed {
					want = "subject,follower"
				}
				if got := strings.Join(keys, ","); got != want {
					t.Errorf("items = %s, want %s", got, want)
				}
				wantStats(t, reg, tc.b)
			})
		})
	}
}

func TestTransformerMatrix(t *testing.T) {
	for _, tc := range behaviours {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reg := hooktest.NewRegistry(t,
					hooks.Handle(hooks.MessageBeforeResponse, "subject", func(_ context.Context, c *hooks.BeforeResponseContext) error {
						c.Draft.Text = "subject"
						c.Draft.Suppress = true
						c.Draft.ToolTrace = append(c.Draft.ToolTrace, hooks.ToolTraceEntry{Tool: "x"})
						return finish(tc.b)
					}, hooks.Priority(1), hooks.Timeout(subjectTimeout)),
					hooks.Handle(hooks.MessageBeforeResponse, "follower", func(_ context.Context, c *hooks.BeforeResponseContext) error {
						c.Draft.Text += "+f"
						return nil
					}),
				)
				c := hooktest.BeforeResponse("draft")
				timed(t, tc.b, func() { hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c) })
				want, wantSuppress, wantTrace := "draft+f", false, 0
				if tc.b == succeed {
					// Suppression does not end the chain: the follower
					// still transforms the suppressed draft.
					want, wantSuppress, wantTrace = "subject+f", true, 1
				}
				if c.Draft.Text != want || c.Draft.Suppress != wantSuppress || len(c.Draft.ToolTrace) != wantTrace {
					t.Errorf("draft = %q suppress=%v trace=%d, want %q %v %d", c.Draft.Text, c.Draft.Suppress, len(c.Draft.ToolTrace), want, wantSuppress, wantTrace)
				}
				wantStats(t, reg, tc.b)
			})
		})
	}
}

func TestGateMatrix(t *testing.T) {
	for _, policy := range []hooks.FailurePolicy{hooks.FailOpen, hooks.FailClosed} {
		for _, tc := range behaviours {
			t.Run(policy.String()+"/"+tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var followerRan atomic.Bool
					reg := hooktest.NewRegistry(t,
						hooks.Handle(hooks.ToolBeforeCall, "subject", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
							c.Arguments[2] = 'X' // tamper with this hook's own copy
							c.Decline("not allowed")
							return finish(tc.b)
						}, hooks.Priority(1), hooks.Timeout(subjectTimeout), hooks.WithFailurePolicy(policy)),
						hooks.Handle(hooks.ToolBeforeCall, "follower", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
							followerRan.Store(true)
							if string(c.Arguments) != `{"path":"/etc"}` {
								t.Errorf("follower saw arguments %s", c.Arguments)
							}
							return nil
						}),
					)
					c := hooktest.ToolBeforeCall("read_file", `{"path":"/etc"}`)
					timed(t, tc.b, func() { hooktest.Emit(t, reg, hooks.ToolBeforeCall, c) })
					if string(c.Arguments) != `{"path":"/etc"}` {
						t.Errorf("caller's arguments changed to %s", c.Arguments)
					}
					switch {
					case tc.b == succeed:
						if !c.Declined || c.DeclineReason != "not allowed" || followerRan.Load() {
							t.Errorf("declined=%v reason=%q followerRan=%v, want a decline that stops the chain", c.Declined, c.DeclineReason, followerRan.Load())
						}
					case policy == hooks.FailClosed:
						if !c.Declined || !strings.Contains(c.DeclineReason, "test/subject was unavailable") || followerRan.Load() {
							t.Errorf("declined=%v reason=%q followerRan=%v, want a fail-closed decline", c.Declined, c.DeclineReason, followerRan.Load())
						}
					default:
						if c.Declined || !followerRan.Load() {
							t.Errorf("declined=%v followerRan=%v, want the failure ignored (fail open)", c.Declined, followerRan.Load())
						}
					}
					wantStats(t, reg, tc.b)
				})
			})
		}
	}
}

func TestClaimMatrix(t *testing.T) {
	for _, tc := range behaviours {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var laterRan atomic.Bool
				reg := hooktest.NewRegistry(t,
					hooks.Handle(hooks.MessageClaim, "subject", func(_ context.Context, c *hooks.MessageClaimContext) error {
						c.Claim("mine")
						return finish(tc.b)
					}, hooks.Priority(1), hooks.Timeout(subjectTimeout)),
					hooks.Handle(hooks.MessageClaim, "follower", func(_ context.Context, c *hooks.MessageClaimContext) error {
						c.Claim("follower")
						return nil
					}),
					hooks.Handle(hooks.MessageClaim, "later", func(context.Context, *hooks.MessageClaimContext) error {
						laterRan.Store(true)
						return nil
					}, hooks.Priority(200)),
				)
				c := hooktest.MessageClaim("hello")
				timed(t, tc.b, func() { hooktest.Emit(t, reg, hooks.MessageClaim, c) })
				want := "follower"
				if tc.b == succeed {
					want = "mine"
				}
				if c.Claimed == nil || c.Claimed.Text != want {
					t.Errorf("claimed = %+v, want %q", c.Claimed, want)
				}
				if laterRan.Load() {
					t.Error("a hook after the claim ran")
				}
				wantStats(t, reg, tc.b)
			})
		})
	}
}

func TestCollectorRunsConcurrently(t *testing.T) {
	for _, tc := range []struct {
		name        string
		concurrency int
		want        time.Duration
	}{
		{"default bound", 0, 100 * time.Millisecond},
		{"bound of 10", 10, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var hs []hooks.Hook
				for i := range 50 {
					hs = append(hs, hooks.Handle(hooks.MessageEnrich, "sleep"+string(rune('a'+i/26))+string(rune('a'+i%26)),
						func(_ context.Context, c *hooks.MessageEnrichContext) error {
							time.Sleep(100 * time.Millisecond)
							c.AddMetadata("k", "v")
							return nil
						}))
				}
				reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p", hs...)}, hooks.Options{CollectorConcurrency: tc.concurrency})
				c := hooktest.MessageEnrich("hi")
				start := time.Now()
				hooktest.Emit(t, reg, hooks.MessageEnrich, c)
				// The first hooks start at once, the rest 50µs later.
				if got := time.Since(start); got < tc.want || got > tc.want+time.Millisecond {
					t.Errorf("50 hooks of 100 ms took %v, want %v", got, tc.want)
				}
				if len(c.Items) != 50 {
					t.Errorf("got %d items, want 50", len(c.Items))
				}
			})
		})
	}
}

func TestCollectorReplacesAbandonedWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p",
			hooks.Handle(hooks.MessageEnrich, "stuck", func(context.Context, *hooks.MessageEnrichContext) error {
				time.Sleep(time.Hour)
				return nil
			}, hooks.Timeout(10*time.Millisecond)),
			hooks.Handle(hooks.MessageEnrich, "quick", func(_ context.Context, c *hooks.MessageEnrichContext) error {
				c.AddMetadata("quick", "yes")
				return nil
			}),
		)}, hooks.Options{CollectorConcurrency: 1})
		c := hooktest.MessageEnrich("hi")
		start := time.Now()
		hooktest.Emit(t, reg, hooks.MessageEnrich, c)
		if got := time.Since(start); got != 15*time.Millisecond {
			t.Errorf("took %v, want 15ms (10ms deadline + 5ms grace)", got)
		}
		if len(c.Items) != 1 || c.Items[0].Key != "quick" {
			t.Errorf("items = %+v, want the quick hook's", c.Items)
		}
		drain()
	})
}

func TestHookContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sawDeadline time.Duration
		var sawDepth int
		var sawErr error
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.MessageReceived, "waits", func(ctx context.Context, _ *hooks.MessageReceivedContext) error {
				dl, _ := ctx.Deadline()
				sawDeadline = time.Until(dl)
				sawDepth = hooks.Depth(ctx)
				<-ctx.Done()
				sawErr = ctx.Err()
				return ctx.Err()
			}, hooks.Timeout(30*time.Millisecond)),
		)
		hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
		if sawDeadline != 30*time.Millisecond || sawDepth != 1 || !errors.Is(sawErr, context.DeadlineExceeded) {
			t.Errorf("deadline in %v, depth %d, err %v; want 30ms, 1, deadline exceeded", sawDeadline, sawDepth, sawErr)
		}
		if s := reg.Stats()[0]; s.Timeouts != 1 || s.Errors != 0 {
			t.Errorf("a hook that returned its context's error at the deadline counts as %+v, want a timeout", s)
		}
	})
}

func TestEmitStopsWhenContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.MessageReceived, "slow", func(_ context.Context, c *hooks.MessageReceivedContext) error {
				time.Sleep(time.Second)
				c.Suppress = true
				return nil
			}),
			hooks.Handle(hooks.MessageEnrich, "slow_enrich", func(_ context.Context, c *hooks.MessageEnrichContext) error {
				time.Sleep(time.Second)
				c.AddMetadata("k", "v")
				return nil
			}),
		)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		c := hooktest.MessageReceived("hi")
		if err := hooks.Emit(ctx, reg, hooks.MessageReceived, c); !errors.Is(err, context.DeadlineExceeded) || c.Suppress {
			t.Errorf("observer: err %v suppress %v, want deadline exceeded and no change", err, c.Suppress)
		}
		e := hooktest.MessageEnrich("hi")
		ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel2()
		if err := hooks.Emit(ctx2, reg, hooks.MessageEnrich, e); !errors.Is(err, context.DeadlineExceeded) || len(e.Items) != 0 {
			t.Errorf("collector: err %v items %v, want deadline exceeded and no items", err, e.Items)
		}
		drain()
	})
}

func TestFailuresAreLoggedWithPluginAndHook(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	w := zerolog.SyncWriter(&lockedWriter{w: &buf, mu: &mu})
	ctx := zerolog.New(w).WithContext(context.Background())
	reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("geo",
		hooks.Handle(hooks.MessageReceived, "locate", func(context.Context, *hooks.MessageReceivedContext) error { panic("no gps") }),
		hooks.Handle(hooks.MessageReceived, "weather", func(context.Context, *hooks.MessageReceivedContext) error { return errors.New("api down") }),
	)})
	c := hooktest.MessageReceived("hi")
	c.CorrelationID = "$evt"
	if err := hooks.Emit(ctx, reg, hooks.MessageReceived, c); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{`"plugin":"geo"`, `"hook":"locate"`, `hook panicked: no gps`, `"stack":`, `"hook":"weather"`, `api down`, `"correlation_id":"$evt"`, `"event":"message:received"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A stuck hook is abandoned at its own deadline even when an earlier hook
// of the chain has a much longer timeout.
func TestStuckHookAfterSlowTimeoutHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.MessageReceived, "quick_long_timeout", func(context.Context, *hooks.MessageReceivedContext) error { return nil }),
			hooks.Handle(hooks.MessageReceived, "stuck", func(context.Context, *hooks.MessageReceivedContext) error {
				time.Sleep(time.Hour)
				return nil
			}, hooks.Timeout(50*time.Millisecond)),
			hooks.Handle(hooks.MessageReceived, "quick_again", func(context.Context, *hooks.MessageReceivedContext) error { return nil }),
			hooks.Handle(hooks.MessageReceived, "stuck_again", func(context.Context, *hooks.MessageReceivedContext) error {
				time.Sleep(time.Hour)
				return nil
			}, hooks.Timeout(20*time.Millisecond)),
		)
		start := time.Now()
		hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
		// 50ms + 5ms grace, then 20ms + 5ms grace
		if got := time.Since(start); got != 80*time.Millisecond {
			t.Errorf("emission took %v, want 80ms", got)
		}
		drain()
	})
}

// Slices and byte fields are private to each hook: a failing hook that
// edits them in place changes nothing for the next hook or the caller.
func TestSharedFieldsAreCopied(t *testing.T) {
	custom := hooks.MustCustomEvent("todo:done")
	reg := hooktest.NewRegistry(t,
		hooks.Handle(custom, "tamper", func(_ context.Context, c *hooks.CustomEventContext) error {
			c.Payload[1] = 'Z'
			return errors.New("fail after tampering")
		}, hooks.Priority(1)),
		hooks.Handle(custom, "check", func(_ context.Context, c *hooks.CustomEventContext) error {
			if string(c.Payload) != `{"a":1}` {
				t.Errorf("next hook saw payload %s", c.Payload)
			}
			return nil
		}),
		hooks.Handle(hooks.MessageReceived, "tamper_env", func(_ context.Context, c *hooks.MessageReceivedContext) error {
			c.Envelope.MentionedAgents[0] = "evil"
			c.SkipPlugins = append(c.SkipPlugins[:0], "evil")
			return errors.New("fail")
		}),
		hooks.Handle(hooks.AgentStarted, "tamper_rooms", func(_ context.Context, c *hooks.AgentLifecycleContext) error {
			c.JoinedRooms[0] = "!evil:hs"
			return errors.New("fail")
		}),
		hooks.Handle(hooks.MessageBeforeResponse, "tamper_trace", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			c.Draft.ToolTrace[0].Args[2] = 'Z'
			c.Draft.Extra[2] = 'Z'
			return errors.New("fail")
		}),
	)
	c := hooktest.Custom(map[string]int{"a": 1})
	hooktest.Emit(t, reg, custom, c)
	if string(c.Payload) != `{"a":1}` {
		t.Errorf("caller's payload changed to %s", c.Payload)
	}
	m := hooktest.MessageReceived("hi")
	m.Envelope.MentionedAgents = []hooks.AgentName{"assistant"}
	m.SkipPlugins = []string{"other"}
	hooktest.Emit(t, reg, hooks.MessageReceived, m)
	if m.Envelope.MentionedAgents[0] != "assistant" || m.SkipPlugins[0] != "other" {
		t.Errorf("caller's envelope changed: %v %v", m.Envelope.MentionedAgents, m.SkipPlugins)
	}
	l := hooktest.Lifecycle()
	hooktest.Emit(t, reg, hooks.AgentStarted, l)
	if l.JoinedRooms[0] != hooktest.Room {
		t.Errorf("caller's joined rooms changed: %v", l.JoinedRooms)
	}
	b := hooktest.BeforeResponse("x")
	b.Draft.ToolTrace = []hooks.ToolTraceEntry{{Tool: "t", Args: []byte(`{"a":1}`)}}
	b.Draft.Extra = []byte(`{"k":1}`)
	hooktest.Emit(t, reg, hooks.MessageBeforeResponse, b)
	if string(b.Draft.ToolTrace[0].Args) != `{"a":1}` || string(b.Draft.Extra) != `{"k":1}` {
		t.Errorf("caller's draft changed: %s %s", b.Draft.ToolTrace[0].Args, b.Draft.Extra)
	}
}

// Lifecycle contexts match rooms= filters by the rooms the account joined.
func TestLifecycleRoomsFilter(t *testing.T) {
	var rec recorder
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.BotReady, "in_room", func(context.Context, *hooks.AgentLifecycleContext) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.ran = append(rec.ran, "in_room")
			return nil
		}, hooks.Rooms(hooktest.Room)),
		hooks.Handle(hooks.BotReady, "elsewhere", func(context.Context, *hooks.AgentLifecycleContext) error {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.ran = append(rec.ran, "elsewhere")
			return nil
		}, hooks.Rooms("!elsewhere:localhost")),
	)
	l := hooktest.Lifecycle()
	l.JoinedRooms = append(l.JoinedRooms, "!second:localhost")
	hooktest.Emit(t, reg, hooks.BotReady, l)
	if got := rec.list(); got != "in_room" {
		t.Errorf("ran %q, want in_room", got)
	}
}

// A hook cannot escape the recursion limit by passing a fresh context.
func TestRecursionLimitWithFreshContext(t *testing.T) {
	again := hooks.MustCustomEvent("loop:fresh")
	var runs atomic.Int32
	var svc hooktest.Services
	reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p", hooks.Handle(again, "reemit", func(_ context.Context, c *hooks.CustomEventContext) error {
		if runs.Add(1) > 10 {
			return errors.New("runaway")
		}
		if _, err := c.SendMessage(context.Background(), hooktest.Room, "hop", nil); err != nil {
			return err
		}
		return c.Emit(context.Background(), "loop:fresh", nil)
	}))}, hooks.Options{Services: svc.Bind()})
	hooktest.Emit(t, reg, again, hooktest.Custom(nil))
	if got := runs.Load(); got != 3 {
		t.Errorf("hook ran %d times, want 3", got)
	}
	var depths []int
	for _, m := range svc.Sent() {
		depths = append(depths, m.Depth)
	}
	if fmt.Sprint(depths) != "[1 2 3]" {
		t.Errorf("sent messages at depths %v, want [1 2 3]", depths)
	}
}

// observerFunc adapts a function to hooks.RunObserver.
type observerFunc func(context.Context, hooks.HookRun)

func (f observerFunc) HookRan(ctx context.Context, r hooks.HookRun) { f(ctx, r) }

// The run observer hears about every run with its outcome and error.
func TestRunObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		got := map[string]hooks.HookRun{}
		type key struct{}
		obs := observerFunc(func(ctx context.Context, r hooks.HookRun) {
			if ctx.Value(key{}) != "emitter" {
				t.Errorf("observer got a context without the emitter's values")
			}
			mu.Lock()
			got[r.Hook] = r
			mu.Unlock()
		})
		reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p",
			hooks.Handle(hooks.MessageReceived, "ok", func(context.Context, *hooks.MessageReceivedContext) error { return nil }),
			hooks.Handle(hooks.MessageReceived, "fails", func(context.Context, *hooks.MessageReceivedContext) error { return errors.New("nope") }),
			hooks.Handle(hooks.MessageReceived, "panics", func(context.Context, *hooks.MessageReceivedContext) error { panic("boom") }),
			hooks.Handle(hooks.MessageReceived, "stuck", func(context.Context, *hooks.MessageReceivedContext) error {
				time.Sleep(time.Hour)
				return nil
			}, hooks.Timeout(10*time.Millisecond)),
		)}, hooks.Options{Observer: obs})
		c := hooktest.MessageReceived("hi")
		c.CorrelationID = "$c"
		ctx := context.WithValue(context.Background(), key{}, "emitter")
		if err := hooks.Emit(ctx, reg, hooks.MessageReceived, c); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		var pe *hooks.PanicError
		switch {
		case got["ok"].Outcome != hooks.OutcomeOK || got["ok"].Err != nil || got["ok"].CorrelationID != "$c" || got["ok"].Plugin != "p" || got["ok"].Event != "message:received":
			t.Errorf("ok run: %+v", got["ok"])
		case got["fails"].Outcome != hooks.OutcomeError || got["fails"].Err == nil || got["fails"].Err.Error() != "nope":
			t.Errorf("failing run: %+v", got["fails"])
		case got["panics"].Outcome != hooks.OutcomePanic || !errors.As(got["panics"].Err, &pe):
			t.Errorf("panicking run: %+v", got["panics"])
		case got["stuck"].Outcome != hooks.OutcomeTimeout || !errors.Is(got["stuck"].Err, hooks.ErrHookTimeout):
			t.Errorf("stuck run: %+v", got["stuck"])
		}
		drain()
	})
}
