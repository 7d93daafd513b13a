package hooks_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// inlineMode emits one event of a mode with an Inline subject hook (which
// makes its change, then ends as b says) followed by a follower hook with
// followerOpts. It reports whether the subject's change reached the caller
// and whether the follower's did.
type inlineMode struct {
	name string
	// stops: a successful subject ends the chain (gate, claim).
	stops bool
	emit  func(t *testing.T, b behaviour, followerOpts ...hooks.Option) (subject, follower bool, reg *hooks.Registry)
}

var subjectOpts = []hooks.Option{hooks.Inline(), hooks.Priority(1), hooks.Timeout(subjectTimeout)}

var inlineModes = []inlineMode{
	{name: "observer", emit: func(t *testing.T, b behaviour, fo ...hooks.Option) (bool, bool, *hooks.Registry) {
		var followerRan atomic.Bool
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.MessageReceived, "subject", func(_ context.Context, c *hooks.MessageReceivedContext) error {
				c.Suppress = true
				return finish(b)
			}, subjectOpts...),
			hooks.Handle(hooks.MessageReceived, "follower", func(context.Context, *hooks.MessageReceivedContext) error {
				followerRan.Store(true)
				return nil
			}, fo...),
		)
		c := hooktest.MessageReceived("hello")
		hooktest.Emit(t, reg, hooks.MessageReceived, c)
		return c.Suppress, followerRan.Load(), reg
	}},
	{name: "transformer", emit: func(t *testing.T, b behaviour, fo ...hooks.Option) (bool, bool, *hooks.Registry) {
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.MessageBeforeResponse, "subject", func(_ context.Context, c *hooks.BeforeResponseContext) error {
				c.Draft.Text = "subject"
				return finish(b)
			}, subjectOpts...),
			hooks.Handle(hooks.MessageBeforeResponse, "follower", func(_ context.Context, c *hooks.BeforeResponseContext) error {
				c.Draft.Text += "+f"
				return nil
			}, fo...),
		)
		c := hooktest.BeforeResponse("draft")
		hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c)
		return strings.HasPrefix(c.Draft.Text, "subject"), strings.HasSuffix(c.Draft.Text, "+f"), reg
	}},
	{name: "gate", stops: true, emit: func(t *testing.T, b behaviour, fo ...hooks.Option) (bool, bool, *hooks.Registry) {
		var followerRan atomic.Bool
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.ToolBeforeCall, "subject", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
				c.Arguments[2] = 'X' // its own copy
				c.Decline("no")
				return finish(b)
			}, subjectOpts...),
			hooks.Handle(hooks.ToolBeforeCall, "follower", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
				if string(c.Arguments) != `{"path":"/etc"}` {
					t.Errorf("follower saw arguments %s", c.Arguments)
				}
				followerRan.Store(true)
				return nil
			}, fo...),
		)
		c := hooktest.ToolBeforeCall("read_file", `{"path":"/etc"}`)
		hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
		if string(c.Arguments) != `{"path":"/etc"}` {
			t.Errorf("caller's arguments changed to %s", c.Arguments)
		}
		return c.Declined && c.DeclineReason == "no", followerRan.Load(), reg
	}},
	{name: "claim", stops: true, emit: func(t *testing.T, b behaviour, fo ...hooks.Option) (bool, bool, *hooks.Registry) {
		var followerRan atomic.Bool
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.MessageClaim, "subject", func(_ context.Context, c *hooks.MessageClaimContext) error {
				c.Claim("mine")
				return finish(b)
			}, subjectOpts...),
			hooks.Handle(hooks.MessageClaim, "follower", func(context.Context, *hooks.MessageClaimContext) error {
				followerRan.Store(true)
				return nil
			}, fo...),
		)
		c := hooktest.MessageClaim("hello")
		hooktest.Emit(t, reg, hooks.MessageClaim, c)
		return c.Claimed != nil && c.Claimed.Text == "mine", followerRan.Load(), reg
	}},
	{name: "collector", emit: func(t *testing.T, b behaviour, fo ...hooks.Option) (bool, bool, *hooks.Registry) {
		reg := hooktest.NewRegistry(t,
			hooks.Handle(hooks.MessageEnrich, "subject", func(_ context.Context, c *hooks.MessageEnrichContext) error {
				c.AddMetadata("subject", "s")
				return finish(b)
			}, subjectOpts...),
			hooks.Handle(hooks.MessageEnrich, "follower", func(_ context.Context, c *hooks.MessageEnrichContext) error {
				c.AddMetadata("follower", "f")
				return nil
			}, fo...),
		)
		c := hooktest.MessageEnrich("hello")
		hooktest.Emit(t, reg, hooks.MessageEnrich, c)
		var keys []string
		for _, it := range c.Items {
			keys = append(keys, it.Key)
		}
		got := strings.Join(keys, ",")
		if got != "subject,follower" && got != "follower" {
			t.Errorf("items = %s, want subject,follower or follower (hook order)", got)
		}
		return strings.Contains(got, "subject"), strings.Contains(got, "follower"), reg
	}},
}

