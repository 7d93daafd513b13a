package hooks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// A nil handler, also a typed nil, is a load error naming plugin and hook.
func TestNilHandlerIsALoadError(t *testing.T) {
	var typedNil func(context.Context, *hooks.MessageReceivedContext) error
	var anyNil hooks.AnyHandler
	for _, tc := range []struct {
		name string
		hook hooks.Hook
	}{
		{"untyped nil", hooks.Handle[hooks.MessageReceivedContext](hooks.MessageReceived, "broken", nil)},
		{"typed nil", hooks.Handle(hooks.MessageReceived, "broken", typedNil)},
		{"nil AnyHandler", hooks.HandleAny("message:received", "broken", nil)},
		{"typed nil AnyHandler", hooks.HandleAny("todo:done", "broken", anyNil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok := hooks.Handle(hooks.MessageReceived, "fine", func(context.Context, *hooks.MessageReceivedContext) error { return nil })
			_, err := hooks.NewRegistry([]hooks.Plugin{{Name: "geo", Hooks: []hooks.Hook{ok, tc.hook}}}, hooks.Options{})
			var le *hooks.LoadError
			if !errors.As(err, &le) || le.Plugin != "geo" || le.Hook != "broken" || !strings.Contains(err.Error(), "nil handler") {
				t.Fatalf("err = %v, want a load error for geo/broken saying the handler is nil", err)
			}
		})
	}
}

// A registry keeps no reference to its caller's slices and maps: changing
// them after the build changes neither the registry nor one derived from
// it with Without.
func TestRegistryOwnsItsInputs(t *testing.T) {
	noop := func(context.Context, *hooks.MessageReceivedContext) error { return nil }
	agents := []hooks.AgentName{"assistant"}
	rooms := []id.RoomID{hooktest.Room}
	prio := 5
	enabled := true
	geo := hooks.Plugin{
		Name: "geo",
		Hooks: []hooks.Hook{
			hooks.Handle(hooks.MessageReceived, "locate", noop, hooks.Agents(agents...), hooks.Rooms(rooms...)),
			hooks.Handle(hooks.MessageReceived, "weather", noop),
		},
		Overrides: map[string]hooks.Override{"locate": {Priority: &prio, Enabled: &enabled}},
	}
	plugins := []hooks.Plugin{geo, {Name: "audit", Hooks: []hooks.Hook{hooks.Handle(hooks.MessageReceived, "log", noop)}}}
	allow := map[hooks.AgentName][]string{"assistant": {"geo", "audit"}}
	reg, err := hooks.NewRegistry(plugins, hooks.Options{Allowlist: allow})
	if err != nil {
		t.Fatal(err)
	}
	describe := func(r *hooks.Registry) string {
		var out []string
		for _, h := range r.Hooks() {
			out = append(out, fmt.Sprintf("%s/%s:%d:%v:%v", h.Plugin, h.Hook, h.Priority, h.Agents, h.Rooms))
		}
		return strings.Join(out, " ")
	}
	// runs emits message:received for the assistant and counts hook runs.
	runs := func(r *hooks.Registry) string {
		hooktest.Emit(t, r, hooks.MessageReceived, hooktest.MessageReceived("hi"))
		var n int
		for _, s := range r.Stats() {
			n += int(s.Invocations)
		}
		return fmt.Sprint(n)
	}
	wantDesc := describe(reg)
	wantWithout := "geo/locate:5:[assistant]:[!room:localhost] geo/weather:100:[]:[]"

	// The caller reuses everything it passed in.
	agents[0] = "evil"
	rooms[0] = "!evil:localhost"
	prio = 999
	enabled = false
	plugins[0].Hooks[1] = hooks.Handle(hooks.MessageReceived, "replaced", noop)
	plugins[0].Overrides["weather"] = hooks.Override{Enabled: &enabled}
	plugins[1].Name = "renamed"
	geo.Hooks[0] = hooks.Handle(hooks.MessageReceived, "replaced_too", noop)
	allow["assistant"][0] = "nobody"
	allow["assistant"] = []string{"nobody"}

	if got := describe(reg); got != wantDesc {
		t.Errorf("registry changed with its inputs:\n got %s\nwant %s", got, wantDesc)
	}
	without, err := reg.Without("audit")
	if err != nil {
		t.Fatalf("Without: %v", err)
	}
	if got := describe(without); got != wantWithout {
		t.Errorf("Without built from changed inputs:\n got %s\nwant %s", got, wantWithout)
	}
	// The allowlist still lets the assistant's contexts reach geo.
	if got := runs(without); got != "2" {
		t.Errorf("%s hook runs after Without, want 2 (the allowlist changed with the caller's map)", got)
	}
}
