package team

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/hookroom/hookroom/hooks"
)

var research = Definition{
	Name: "research", DisplayName: "Research desk",
	Members: []hooks.AgentName{"searcher", "analyst", "idle"},
	Mode:    ModeCoordinate,
}

func TestCoordinateAsksLeaderThenMembersThenSynthesis(t *testing.T) {
	f := &fakeRunner{lead: func(_ context.Context, req LeadRequest) (MemberResult, error) {
		if req.Step == StepPlan {
			return answer("Here is my plan:\n```json\n" +
				`{"assignments": [{"member": "analyst", "task": "Weigh the sources"}, {"member": "Searcher", "task": "Find sources on tides"}]}` +
				"\n```"), nil
		}
		return answer("Tides come from the moon (searcher), mostly (analyst)."), nil
	}}
	rec := &recorder{}
	res, err := Run(t.Context(), Plan{Team: research, SourceEventID: "$q", Question: "Why are there tides?", Observer: rec,
		Roles: map[hooks.AgentName]string{"searcher": "finds sources"}}, f)
	if err != nil {
		t.Fatal(err)
	}
	calls := f.Calls("")
	if len(calls) != 4 {
		t.Fatalf("calls = %+v, want plan, two members, synthesis", calls)
	}
	plan, members, synth := calls[0], calls[1:3], calls[3]
	if plan.Kind != "plan" || synth.Kind != "synthesis" {
		t.Fatalf("first call %s, last %s; want plan, synthesis", plan.Kind, synth.Kind)
	}
	if !strings.Contains(plan.Lead.Prompt, "Why are there tides?") || !strings.Contains(plan.Lead.System, "- searcher: finds sources") ||
		plan.Lead.Schema == nil {
		t.Errorf("plan request = %+v", plan.Lead)
	}
	for _, m := range members {
		if m.Kind != "member" || m.StartSeq < plan.EndSeq || m.EndSeq > synth.StartSeq {
			t.Errorf("member call %+v is not between the plan (ended %d) and the synthesis (started %d)", m, plan.EndSeq, synth.StartSeq)
		}
		if m.Depth != 1 || m.Task.Depth != 1 || m.Task.Reason != ReasonMember || m.Task.Original != "Why are there tides?" {
			t.Errorf("member task = %+v at depth %d", m.Task, m.Depth)
		}
	}
	if got := f.agentsCalled(); !reflect.DeepEqual(got, []hooks.AgentName{"analyst", "searcher"}) {
		t.Errorf("members asked = %v, want analyst and searcher (not idle)", got)
	}
	for _, want := range []string{
		"searcher says: Find sources on tides", "analyst says: Weigh the sources",
		"<task>\nFind sources on tides\n</task>", `<member name="analyst" status="answered">`, "Why are there tides?",
	} {
		if !strings.Contains(synth.Lead.Prompt, want) {
			t.Errorf("synthesis prompt lacks %q:\n%s", want, synth.Lead.Prompt)
		}
	}
	// The team's own model leads: the leader is the team.
	if res.Leader != "research" || synth.Lead.Leader != "" {
		t.Errorf("leader = %q (request %q), want research (the team's own model)", res.Leader, synth.Lead.Leader)
	}
	if res.PlanNote != "" || !reflect.DeepEqual(res.Targets(), []hooks.AgentName{"searcher", "analyst"}) {
		t.Errorf("targets = %v, note %q", res.Targets(), res.PlanNote)
	}
	if res.Synthesis != "Tides come from the moon (searcher), mostly (analyst)." {
		t.Errorf("synthesis = %q", res.Synthesis)
	}
	if got, want := rec.Events(), []string{
		"ended analyst: ok", "ended searcher: ok",
		"spawned analyst (team_member by research, depth 1)", "spawned searcher (team_member by research, depth 1)",
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("observer = %q, want %q", got, want)
	}
	usage := res.UsageByAgent()
	if len(usage) != 3 || usage[0].Agent != "research" || usage[0].ModelCalls != 2 || usage[0].Usage.TotalTokens != 30 {
		t.Errorf("usage by agent = %+v; want the team's two leader calls first, then each member", usage)
	}
}

