package agents_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// Calls that need approval (by rule or by a gate hook) run only when
// Approve says yes; otherwise the model gets DeniedResult. A gate's
// decline wins over approval (Approve is not asked).
func TestRunApproval(t *testing.T) {
	cases := []struct {
		name        string
		rule        bool   // NeedsApproval says yes
		hook        string // "ask", "ask+decline" or ""
		nilApprove  bool
		approve     bool
		wantAsked   bool
		wantReason  string // the reason Approve got
		wantRan     bool
		wantContent string // substring the model saw
	}{
		{name: "no approval needed", wantRan: true, wantContent: "result of clock"},
		{name: "rule, approved", rule: true, approve: true, wantAsked: true, wantReason: "rule says so", wantRan: true, wantContent: "result of clock"},
		{name: "rule, denied", rule: true, wantAsked: true, wantReason: "rule says so", wantContent: "[tool call denied]\nTool: clock"},
		{name: "hook asks, approved", hook: "ask", approve: true, wantAsked: true, wantReason: "the hook wants a human", wantRan: true, wantContent: "result of clock"},
		{name: "rule and hook: the rule's reason is first", rule: true, hook: "ask", approve: true, wantAsked: true, wantReason: "rule says so", wantRan: true, wantContent: "result of clock"},
		{name: "decline beats approval", hook: "ask+decline", approve: true, wantContent: "[tool call declined]"},
		{name: "nobody can approve: denied", rule: true, nilApprove: true, wantContent: "nobody can approve"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var reg *hooks.Registry
			if tc.hook != "" {
				reg = hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("policy",
					hooks.Handle(hooks.ToolBeforeCall, "ask", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
						c.RequireApproval("the hook wants a human")
						return nil
					}, hooks.Priority(10)),
					hooks.Handle(hooks.ToolBeforeCall, "deny", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
						if tc.hook == "ask+decline" {
							c.Decline("never")
						}
						return nil
					}, hooks.Priority(20)),
				)})
			}
			clock, ts := clockTools(t)
			srv := llmtest.NewServer(t,
				llmtest.Calls(llmtest.ToolCall("call_1", "clock", `{"tz":"UTC"}`)),
				llmtest.Text("done"),
			)
			req := baseRun(testModel(t, srv), ts, reg)
			req.NeedsApproval = func(c hooks.ToolCall) (bool, string) {
				if c.Tool != "clock" || c.Agent != hooktest.Agent {
					t.Errorf("NeedsApproval(%+v)", c)
				}
				return tc.rule, map[bool]string{true: "rule says so"}[tc.rule]
			}
			var asked []agents.ApprovalRequest
			if !tc.nilApprove {
				req.Approve = func(_ context.Context, ar agents.ApprovalRequest) (bool, string, error) {
					asked = append(asked, ar)
					if tc.approve {
						return true, "", nil
					}
					return false, "alice said no", nil
				}
			}
			res, err := agents.Run(turnCtx(hooktest.Context(t)), req)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := len(asked) > 0; got != tc.wantAsked {
				t.Fatalf("Approve asked: %v, want %v", got, tc.wantAsked)
			}
			if tc.wantAsked {
				a := asked[0]
				if a.CallID != "call_1" || a.Reason != tc.wantReason {
					t.Errorf("ApprovalRequest = %+v, want call_1 with reason %q", a, tc.wantReason)
				}
				wantCall(t, a.Call, "clock", `{"tz":"UTC"}`)
			}
			if ran := clock.calls.Load() > 0; ran != tc.wantRan {
				t.Errorf("tool ran: %v, want %v", ran, tc.wantRan)
			}
			reqs := srv.Requests()
			msgs := reqs[len(reqs)-1].Body.Messages
			last := msgs[len(msgs)-1]
			if !strings.Contains(string(last.Content), tc.wantContent) {
				t.Errorf("the model saw %q, want it to contain %q", last.Content, tc.wantContent)
			}
			if !tc.wantRan && (len(res.ToolTrace) != 1 || !res.ToolTrace[0].Blocked) {
				t.Errorf("trace = %+v, want one blocked call", res.ToolTrace)
			}
			if tc.name == "rule, denied" && !strings.Contains(string(last.Content), "Reason: alice said no") {
				t.Errorf("the denial's reason is missing: %q", last.Content)
			}
		})
	}
}

// An Approve that fails because the turn ended ends the turn.
func TestRunApprovalCancelled(t *testing.T) {
	clock, ts := clockTools(t)
	srv := llmtest.NewServer(t, llmtest.Calls(llmtest.ToolCall("call_1", "clock", `{}`)), llmtest.Text("done"))
	ctx, cancel := context.WithCancel(hooktest.Context(t))
	req := baseRun(testModel(t, srv), ts, nil)
	req.NeedsApproval = func(hooks.ToolCall) (bool, string) { return true, "" }
	req.Approve = func(ctx context.Context, _ agents.ApprovalRequest) (bool, string, error) {
		cancel()
		<-ctx.Done()
		return false, "", ctx.Err()
	}
	if _, err := agents.Run(turnCtx(ctx), req); err == nil || !strings.Contains(err.Error(), "waited for approval") {
		t.Fatalf("Run = %v, want an error while waiting for approval", err)
	}
	if clock.calls.Load() != 0 {
		t.Error("the tool ran")
	}
}
