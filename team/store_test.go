package team

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

func TestStoreSteps(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		k := Key{SourceEventID: "$e", Team: "panel", Member: "a", Step: StepAnswer}
		if _, ok, err := s.Get(ctx, k); err != nil || ok {
			t.Fatalf("Get before Begin = %v, %v", ok, err)
		}
		if done, err := s.Begin(ctx, k, "task"); err != nil || done {
			t.Fatalf("Begin = %v, %v", done, err)
		}
		// A second start of an unfinished step (a replay) counts an attempt.
		if done, err := s.Begin(ctx, k, "task"); err != nil || done {
			t.Fatalf("second Begin = %v, %v", done, err)
		}
		got, ok, err := s.Get(ctx, k)
		if err != nil || !ok || got.Status != StatusRunning || got.Attempts != 2 || got.Task != "task" || !got.EndedAt.IsZero() {
			t.Fatalf("running step = %+v, %v, %v", got, ok, err)
		}
		// Failed, then begun and done: the answer replaces the failure.
		if _, err := s.Finish(ctx, Record{Key: k, Status: StatusFailed, Error: "down"}); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := s.Get(ctx, k); got.Status != StatusFailed || got.Error != "down" {
			t.Fatalf("failed step = %+v", got)
		}
		if done, err := s.Begin(ctx, k, "task"); err != nil || done {
			t.Fatalf("Begin after failure = %v, %v", done, err)
		}
		u := agents.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 50}
		start := time.UnixMilli(1_000_000)
		first, err := s.Finish(ctx, Record{Key: k, Status: StatusDone, Text: "first", Model: "m", Usage: u, ModelCalls: 2,
			StartedAt: start, EndedAt: start.Add(3 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if first.Text != "first" || first.Status != StatusDone || first.Usage.TotalTokens != 120 || first.ModelCalls != 2 ||
			first.EndedAt.Sub(first.StartedAt) != 3*time.Second || first.Attempts != 3 || first.Error != "" {
			t.Errorf("done step = %#v", first)
		}
		// Done stays done: a second answer or start changes nothing.
		again, err := s.Finish(ctx, Record{Key: k, Status: StatusDone, Text: "second"})
		if err != nil || again.Text != "first" {
			t.Errorf("second Finish = %+v, %v; want the first answer", again, err)
		}
		if _, err := s.Finish(ctx, Record{Key: k, Status: StatusFailed, Error: "late"}); err != nil {
			t.Fatal(err)
		}
		if done, err := s.Begin(ctx, k, "other"); err != nil || !done {
			t.Errorf("Begin of a done step = %v, %v; want done", done, err)
		}
		if got, _, _ := s.Get(ctx, k); got.Text != "first" || got.Status != StatusDone || got.Attempts != 3 || got.Task != "task" {
			t.Errorf("step after late writes = %+v", got)
		}

		// Concurrent answers to one step: one wins, everyone reads it.
		k2 := Key{SourceEventID: "$e", Team: "panel", Member: "b", Step: StepAnswer}
		texts := make([]string, 8)
		_, errs := dbtest.Race(8, func(i int) (bool, error) {
			r, err := s.Finish(ctx, Record{Key: k2, Status: StatusDone, Text: string(rune('A' + i))})
			texts[i] = r.Text
			return false, err
		})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for _, tx := range texts {
			if tx != texts[0] {
				t.Errorf("concurrent Finish read %q and %q", texts[0], tx)
			}
		}

		if _, err := s.Begin(ctx, Key{SourceEventID: "$e", Team: "panel", Member: "a"}, ""); err == nil {
			t.Error("Begin without a step succeeded")
		}
		if _, err := s.Finish(ctx, Record{Key: k, Status: StatusRunning}); err == nil {
			t.Error("Finish with status running succeeded")
		}

		// Another team and a delegation under the same message.
		other := Key{SourceEventID: "$e", Team: "desk", Member: "a", Step: StepSynthesis}
		if _, err := s.Finish(ctx, Record{Key: other, Status: StatusDone, Text: "x", Usage: agents.Usage{PromptTokens: 1, CompletionTokens: 1}, ModelCalls: 1}); err != nil {
			t.Fatal(err)
		}
		deleg := Key{SourceEventID: "$e", Team: "a", Member: "c", Step: DelegateStep("q")}
		if _, err := s.Begin(ctx, deleg, "q"); err != nil { // interrupted: no usage
			t.Fatal(err)
		}
		list, err := s.List(ctx, "$e", "panel")
		if err != nil || len(list) != 2 || list[0].Member != "a" || list[1].Member != "b" {
			t.Errorf("List(panel) = %+v, %v", list, err)
		}
		if all, err := s.List(ctx, "$e", ""); err != nil || len(all) != 4 {
			t.Errorf("List(all) = %d steps, %v; want 4", len(all), err)
		}
		usage, err := s.Usage(ctx, "$e")
		if err != nil {
			t.Fatal(err)
		}
		if len(usage) != 1 || usage[0].Agent != "a" || usage[0].Usage.TotalTokens != 122 || usage[0].ModelCalls != 3 || usage[0].Model != "m" {
			t.Errorf("Usage = %+v; want a's two steps summed (b and c used nothing)", usage)
		}

		n, err := s.Prune(ctx, time.UnixMilli(1_000_001))
		if err != nil || n != 1 {
			t.Errorf("Prune = %d, %v; want the step started at 1000000", n, err)
		}
	})
}

