package hooks_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// memory:extracted is a transformer: a hook may drop and edit candidates
// or veto them all (which stops the chain); a hook that fails, times out
// or moves a memory to another owner changes nothing, and the next hook
// gets the list the last successful hook left.
func TestMemoryExtracted(t *testing.T) {
	type step = func(context.Context, *hooks.MemoryExtractedContext) error
	dropAndEdit := func(_ context.Context, c *hooks.MemoryExtractedContext) error {
		c.Drop(func(m hooks.ExtractedMemory) bool { return strings.Contains(m.Text, "password") })
		for i := range c.Memories {
			c.Memories[i].Text = strings.ReplaceAll(c.Memories[i].Text, "Alice", "A.")
		}
		return nil
	}
	veto := func(_ context.Context, c *hooks.MemoryExtractedContext) error {
		c.Veto("no memories from this room")
		return nil
	}
	fail := func(_ context.Context, c *hooks.MemoryExtractedContext) error {
		c.Memories = nil
		return errors.New("the audit service is down")
	}
	stuck := func(ctx context.Context, c *hooks.MemoryExtractedContext) error {
		c.Veto("too late")
		<-ctx.Done()
		return nil
	}
	steal := func(_ context.Context, c *hooks.MemoryExtractedContext) error {
		c.Memories[0].Person = "@mallory:localhost"
		return nil
	}
	blank := func(_ context.Context, c *hooks.MemoryExtractedContext) error {
		c.Memories[0].Text = "  "
		return nil
	}
	cases := []struct {
		name       string
		steps      []step
		want       []string
		wantVetoed bool
		wantRan    int // hooks that ran
	}{
		{name: "no hooks: every candidate", want: []string{"Alice has a cat.", "Alice's password is hunter2."}},
		{name: "drops one, edits one", steps: []step{dropAndEdit}, want: []string{"A. has a cat."}, wantRan: 1},
		{name: "a veto stores nothing and stops the chain", steps: []step{veto, dropAndEdit}, want: []string{"Alice has a cat.", "Alice's password is hunter2."}, wantVetoed: true, wantRan: 1},
		{name: "a failing hook changes nothing", steps: []step{fail, dropAndEdit}, want: []string{"A. has a cat."}, wantRan: 2},
		{name: "a timed-out hook changes nothing", steps: []step{stuck}, want: []string{"Alice has a cat.", "Alice's password is hunter2."}, wantRan: 1},
		{name: "a memory moved to someone else fails the hook", steps: []step{steal}, want: []string{"Alice has a cat.", "Alice's password is hunter2."}, wantRan: 1},
		{name: "a memory without text fails the hook", steps: []step{dropAndEdit, blank}, want: []string{"A. has a cat."}, wantRan: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ran := 0
				var hs []hooks.Hook
				for i, fn := range tc.steps {
					hs = append(hs, hooks.Handle(hooks.MemoryExtracted, "h"+string(rune('a'+i)), func(ctx context.Context, c *hooks.MemoryExtractedContext) error {
						ran++
						return fn(ctx, c)
					}, hooks.Timeout(50*time.Millisecond)))
				}
				reg := hooktest.NewRegistry(t, hs...)
				c := hooktest.MemoryExtracted("Alice has a cat.", "Alice's password is hunter2.")
				if err := hooks.Emit(context.Background(), reg, hooks.MemoryExtracted, c); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, m := range c.Memories {
					got = append(got, m.Text)
					if m.Person != hooktest.Sender || m.Scope != "person" || m.Agent != hooktest.Agent || m.Room != hooktest.Room {
						t.Errorf("memory %+v changed owner", m)
					}
				}
				if !slices.Equal(got, tc.want) || c.Vetoed != tc.wantVetoed || ran != tc.wantRan {
					t.Errorf("memories %q vetoed %v after %d hooks, want %q vetoed %v after %d", got, c.Vetoed, ran, tc.want, tc.wantVetoed, tc.wantRan)
				}
			})
		})
	}
}

// The event's static facts, and EmitFrom: a built-in plugin's hook emits
// memory:extracted to the registry it runs in, one level deeper; outside a
// hook it reports ErrNoService.
func TestMemoryExtractedFactsAndEmitFrom(t *testing.T) {
	if ev := hooks.MemoryExtracted; ev.Mode() != hooks.Transformer || ev.DefaultTimeout() != 2*time.Second || !slices.Contains(hooks.BuiltinEvents(), ev.Name()) {
		t.Errorf("memory:extracted: %s, %s", ev.Mode(), ev.DefaultTimeout())
	}
	var paths []string
	for _, f := range hooks.MutableFields(&hooks.MemoryExtractedContext{}) {
		paths = append(paths, f.Path)
	}
	if got := strings.Join(paths, ","); got != "memories,vetoed,veto_reason" {
		t.Errorf("designated fields %q", got)
	}
	if err := hooks.ValidateEventName("memory:mine"); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("memory:mine as a custom event: %v", err)
	}

	var depth int
	var corr string
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.MessageAfterResponse, "extract", func(ctx context.Context, c *hooks.AfterResponseContext) error {
			m := hooktest.MemoryExtracted("Alice has a cat.")
			if err := hooks.EmitFrom(ctx, c, hooks.MemoryExtracted, m); err != nil {
				return err
			}
			if !m.Vetoed {
				return errors.New("not vetoed")
			}
			corr = m.CorrelationID
			return nil
		}),
		hooks.Handle(hooks.MemoryExtracted, "veto", func(ctx context.Context, c *hooks.MemoryExtractedContext) error {
			depth = hooks.Depth(ctx)
			c.Veto("no")
			return nil
		}),
	)
	ar := hooktest.AfterResponse("hello")
	ar.CorrelationID = "corr-1"
	if err := hooks.Emit(context.Background(), reg, hooks.MessageAfterResponse, ar); err != nil {
		t.Fatal(err)
	}
	for _, st := range reg.Stats() {
		if st.Invocations != 1 || st.Errors+st.Timeouts+st.Panics != 0 {
			t.Errorf("%s/%s: %+v", st.Event, st.Hook, st)
		}
	}
	if depth != 2 || corr != "corr-1" {
		t.Errorf("nested depth %d, correlation %q", depth, corr)
	}
	if err := hooks.EmitFrom(context.Background(), hooktest.AfterResponse("hello"), hooks.MemoryExtracted, hooktest.MemoryExtracted("x")); !errors.Is(err, hooks.ErrNoService) {
		t.Errorf("EmitFrom outside a hook: %v", err)
	}
}
