package hooks_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// A tool:before_call hook may ask for approval; the chain goes on, the
// first reason is kept, and a later decline still wins.
func TestGateRequireApproval(t *testing.T) {
	ask := func(reason string) func(context.Context, *hooks.ToolBeforeCallContext) error {
		return func(_ context.Context, c *hooks.ToolBeforeCallContext) error { c.RequireApproval(reason); return nil }
	}
	cases := []struct {
		name         string
		hooks        []hooks.Hook
		wantApproval bool
		wantReason   string
		wantDeclined bool
	}{
		{"one asks", []hooks.Hook{hooks.Handle(hooks.ToolBeforeCall, "a", ask("risky"))}, true, "risky", false},
		{"first reason kept", []hooks.Hook{
			hooks.Handle(hooks.ToolBeforeCall, "a", ask("first")),
			hooks.Handle(hooks.ToolBeforeCall, "b", ask("second")),
		}, true, "first", false},
		{"decline beats approval", []hooks.Hook{
			hooks.Handle(hooks.ToolBeforeCall, "a", ask("risky")),
			hooks.Handle(hooks.ToolBeforeCall, "b", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
				c.Decline("no")
				return nil
			}),
		}, true, "risky", true},
		{"a failing hook's request is dropped", []hooks.Hook{
			hooks.Handle(hooks.ToolBeforeCall, "a", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
				c.RequireApproval("x")
				return errors.New("boom")
			}),
		}, false, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := hooktest.NewRegistry(t, tc.hooks...)
			c := hooktest.ToolBeforeCall("shell", `{}`)
			hooktest.Emit(t, reg, hooks.ToolBeforeCall, c)
			if c.ApprovalRequired != tc.wantApproval || c.ApprovalReason != tc.wantReason || c.Declined != tc.wantDeclined {
				t.Errorf("approval=%v reason=%q declined=%v; want %v %q %v", c.ApprovalRequired, c.ApprovalReason, c.Declined,
					tc.wantApproval, tc.wantReason, tc.wantDeclined)
			}
		})
	}
}

// tool:approval_requested is a gate: the first decision stops the chain;
// a failing hook with a closed policy denies.
func TestApprovalRequestedGate(t *testing.T) {
	var laterRan bool
	later := hooks.Handle(hooks.ToolApprovalRequested, "later", func(_ context.Context, c *hooks.ToolApprovalRequestedContext) error {
		laterRan = true
		c.Deny("too late")
		return nil
	})
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.ToolApprovalRequested, "auto", func(_ context.Context, c *hooks.ToolApprovalRequestedContext) error {
			if c.Tool == "read_file" {
				c.Approve("reads are fine")
			}
			return nil
		}, hooks.Priority(10)), later)
	c := hooktest.ToolApprovalRequested("read_file", `{}`)
	hooktest.Emit(t, reg, hooks.ToolApprovalRequested, c)
	if c.Decision != hooks.ApprovalApprove || c.DecisionReason != "reads are fine" || laterRan {
		t.Errorf("decision=%q reason=%q laterRan=%v", c.Decision, c.DecisionReason, laterRan)
	}

	reg = hooktest.NewRegistry(t, hooks.Handle(hooks.ToolApprovalRequested, "broken", func(context.Context, *hooks.ToolApprovalRequestedContext) error {
		return errors.New("boom")
	}, hooks.WithFailurePolicy(hooks.FailClosed)))
	c = hooktest.ToolApprovalRequested("shell", `{}`)
	hooktest.Emit(t, reg, hooks.ToolApprovalRequested, c)
	if c.Decision != hooks.ApprovalDeny || !strings.Contains(c.DecisionReason, "so the call was denied") {
		t.Errorf("closed failure: decision=%q reason=%q", c.Decision, c.DecisionReason)
	}
	if got := hooks.ToolApprovalRequested.DefaultTimeout().String(); got != "2s" {
		t.Errorf("default timeout %s", got)
	}
}