func TestCoordinateFallsBackToEveryMember(t *testing.T) {
	cases := []struct {
		name     string
		plan     string
		planErr  error
		wantNote string
	}{
		{"prose", "I would ask the searcher, I think.", nil, "holds no JSON"},
		{"unknown members", `{"assignments": [{"member": "oracle", "task": "?"}]}`, nil, "names no member of the team (it names oracle)"},
		{"empty plan", `{"assignments": []}`, nil, "assigns nothing"},
		{"model error", "", errors.New("rate limited"), "could not plan (rate limited)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{lead: func(_ context.Context, req LeadRequest) (MemberResult, error) {
				if req.Step == StepPlan {
					return answer(tc.plan), tc.planErr
				}
				return answer("synthesis"), nil
			}}
			res, err := Run(t.Context(), Plan{Team: research, Question: "Q?"}, f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.PlanNote, tc.wantNote) {
				t.Errorf("note = %q, want it to say %q", res.PlanNote, tc.wantNote)
			}
			if got := f.agentsCalled(); len(got) != 3 {
				t.Errorf("members asked = %v, want every member", got)
			}
			for _, c := range f.Calls("member") {
				if c.Task.Question != "Q?" {
					t.Errorf("%s was asked %q, want the original question", c.Agent, c.Task.Question)
				}
			}
		})
	}
}

func TestCollaborateRunsMembersInParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		team := Definition{Name: "panel", Members: []hooks.AgentName{"a", "b", "c"}, Mode: ModeCollaborate, Leader: "b"}
		all := newBarrier(3)
		f := &fakeRunner{}
		f.member = func(ctx context.Context, agent hooks.AgentName, task Task) (MemberResult, error) {
			// Each member waits for the others to start: members run one
			// after the other would never all arrive.
			if !all.arrive(ctx) {
				return MemberResult{}, errors.New("the other members did not start while this one ran")
			}
			return answer(string(agent) + ": " + task.Question), nil
		}
		res, err := Run(t.Context(), Plan{Team: team, Question: "Opinions?"}, f)
		if err != nil {
			t.Fatal(err)
		}
		members := f.Calls("member")
		if len(members) != 3 || len(f.Calls(string(StepPlan))) != 0 {
			t.Fatalf("calls = %+v; want three members and no plan", f.Calls(""))
		}
		lastStart, firstEnd := 0, 1<<30
		for _, c := range members {
			if c.Err != nil {
				t.Error(c.Err)
			}
			if c.Task.Question != "Opinions?" {
				t.Errorf("%s asked %q", c.Agent, c.Task.Question)
			}
			lastStart, firstEnd = max(lastStart, c.StartSeq), min(firstEnd, c.EndSeq)
		}
		if lastStart > firstEnd {
			t.Errorf("a member ended (seq %d) before the last one started (seq %d): not parallel", firstEnd, lastStart)
		}
		synth := f.Calls(string(StepSynthesis))
		if len(synth) != 1 || synth[0].Lead.Leader != "b" || synth[0].StartSeq < lastStart {
			t.Errorf("synthesis calls = %+v; want one by b after the members", synth)
		}
		for _, m := range []string{"a: Opinions?", "b: Opinions?", "c: Opinions?"} {
			if !strings.Contains(synth[0].Lead.Prompt, m) {
				t.Errorf("synthesis prompt lacks %q", m)
			}
		}
		if res.Leader != "b" || len(res.Contributions) != 3 || res.Contributions[0].Member != "a" {
			t.Errorf("result = %+v", res)
		}
	})
}

func TestCancelStopsEveryMember(t *testing.T) {
	errStop := errors.New("stopped with 🛑")
	t.Run("during the members", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			started := newBarrier(4) // three members and the test
			f := &fakeRunner{}
			f.member = func(ctx context.Context, agent hooks.AgentName, task Task) (MemberResult, error) {
				started.arrive(ctx)
				<-ctx.Done()
				return MemberResult{ModelCalls: 1}, ctx.Err()
			}
			rec := &recorder{}
			var contributed atomic.Int32
			done := make(chan error)
			go func() {
				_, err := Run(ctx, Plan{Team: Definition{Name: "panel", Members: []hooks.AgentName{"a", "b", "c"}, Mode: ModeCollaborate, Leader: "a"},
					Question: "Q", Observer: rec, OnContribution: func(context.Context, Contribution) { contributed.Add(1) }}, f)
				done <- err
			}()
			if !started.arrive(t.Context()) {
				t.Fatal("the members did not all start")
			}
			cancel(errStop)
			err := <-done
			if !errors.Is(err, errStop) {
				t.Errorf("Run = %v, want the cancel cause", err)
			}
			for _, c := range f.Calls("member") {
				if !errors.Is(c.Err, context.Canceled) {
					t.Errorf("member %s ended with %v, want it cancelled", c.Agent, c.Err)
				}
			}
			if n := len(f.Calls(string(StepSynthesis))); n != 0 {
				t.Errorf("%d synthesis calls after the stop, want none", n)
			}
			if n := contributed.Load(); n != 0 {
				t.Errorf("%d contributions shown for stopped members", n)
			}
			if got := rec.Events(); len(got) != 6 || got[0] != "ended a: killed" {
				t.Errorf("observer = %q, want each member spawned and ended killed", got)
			}
		})
	})
	t.Run("during the plan", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(t.Context())
			planning := make(chan struct{})
			f := &fakeRunner{lead: func(ctx context.Context, req LeadRequest) (MemberResult, error) {
				close(planning)
				<-ctx.Done()
				return MemberResult{}, ctx.Err()
			}}
			done := make(chan error)
			go func() {
				_, err := Run(ctx, Plan{Team: research, Question: "Q"}, f)
				done <- err
			}()
			<-planning
			cancel(errStop)
			if err := <-done; !errors.Is(err, errStop) {
				t.Errorf("Run = %v, want the cancel cause", err)
			}
			if got := f.Calls(""); len(got) != 1 {
				t.Errorf("calls = %+v; want the plan only: no model call starts after the stop", got)
			}
		})
	})
	t.Run("before it starts", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		cancel(errStop)
		f := &fakeRunner{}
		if _, err := Run(ctx, Plan{Team: Definition{Name: "panel", Members: []hooks.AgentName{"a", "b"}, Mode: ModeCollaborate}, Question: "Q"}, f); !errors.Is(err, errStop) {
			t.Errorf("Run = %v", err)
		}
		if got := f.Calls(""); len(got) != 0 {
			t.Errorf("calls = %+v, want none", got)
		}
	})
}

