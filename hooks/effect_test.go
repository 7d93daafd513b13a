package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// runLog is a RunObserver that keeps every run by hook name.
type runLog struct {
	mu   sync.Mutex
	runs map[string]hooks.HookRun
}

func (l *runLog) HookRan(_ context.Context, r hooks.HookRun) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs == nil {
		l.runs = map[string]hooks.HookRun{}
	}
	l.runs[r.Hook] = r
}

func (l *runLog) get() map[string]hooks.HookRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs
}

// effectChain builds hooks h0, h1, … of ev doing steps, with opts, emits
// ev once on newC() with ctx and an observer, and returns the runs.
func effectChain[T any, P hooks.ContextOf[T]](ev hooks.Event[T], newC func() P, steps ...func(context.Context, *T) error) func(*testing.T, context.Context, ...hooks.Option) map[string]hooks.HookRun {
	return func(t *testing.T, ctx context.Context, opts ...hooks.Option) map[string]hooks.HookRun {
		t.Helper()
		hs := make([]hooks.Hook, len(steps))
		for i, step := range steps {
			hs[i] = hooks.Handle(ev, fmt.Sprintf("h%d", i), step, opts...)
		}
		obs := &runLog{}
		reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("p", hs...)}, hooks.Options{Observer: obs})
		if err := hooks.Emit(ctx, reg, ev, newC()); err != nil {
			t.Fatal(err)
		}
		return obs.get()
	}
}

func ok[T any](f func(*T)) func(context.Context, *T) error {
	return func(_ context.Context, c *T) error {
		f(c)
		return nil
	}
}

func nop[T any](context.Context, *T) error { return nil }

type wantRun struct {
	effect hooks.Effect
	change string
}

func scheduleFired() *hooks.ScheduleFiredContext {
	return &hooks.ScheduleFiredContext{TaskID: "t1", RoomID: "!room:localhost", MessageText: "standup"}
}