// An Inline hook keeps the engine's rules (own copy, deadline, panic
// recovery, failure policy) in every mode, next to an ordinary or another
// Inline hook; a late one is waited for instead of being abandoned.
func TestInlineMatrix(t *testing.T) {
	for _, m := range inlineModes {
		for _, follower := range []string{"ordinary", "inline"} {
			for _, tc := range behaviours {
				if tc.b == ignores {
					continue // an inline hook that ignores its context blocks the emission: documented
				}
				t.Run(m.name+"/"+follower+"/"+tc.name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						var fo []hooks.Option
						if follower == "inline" {
							fo = append(fo, hooks.Inline())
						}
						start := time.Now()
						subject, followerRan, reg := m.emit(t, tc.b, fo...)
						elapsed := time.Since(start)
						if want := tc.b == succeed; subject != want {
							t.Errorf("subject's change counted = %v, want %v", subject, want)
						}
						if want := !(m.stops && tc.b == succeed); followerRan != want {
							t.Errorf("follower ran = %v, want %v", followerRan, want)
						}
						// Not abandoned: a late inline hook holds the emission
						// until it returns (2 × its timeout), then counts as a
						// timeout. Everything else takes no (fake) time.
						want := time.Duration(0)
						if tc.b == late {
							want = 2 * subjectTimeout
						}
						if elapsed != want {
							t.Errorf("emission took %v (fake time), want %v", elapsed, want)
						}
						wantInlineStats(t, reg, tc.b)
						synctest.Wait()
					})
				})
			}
		}
	}
}

// goid returns the calling goroutine's id (tests only).
func goid() string {
	var buf [64]byte
	s := strings.TrimPrefix(string(buf[:runtime.Stack(buf[:], false)]), "goroutine ")
	id, _, _ := strings.Cut(s, " ")
	return id
}

func TestInlineRunsOnTheEmittersGoroutine(t *testing.T) {
	var inline, ordinary atomic.Value
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.ToolBeforeCall, "inline", func(context.Context, *hooks.ToolBeforeCallContext) error {
			inline.Store(goid())
			return nil
		}, hooks.Inline(), hooks.Priority(1)),
		hooks.Handle(hooks.ToolBeforeCall, "ordinary", func(context.Context, *hooks.ToolBeforeCallContext) error {
			ordinary.Store(goid())
			return nil
		}),
	)
	hooktest.Emit(t, reg, hooks.ToolBeforeCall, hooktest.ToolBeforeCall("t", `{}`))
	me := goid()
	if inline.Load() != me {
		t.Errorf("inline hook ran on goroutine %v, want the emitter's %s", inline.Load(), me)
	}
	if ordinary.Load() == me {
		t.Errorf("ordinary hook ran on the emitter's goroutine %s, want a worker", me)
	}
}