// TestReplayReusesCompletedSteps kills a coordinate run after the plan and
// one member's answer (the other member interrupted), replays it, and
// replays it again after the synthesis: completed steps are never asked
// twice, the interrupted one runs again, and there is one synthesis.
func TestReplayReusesCompletedSteps(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		team := Definition{Name: "desk", Members: []hooks.AgentName{"a", "b"}, Mode: ModeCoordinate}
		plan := func(r Runner) (Result, error) {
			return Run(t.Context(), Plan{Team: team, SourceEventID: "$msg", Question: "Q", Store: s}, r)
		}
		planText := `{"assignments": [{"member": "a", "task": "task a"}, {"member": "b", "task": "task b"}]}`

		// First run: the plan and a complete; b is interrupted.
		ctx, crash := context.WithCancelCause(t.Context())
		aDone, bStarted := make(chan struct{}), make(chan struct{})
		first := &fakeRunner{
			lead: func(context.Context, LeadRequest) (MemberResult, error) { return answer(planText), nil },
			member: func(ctx context.Context, agent hooks.AgentName, task Task) (MemberResult, error) {
				if agent == "a" {
					defer close(aDone)
					return answer("a's answer"), nil
				}
				close(bStarted)
				<-ctx.Done()
				return MemberResult{}, ctx.Err()
			},
		}
		errKilled := errors.New("SIGKILL")
		done := make(chan error)
		go func() {
			_, err := Run(ctx, Plan{Team: team, SourceEventID: "$msg", Question: "Q", Store: s}, first)
			done <- err
		}()
		<-aDone
		<-bStarted
		crash(errKilled)
		if err := <-done; !errors.Is(err, errKilled) {
			t.Fatalf("first run = %v", err)
		}
		if b, _, _ := s.Get(t.Context(), Key{SourceEventID: "$msg", Team: "desk", Member: "b", Step: StepAnswer}); b.Status != StatusRunning {
			t.Fatalf("interrupted step = %+v, want running", b)
		}

		// Replay: only b runs, then the synthesis.
		second := &fakeRunner{lead: func(_ context.Context, req LeadRequest) (MemberResult, error) {
			if req.Step == StepPlan {
				return MemberResult{}, errors.New("the plan was asked again")
			}
			return answer("one synthesis"), nil
		}}
		res, err := plan(second)
		if err != nil {
			t.Fatal(err)
		}
		if got := second.agentsCalled(); len(got) != 1 || got[0] != "b" {
			t.Errorf("replay asked %v, want b only", got)
		}
		if got := second.Calls("member"); len(got) == 1 && got[0].Task.Question != "task b" {
			t.Errorf("b was asked %q on the replay, want its planned task", got[0].Task.Question)
		}
		if n := len(second.Calls(string(StepPlan))); n != 0 {
			t.Errorf("the plan was asked %d times on the replay", n)
		}
		if res.Synthesis != "one synthesis" || res.Reused != 2 || !res.Contributions[0].Reused || res.Contributions[1].Reused {
			t.Errorf("replay result = %+v", res)
		}
		prompt := second.Calls(string(StepSynthesis))[0].Lead.Prompt
		if !strings.Contains(prompt, "a's answer") || !strings.Contains(prompt, "b says: task b") {
			t.Errorf("synthesis prompt lacks the reused or the new answer:\n%s", prompt)
		}

		// Killed after the synthesis, before the delivery: nothing is asked.
		third := &fakeRunner{
			lead: func(context.Context, LeadRequest) (MemberResult, error) {
				return MemberResult{}, errors.New("the leader was asked again")
			},
			member: func(context.Context, hooks.AgentName, Task) (MemberResult, error) {
				return MemberResult{}, errors.New("a member was asked again")
			},
		}
		var mu sync.Mutex
		var shown []hooks.AgentName
		res3, err := Run(t.Context(), Plan{Team: team, SourceEventID: "$msg", Question: "Q", Store: s,
			OnContribution: func(_ context.Context, c Contribution) { mu.Lock(); shown = append(shown, c.Member); mu.Unlock() }}, third)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(third.Calls("")); n != 0 {
			t.Errorf("third run made %d calls, want none", n)
		}
		if res3.Synthesis != "one synthesis" || res3.Reused != 4 || len(shown) != 2 {
			t.Errorf("third run = %+v (shown %v); want everything reused and each contribution shown again", res3, shown)
		}
		if b, _, _ := s.Get(t.Context(), Key{SourceEventID: "$msg", Team: "desk", Member: "b", Step: StepAnswer}); b.Attempts != 2 {
			t.Errorf("b's attempts = %d, want 2", b.Attempts)
		}
		if a, _, _ := s.Get(t.Context(), Key{SourceEventID: "$msg", Team: "desk", Member: "a", Step: StepAnswer}); a.Attempts != 1 {
			t.Errorf("a's attempts = %d, want 1", a.Attempts)
		}
		// Every completed step's usage, the killed run's included: the
		// team's plan and synthesis, a and b.
		usage, err := s.Usage(t.Context(), "$msg")
		if err != nil || len(usage) != 3 || usage[2].Agent != "desk" || usage[2].ModelCalls != 2 {
			t.Errorf("Usage = %+v, %v", usage, err)
		}
		if got := res3.UsageByAgent(); len(got) != 3 || got[0].Agent != "desk" || got[0].ModelCalls != 2 {
			t.Errorf("UsageByAgent = %+v", got)
		}
	})
}

