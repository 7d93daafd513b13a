package hooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// plugin:before_install is a gate: the first decline stops the chain, a
// failing hook is ignored unless its policy is closed, and a closed
// failure declines the install.
func TestPluginBeforeInstallGate(t *testing.T) {
	decline := func(reason string) func(context.Context, *hooks.PluginInstallContext) error {
		return func(_ context.Context, c *hooks.PluginInstallContext) error {
			if c.Name == "evil" {
				c.Decline(reason)
			}
			return nil
		}
	}
	fail := func(context.Context, *hooks.PluginInstallContext) error { return errors.New("policy server down") }
	cases := []struct {
		name         string
		plugin       string
		hooks        []hooks.Hook
		wantDeclined bool
		wantReason   string
	}{
		{"no hook allows", "geo", nil, false, ""},
		{"allowed by policy", "geo", []hooks.Hook{hooks.Handle(hooks.PluginBeforeInstall, "policy", decline("not on the list"))}, false, ""},
		{"declined by policy", "evil", []hooks.Hook{hooks.Handle(hooks.PluginBeforeInstall, "policy", decline("not on the list"))}, true, "not on the list"},
		{"first decline wins", "evil", []hooks.Hook{
			hooks.Handle(hooks.PluginBeforeInstall, "first", decline("first")),
			hooks.Handle(hooks.PluginBeforeInstall, "second", decline("second")),
		}, true, "first"},
		{"failing gate is ignored (open)", "geo", []hooks.Hook{hooks.Handle(hooks.PluginBeforeInstall, "flaky", fail)}, false, ""},
		{"failing gate declines (closed)", "geo", []hooks.Hook{hooks.Handle(hooks.PluginBeforeInstall, "flaky", fail, hooks.WithFailurePolicy(hooks.FailClosed))},
			true, "gate test/flaky was unavailable (failed), so the install was declined"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := hooktest.NewRegistry(t, tc.hooks...)
			c := hooktest.PluginInstall(tc.plugin, "1.0.0")
			hooktest.Emit(t, reg, hooks.PluginBeforeInstall, c)
			if c.Declined != tc.wantDeclined || c.DeclineReason != tc.wantReason {
				t.Errorf("declined=%v reason=%q, want %v %q", c.Declined, c.DeclineReason, tc.wantDeclined, tc.wantReason)
			}
		})
	}
}

// The event's static facts: a gate with a 5 s default, in the reserved
// plugin namespace, naming no agent or room (so such filters are load
// errors), with declined and decline_reason as its designated fields.
func TestPluginBeforeInstallEvent(t *testing.T) {
	ev := hooks.PluginBeforeInstall
	if ev.Name() != "plugin:before_install" || ev.Mode() != hooks.Gate || ev.DefaultTimeout().String() != "5s" {
		t.Errorf("event %s mode %s timeout %s", ev.Name(), ev.Mode(), ev.DefaultTimeout())
	}
	found := false
	for _, name := range hooks.BuiltinEvents() {
		found = found || name == ev.Name()
	}
	if !found {
		t.Errorf("BuiltinEvents lacks %s", ev.Name())
	}
	if err := hooks.ValidateEventName("plugin:mine"); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("plugin:mine as a custom event: %v", err)
	}
	nop := func(context.Context, *hooks.PluginInstallContext) error { return nil }
	for _, opt := range []hooks.Option{hooks.Agents("a"), hooks.Rooms("!r:hs")} {
		if _, err := hooks.NewRegistry([]hooks.Plugin{hooktest.Plugin("p", hooks.Handle(ev, "x", nop, opt))}, hooks.Options{}); err == nil || !strings.Contains(err.Error(), "can never match") {
			t.Errorf("filter on plugin:before_install: %v", err)
		}
	}
	var paths []string
	for _, f := range hooks.MutableFields(&hooks.PluginInstallContext{}) {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, ",") != "declined,decline_reason" {
		t.Errorf("mutable fields %v", paths)
	}
}

// A hook works on its own copy: changing the manifest's lists or other
// fields in a hook does not reach the caller; only the decision does.
func TestPluginBeforeInstallIsolation(t *testing.T) {
	reg := hooktest.NewRegistry(t, hooks.Handle(hooks.PluginBeforeInstall, "scribble", func(_ context.Context, c *hooks.PluginInstallContext) error {
		c.Command[0] = "rm"
		c.Env = append(c.Env, "SECRET")
		c.Name = "other"
		c.Decline("no")
		return nil
	}))
	c := hooktest.PluginInstall("geo", "1.0.0")
	c.CorrelationID = "install-1"
	before, _ := json.Marshal(c)
	hooktest.Emit(t, reg, hooks.PluginBeforeInstall, c)
	if c.Command[0] != "python3" || len(c.Env) != 0 || c.Name != "geo" {
		t.Errorf("a hook's scribbles leaked: %+v", c)
	}
	if !c.Declined || c.DeclineReason != "no" {
		t.Errorf("decision lost: %+v", c)
	}
	c.Declined, c.DeclineReason = false, ""
	after, _ := json.Marshal(c)
	if string(before) != string(after) {
		t.Errorf("context changed:\n%s\n%s", before, after)
	}
}