// Every mode reports what each successful hook changed, compared with what
// it got: with WithRunDetail the Effect and the Change, without it the
// Effect only; hooks after a decline or a claim do not run.
func TestHookRunEffect(t *testing.T) {
	long := "a" + strings.Repeat("é", 100) // 201 bytes: byte 120 is inside an é
	cases := []struct {
		name string
		mode hooks.Mode
		emit func(*testing.T, context.Context, ...hooks.Option) map[string]hooks.HookRun
		want []wantRun // by hook index; a hook past the end must not have run
	}{
		{"observer/unchanged", hooks.Observer,
			effectChain(hooks.MessageReceived, func() *hooks.MessageReceivedContext { return hooktest.MessageReceived("hi") },
				nop[hooks.MessageReceivedContext]),
			[]wantRun{{hooks.EffectUnchanged, ""}}},
		{"observer/suppress then clear", hooks.Observer,
			effectChain(hooks.MessageReceived, func() *hooks.MessageReceivedContext { return hooktest.MessageReceived("hi") },
				ok(func(c *hooks.MessageReceivedContext) { c.Suppress = true }),
				ok(func(c *hooks.MessageReceivedContext) { c.Suppress = true }),
				ok(func(c *hooks.MessageReceivedContext) { c.Suppress = false })),
			[]wantRun{
				{hooks.EffectSuppressed, "suppress: false → true"},
				{hooks.EffectUnchanged, ""},
				{hooks.EffectChanged, "suppress: true → false"},
			}},
		{"observer/message_text", hooks.Observer,
			effectChain(hooks.ScheduleFired, scheduleFired,
				ok(func(c *hooks.ScheduleFiredContext) { c.MessageText += "!" }),
				nop[hooks.ScheduleFiredContext],
				ok(func(c *hooks.ScheduleFiredContext) { c.MessageText = "x"; c.Suppress = true })),
			[]wantRun{
				{hooks.EffectChanged, `message_text: "standup" → "standup!"`},
				{hooks.EffectUnchanged, ""},
				{hooks.EffectSuppressed, `message_text: "standup!" → "x"; suppress: false → true`},
			}},
		{"observer/read-only event", hooks.Observer,
			effectChain(hooks.MessageAfterResponse, func() *hooks.AfterResponseContext { return hooktest.AfterResponse("done") },
				ok(func(c *hooks.AfterResponseContext) { c.Result.Text = "ignored" })),
			[]wantRun{{hooks.EffectUnchanged, ""}}},
		{"collector/message items", hooks.Collector,
			effectChain(hooks.MessageEnrich, func() *hooks.MessageEnrichContext { return hooktest.MessageEnrich("hi") },
				ok(func(c *hooks.MessageEnrichContext) {
					c.AddMetadata("weather", "sunny")
					c.AddMetadata("time", "noon")
				}),
				nop[hooks.MessageEnrichContext],
				ok(func(c *hooks.MessageEnrichContext) { c.AddMetadata("news", "none", hooks.TransientItem) })),
			[]wantRun{
				{hooks.EffectChanged, `+2 items: message_context "weather", message_context "time"`},
				{hooks.EffectUnchanged, ""},
				{hooks.EffectChanged, `+1 item: transient_context "news"`},
			}},
		{"collector/system items", hooks.Collector,
			effectChain(hooks.SystemEnrich, func() *hooks.SystemEnrichContext { return hooktest.SystemEnrich("hi") },
				ok(func(c *hooks.SystemEnrichContext) { c.AddInstruction("rules", "be nice", hooks.StableItem) })),
			[]wantRun{{hooks.EffectChanged, `+1 item: system_context "rules"`}}},
		{"transformer/chain", hooks.Transformer,
			effectChain(hooks.MessageBeforeResponse, func() *hooks.BeforeResponseContext { return hooktest.BeforeResponse("Hello") },
				ok(func(c *hooks.BeforeResponseContext) { c.Draft.Text += "!" }),
				nop[hooks.BeforeResponseContext],
				ok(func(c *hooks.BeforeResponseContext) { c.Draft.Suppress = true }),
				ok(func(c *hooks.BeforeResponseContext) { c.Draft.Suppress = false; c.Draft.Text = long }),
				ok(func(c *hooks.BeforeResponseContext) {
					c.Draft.Extra = []byte(`{"a":1}`)
					c.Draft.ToolTrace = append(c.Draft.ToolTrace, hooks.ToolTraceEntry{Tool: "x"})
				})),
			[]wantRun{
				{hooks.EffectChanged, `response_text: "Hello" → "Hello!"`},
				{hooks.EffectUnchanged, ""},
				{hooks.EffectSuppressed, "suppress: false → true"},
				{hooks.EffectChanged, `response_text: "Hello!" → "a` + strings.Repeat("é", 59) + `"…; suppress: true → false`},
				{hooks.EffectChanged, `extra: "" → "{\"a\":1}"; tool_trace: 0 → 1 entries`},
			}},
		{"transformer/final response", hooks.Transformer,
			effectChain(hooks.MessageFinalResponseTransform, func() *hooks.FinalResponseContext { return hooktest.FinalResponse("Hello") },
				nop[hooks.FinalResponseContext],
				ok(func(c *hooks.FinalResponseContext) { c.Draft.Text = "Bye\n" })),
			[]wantRun{
				{hooks.EffectUnchanged, ""},
				{hooks.EffectChanged, `response_text: "Hello" → "Bye\n"`},
			}},
		{"gate/approval then decline", hooks.Gate,
			effectChain(hooks.ToolBeforeCall, func() *hooks.ToolBeforeCallContext { return hooktest.ToolBeforeCall("shell", `{}`) },
				nop[hooks.ToolBeforeCallContext],
				ok(func(c *hooks.ToolBeforeCallContext) { c.RequireApproval("risky") }),
				ok(func(c *hooks.ToolBeforeCallContext) { c.Decline("no shell") }),
				ok(func(c *hooks.ToolBeforeCallContext) { c.Decline("never asked") })),
			[]wantRun{
				{hooks.EffectUnchanged, ""},
				{hooks.EffectApprovalRequired, `approval_required: "risky"`},
				{hooks.EffectDeclined, `declined: "no shell"`},
			}},
		{"gate/approval denied", hooks.Gate,
			effectChain(hooks.ToolApprovalRequested, func() *hooks.ToolApprovalRequestedContext { return hooktest.ToolApprovalRequested("shell", `{}`) },
				nop[hooks.ToolApprovalRequestedContext],
				ok(func(c *hooks.ToolApprovalRequestedContext) { c.Deny("not today") })),
			[]wantRun{
				{hooks.EffectUnchanged, ""},
				{hooks.EffectDeclined, `denied: "not today"`},
			}},
		{"gate/approval approved", hooks.Gate,
			effectChain(hooks.ToolApprovalRequested, func() *hooks.ToolApprovalRequestedContext { return hooktest.ToolApprovalRequested("shell", `{}`) },
				ok(func(c *hooks.ToolApprovalRequestedContext) { c.Approve("trusted") })),
			[]wantRun{{hooks.EffectChanged, `approved: "trusted"`}}},
		{"claim", hooks.Claim,
			effectChain(hooks.MessageClaim, func() *hooks.MessageClaimContext { return hooktest.MessageClaim("hi") },
				nop[hooks.MessageClaimContext],
				ok(func(c *hooks.MessageClaimContext) { c.Claim("mine") }),
				ok(func(c *hooks.MessageClaimContext) { c.Claim("too late") })),
			[]wantRun{
				{hooks.EffectUnchanged, ""},
				{hooks.EffectClaimed, `claimed: "mine"`},
			}},
	}
	for _, tc := range cases {
		for _, path := range []string{"ordinary", "inline"} {
			for _, detail := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/detail=%v", tc.name, path, detail), func(t *testing.T) {
					var opts []hooks.Option
					if path == "inline" {
						opts = append(opts, hooks.Inline())
					}
					ctx := hooktest.Context(t)
					if detail {
						ctx = hooks.WithRunDetail(ctx)
					}
					runs := tc.emit(t, ctx, opts...)
					if len(runs) != len(tc.want) {
						t.Errorf("%d runs, want %d: %+v", len(runs), len(tc.want), runs)
					}
					for i, w := range tc.want {
						name := fmt.Sprintf("h%d", i)
						r, ran := runs[name]
						if !ran {
							t.Errorf("%s did not run", name)
							continue
						}
						if !detail {
							w.change = ""
						}
						if r.Outcome != hooks.OutcomeOK || r.Mode != tc.mode || r.Abandoned {
							t.Errorf("%s: outcome %v mode %v abandoned %v; want ok %v false", name, r.Outcome, r.Mode, r.Abandoned, tc.mode)
						}
						if r.Effect != w.effect || r.Change != w.change {
							t.Errorf("%s: effect %v change %q; want %v %q", name, r.Effect, r.Change, w.effect, w.change)
						}
					}
				})
			}
		}
	}
}