func TestMemberFailureIsToldToTheSynthesis(t *testing.T) {
	team := Definition{Name: "panel", Members: []hooks.AgentName{"a", "b"}, Mode: ModeCollaborate}
	f := &fakeRunner{member: func(_ context.Context, agent hooks.AgentName, task Task) (MemberResult, error) {
		if agent == "b" {
			return MemberResult{ModelCalls: 1, Usage: answer("").Usage}, errors.New("the model is unavailable")
		}
		return answer("a's answer"), nil
	}}
	var shown []Contribution
	res, err := Run(t.Context(), Plan{Team: team, Question: "Q", OnContribution: func(_ context.Context, c Contribution) { shown = append(shown, c) }}, f)
	if err != nil {
		t.Fatal(err)
	}
	synth := f.Calls(string(StepSynthesis))
	if len(synth) != 1 {
		t.Fatalf("%d synthesis calls", len(synth))
	}
	for _, want := range []string{`<member name="b" status="failed">`, "The member could not answer: the model is unavailable", "a's answer"} {
		if !strings.Contains(synth[0].Lead.Prompt, want) {
			t.Errorf("synthesis prompt lacks %q:\n%s", want, synth[0].Lead.Prompt)
		}
	}
	if !res.Contributions[1].Failed() || res.Contributions[0].Failed() || len(shown) != 2 {
		t.Errorf("contributions = %+v, shown %d", res.Contributions, len(shown))
	}
	// b's tokens still count against b.
	if u := res.UsageByAgent(); len(u) != 3 || u[1].Agent != "b" || u[1].Usage.TotalTokens != 15 || u[2].Agent != "panel" {
		t.Errorf("usage = %+v", u)
	}

	t.Run("all fail", func(t *testing.T) {
		f := &fakeRunner{member: func(context.Context, hooks.AgentName, Task) (MemberResult, error) {
			return MemberResult{}, errors.New("down")
		}}
		_, err := Run(t.Context(), Plan{Team: team, Question: "Q"}, f)
		var mf *MembersFailedError
		if !errors.As(err, &mf) || len(mf.Errs) != 2 {
			t.Errorf("Run = %v, want a MembersFailedError naming both", err)
		}
		if n := len(f.Calls(string(StepSynthesis))); n != 0 {
			t.Errorf("%d synthesis calls with nothing to synthesise", n)
		}
	})
	t.Run("synthesis fails", func(t *testing.T) {
		f := &fakeRunner{lead: func(context.Context, LeadRequest) (MemberResult, error) { return MemberResult{}, errors.New("boom") }}
		if _, err := Run(t.Context(), Plan{Team: team, Question: "Q"}, f); err == nil || !strings.Contains(err.Error(), "failed to synthesise") {
			t.Errorf("Run = %v", err)
		}
	})
}

func TestRunRefusesBadPlans(t *testing.T) {
	cases := []struct {
		name string
		plan Plan
		want string
	}{
		{"no members", Plan{Team: Definition{Name: "x"}}, "no members"},
		{"bad mode", Plan{Team: Definition{Name: "x", Members: []hooks.AgentName{"a"}, Mode: "vote"}}, `unknown mode "vote"`},
		{"store without event", Plan{Team: Definition{Name: "x", Members: []hooks.AgentName{"a"}}, Store: &Store{}}, "needs its source event"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{}
			if _, err := Run(t.Context(), tc.plan, f); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run = %v, want %q", err, tc.want)
			}
			if len(f.Calls("")) != 0 {
				t.Error("a refused run called the model")
			}
		})
	}
}