func TestReplayRerunsFailedMembers(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		team := Definition{Name: "panel", Members: []hooks.AgentName{"a", "b"}, Mode: ModeCollaborate, Leader: "a"}
		ctx, crash := context.WithCancel(t.Context())
		first := &fakeRunner{
			member: func(_ context.Context, agent hooks.AgentName, _ Task) (MemberResult, error) {
				if agent == "b" {
					return MemberResult{}, errors.New("busy")
				}
				return answer("a's answer"), nil
			},
			lead: func(ctx context.Context, _ LeadRequest) (MemberResult, error) {
				crash() // killed during the synthesis
				return MemberResult{}, ctx.Err()
			},
		}
		if _, err := Run(ctx, Plan{Team: team, SourceEventID: "$m", Question: "Q", Store: s}, first); err == nil {
			t.Fatal("the killed run succeeded")
		}
		second := &fakeRunner{}
		res, err := Run(t.Context(), Plan{Team: team, SourceEventID: "$m", Question: "Q", Store: s}, second)
		if err != nil {
			t.Fatal(err)
		}
		if got := second.agentsCalled(); len(got) != 1 || got[0] != "b" {
			t.Errorf("replay asked %v, want the failed b only", got)
		}
		if res.Contributions[1].Failed() || len(second.Calls(string(StepSynthesis))) != 1 {
			t.Errorf("replay = %+v", res)
		}
	})
}

// TestReplayKeepsFailuresLaterStepsSaw: a failed plan (the members were
// asked its fallback) and a member's failure the synthesis was told of are
// not run again on a replay.
func TestReplayKeepsFailuresLaterStepsSaw(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		team := Definition{Name: "desk", Members: []hooks.AgentName{"a", "b"}, Mode: ModeCoordinate, Leader: "a"}
		first := &fakeRunner{
			lead: func(_ context.Context, req LeadRequest) (MemberResult, error) {
				if req.Step == StepPlan {
					return MemberResult{}, errors.New("plan failed")
				}
				return answer("synthesis without b"), nil
			},
			member: func(_ context.Context, agent hooks.AgentName, _ Task) (MemberResult, error) {
				if agent == "b" {
					return MemberResult{}, errors.New("b failed")
				}
				return answer("a's answer"), nil
			},
		}
		p := Plan{Team: team, SourceEventID: "$m", Question: "Q", Store: s}
		if _, err := Run(t.Context(), p, first); err != nil {
			t.Fatal(err)
		}
		// Killed before the delivery: the replay asks nobody.
		replay := &fakeRunner{}
		res, err := Run(t.Context(), p, replay)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(replay.Calls("")); n != 0 {
			t.Errorf("the replay made %d calls: %+v", n, replay.Calls(""))
		}
		if res.Synthesis != "synthesis without b" || !res.Contributions[1].Failed() || !strings.Contains(res.PlanNote, "plan failed") {
			t.Errorf("replay = %+v", res)
		}
	})
}