// A run that did not succeed has no effect, whatever it did to its copy;
// only a hook that ignores its deadline is abandoned (Inline hooks are
// waited for, never abandoned).
func TestHookRunFailureHasNoEffect(t *testing.T) {
	type behave func(ctx context.Context, touch func()) error
	behaviours := []struct {
		name      string
		outcome   hooks.Outcome
		abandoned bool // on the ordinary path
		do        behave
	}{
		{"error", hooks.OutcomeError, false, func(_ context.Context, touch func()) error { touch(); return errors.New("nope") }},
		{"panic", hooks.OutcomePanic, false, func(_ context.Context, touch func()) error { touch(); panic("boom") }},
		{"late", hooks.OutcomeTimeout, false, func(ctx context.Context, touch func()) error {
			touch()
			<-ctx.Done()
			return nil
		}},
		{"ignores deadline", hooks.OutcomeTimeout, true, func(_ context.Context, touch func()) error {
			touch()
			time.Sleep(time.Hour)
			return nil
		}},
	}
	type emitFn func(t *testing.T, ctx context.Context, do behave, opts ...hooks.Option) map[string]hooks.HookRun
	wrap := func(b behave, touch func()) func(ctx context.Context) error {
		return func(ctx context.Context) error { return b(ctx, touch) }
	}
	modes := []struct {
		name string
		emit emitFn
	}{
		{"observer", func(t *testing.T, ctx context.Context, do behave, opts ...hooks.Option) map[string]hooks.HookRun {
			return effectChain(hooks.MessageReceived, func() *hooks.MessageReceivedContext { return hooktest.MessageReceived("hi") },
				func(ctx context.Context, c *hooks.MessageReceivedContext) error {
					return wrap(do, func() { c.Suppress = true })(ctx)
				})(t, ctx, opts...)
		}},
		{"collector", func(t *testing.T, ctx context.Context, do behave, opts ...hooks.Option) map[string]hooks.HookRun {
			return effectChain(hooks.MessageEnrich, func() *hooks.MessageEnrichContext { return hooktest.MessageEnrich("hi") },
				func(ctx context.Context, c *hooks.MessageEnrichContext) error {
					return wrap(do, func() { c.AddMetadata("k", "v") })(ctx)
				})(t, ctx, opts...)
		}},
		{"transformer", func(t *testing.T, ctx context.Context, do behave, opts ...hooks.Option) map[string]hooks.HookRun {
			return effectChain(hooks.MessageBeforeResponse, func() *hooks.BeforeResponseContext { return hooktest.BeforeResponse("Hello") },
				func(ctx context.Context, c *hooks.BeforeResponseContext) error {
					return wrap(do, func() { c.Draft.Text = "changed" })(ctx)
				})(t, ctx, opts...)
		}},
		{"gate", func(t *testing.T, ctx context.Context, do behave, opts ...hooks.Option) map[string]hooks.HookRun {
			return effectChain(hooks.ToolBeforeCall, func() *hooks.ToolBeforeCallContext { return hooktest.ToolBeforeCall("shell", `{}`) },
				func(ctx context.Context, c *hooks.ToolBeforeCallContext) error {
					return wrap(do, func() { c.Decline("no") })(ctx)
				})(t, ctx, opts...)
		}},
		{"claim", func(t *testing.T, ctx context.Context, do behave, opts ...hooks.Option) map[string]hooks.HookRun {
			return effectChain(hooks.MessageClaim, func() *hooks.MessageClaimContext { return hooktest.MessageClaim("hi") },
				func(ctx context.Context, c *hooks.MessageClaimContext) error {
					return wrap(do, func() { c.Claim("mine") })(ctx)
				})(t, ctx, opts...)
		}},
	}
	for _, m := range modes {
		for _, b := range behaviours {
			for _, path := range []string{"ordinary", "inline"} {
				t.Run(m.name+"/"+b.name+"/"+path, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						opts := []hooks.Option{hooks.Timeout(10 * time.Millisecond)}
						if path == "inline" {
							opts = append(opts, hooks.Inline())
						}
						runs := m.emit(t, hooks.WithRunDetail(hooktest.Context(t)), b.do, opts...)
						r, ran := runs["h0"]
						if !ran {
							t.Fatalf("h0 did not run: %+v", runs)
						}
						wantAbandoned := b.abandoned && path == "ordinary"
						if r.Outcome != b.outcome || r.Abandoned != wantAbandoned || r.Effect != hooks.EffectNone || r.Change != "" {
							t.Errorf("run: outcome %v abandoned %v effect %v change %q; want %v %v none \"\"",
								r.Outcome, r.Abandoned, r.Effect, r.Change, b.outcome, wantAbandoned)
						}
						drain()
					})
				})
			}
		}
	}
}

func TestEffectString(t *testing.T) {
	want := map[hooks.Effect]string{
		hooks.EffectNone: "none", hooks.EffectUnchanged: "unchanged", hooks.EffectChanged: "changed",
		hooks.EffectSuppressed: "suppressed", hooks.EffectClaimed: "claimed", hooks.EffectDeclined: "declined",
		hooks.EffectApprovalRequired: "approval_required", hooks.Effect(200): "unknown",
	}
	for e, s := range want {
		if e.String() != s {
			t.Errorf("Effect(%d) = %q, want %q", e, e.String(), s)
		}
	}
}