// Leading Inline hooks share one slot, but each starts from a fresh copy
// of the context and gets a context.Context of its own that ends when it
// returns.
func TestInlineHooksGetFreshCopiesAndContexts(t *testing.T) {
	var firstCtx context.Context
	var secondRan atomic.Bool
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.MessageReceived, "first", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
			firstCtx = ctx
			<-time.After(0)
			_ = ctx.Done() // make the live context
			c.Envelope.Body = "tampered"
			c.Envelope.AttachmentIDs[0] = "tampered"
			c.Suppress = true
			return errors.New("boom")
		}, hooks.Inline(), hooks.Priority(1)),
		hooks.Handle(hooks.MessageReceived, "second", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
			secondRan.Store(true)
			if ctx.Err() != nil {
				t.Errorf("second hook's context ended: %v", ctx.Err())
			}
			if firstCtx.Err() == nil {
				t.Error("first hook's context still live after it returned")
			}
			if c.Envelope.Body != "hello" || c.Envelope.AttachmentIDs[0] != "att" || c.Suppress {
				t.Errorf("second hook saw body=%q attachment=%q suppress=%v, want the caller's", c.Envelope.Body, c.Envelope.AttachmentIDs[0], c.Suppress)
			}
			return nil
		}, hooks.Inline(), hooks.Priority(2)),
	)
	c := hooktest.MessageReceived("hello")
	c.Envelope.AttachmentIDs = []string{"att"}
	hooktest.Emit(t, reg, hooks.MessageReceived, c)
	if !secondRan.Load() {
		t.Fatal("second hook did not run")
	}
	if c.Envelope.AttachmentIDs[0] != "att" || c.Suppress {
		t.Errorf("caller's context changed: attachment=%q suppress=%v", c.Envelope.AttachmentIDs[0], c.Suppress)
	}
}

// A collector made only of Inline hooks still merges in hook order, and a
// cancellation during it leaves the caller's items unchanged.
func TestInlineCollector(t *testing.T) {
	newReg := func(t *testing.T, cancel func()) *hooks.Registry {
		hs := make([]hooks.Hook, 3)
		var firstCtx context.Context
		for i := range hs {
			hs[i] = hooks.Handle(hooks.MessageEnrich, "h"+strconv.Itoa(i), func(ctx context.Context, c *hooks.MessageEnrichContext) error {
				// The hooks share a slot; a context one of them kept
				// must stay ended while the next runs.
				if i == 0 {
					firstCtx = ctx
				} else if firstCtx.Err() == nil {
					t.Errorf("hook 0's context is live while hook %d runs", i)
				}
				c.AddMetadata("k"+strconv.Itoa(i), "v")
				if i == 1 && cancel != nil {
					cancel()
				}
				if i == 2 {
					return errors.New("no items from me")
				}
				return nil
			}, hooks.Inline())
		}
		return hooktest.NewRegistry(t, hs...)
	}
	c := hooktest.MessageEnrich("hi")
	hooktest.Emit(t, newReg(t, nil), hooks.MessageEnrich, c)
	var keys []string
	for _, it := range c.Items {
		keys = append(keys, it.Key)
	}
	if got := strings.Join(keys, ","); got != "k0,k1" {
		t.Errorf("items = %s, want k0,k1", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	c = hooktest.MessageEnrich("hi")
	if err := hooks.Emit(ctx, newReg(t, cancel), hooks.MessageEnrich, c); !errors.Is(err, context.Canceled) {
		t.Errorf("Emit = %v, want context.Canceled", err)
	}
	if len(c.Items) != 0 {
		t.Errorf("cancelled emission left items %+v", c.Items)
	}
}

func TestInlineIsListed(t *testing.T) {
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.ToolBeforeCall, "fast", func(context.Context, *hooks.ToolBeforeCallContext) error { return nil }, hooks.Inline()),
		hooks.Handle(hooks.ToolBeforeCall, "slow", func(context.Context, *hooks.ToolBeforeCallContext) error { return nil }),
	)
	got := map[string]bool{}
	for _, h := range reg.Hooks() {
		got[h.Hook] = h.Inline
	}
	if !got["fast"] || got["slow"] {
		t.Errorf("Inline listed as %v, want fast only", got)
	}
}
