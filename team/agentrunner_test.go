package team

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
)

// newModel is an OpenAI-compatible model on srv.
func newModel(t *testing.T, srv *llmtest.Server) agents.Model {
	t.Helper()
	m, err := agents.NewModel(agents.ModelSpec{BaseURL: srv.URL, Model: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDelegateToOverTheWire: the assistant calls delegate_to, the searcher
// runs as a sub-agent on its own prompt, and its answer is the tool result
// in the assistant's next request.
func TestDelegateToOverTheWire(t *testing.T) {
	srv := llmtest.NewServer(t)
	srv.On(llmtest.HasTool(DelegateToolName),
		llmtest.Calls(llmtest.ToolCall("call_1", DelegateToolName, `{"agent": "searcher", "question": "What is the answer?"}`)),
		llmtest.Text("The searcher says 42."),
	)
	srv.On(llmtest.SystemContains("You are searcher"), llmtest.Text("It is 42.").WithUsage(7, 3))
	model := newModel(t, srv)

	d := &Delegator{Rules: Delegation{Rules: []Rule{AgentRule("assistant", []string{"searcher"})}}}
	tools, err := agents.NewToolset(d)
	if err != nil {
		t.Fatal(err)
	}
	runner := &AgentRunner{Agent: func(name hooks.AgentName) (Member, bool) {
		m := Member{Model: model, ProviderModel: "test", System: "You are " + string(name) + "."}
		if name == "assistant" {
			m.Tools = tools
		}
		return m, name == "assistant" || name == "searcher"
	}}
	d.Runner = runner
	rec := &recorder{}
	d.Observer = rec

	ctx := hooks.WithWhere(t.Context(), hooks.Where{Agent: "assistant", RoomID: "!r:x"})
	m, _ := runner.Agent("assistant")
	res, err := agents.Run(ctx, agents.RunRequest{Model: model, Tools: m.Tools, Messages: []agents.Message{
		{Role: agents.RoleSystem, Content: m.System}, {Role: agents.RoleUser, Content: "What is the answer?"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "The searcher says 42." {
		t.Errorf("answer = %q", res.Text)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want assistant, searcher, assistant", len(reqs))
	}
	if got := reqs[1].LastUser(); got != "assistant asks you:\n\nWhat is the answer?" || reqs[1].HasTool(DelegateToolName) {
		t.Errorf("searcher's request: %q", got)
	}
	last := reqs[2].Body.Messages
	if tool := last[len(last)-1]; tool.Role != "tool" || !strings.Contains(string(tool.Content), "It is 42.") {
		t.Errorf("the assistant's next request ends with %+v, want the searcher's answer as the tool result", tool)
	}
	if len(rec.ended) != 1 || rec.ended[0].Outcome != OutcomeOK || rec.ended[0].Usage.TotalTokens != 10 || rec.ended[0].Parent != "assistant" {
		t.Errorf("subagent:ended = %+v", rec.ended)
	}
}

// TestTeamOverTheWire: a collaborate team on a scripted model server; the
// members' requests are held until both arrived (they overlap at the
// server), then the leader's synthesis request holds both answers.
func TestTeamOverTheWire(t *testing.T) {
	srv := llmtest.NewServer(t)
	release := make(chan struct{})
	srv.On(llmtest.SystemContains("You are a."), llmtest.Text("a thinks yes").WithHold(release))
	srv.On(llmtest.SystemContains("You are b."), llmtest.Text("b thinks no").WithHold(release))
	srv.On(llmtest.SystemContains("write the team's reply"), llmtest.Text("Opinions differ."))
	model := newModel(t, srv)
	runner := &AgentRunner{
		Agent: func(name hooks.AgentName) (Member, bool) {
			return Member{Model: model, ProviderModel: "test", System: "You are " + string(name) + "."}, true
		},
		Leader: func(team hooks.AgentName) (Member, bool) {
			return Member{Model: model, System: "You are the panel's own leader."}, team == "panel"
		},
	}
	var streamed strings.Builder // the synthesis, as it streams
	runner.OnLeadText = func(team hooks.AgentName, step Step, delta string) {
		if team == "panel" && step == StepSynthesis {
			streamed.WriteString(delta)
		}
	}
	var tuned atomic.Int32
	runner.Run = func(hooks.AgentName, *agents.RunRequest) { tuned.Add(1) }
	done := make(chan struct{})
	var (
		res Result
		err error
	)
	go func() {
		defer close(done)
		res, err = Run(t.Context(), Plan{Team: Definition{Name: "panel", Members: []hooks.AgentName{"a", "b"}, Mode: ModeCollaborate},
			Question: "Should we?"}, runner)
	}()
	testkit.Eventually(t, 10*time.Second, "both members' requests at the server at once", func() bool { return srv.Count() == 2 })
	close(release)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	synth := reqs[len(reqs)-1]
	if !strings.Contains(synth.System(), "You are the panel's own leader.") || !strings.Contains(synth.LastUser(), "a thinks yes") ||
		!strings.Contains(synth.LastUser(), "b thinks no") {
		t.Errorf("synthesis request: system %q, user %q", synth.System(), synth.LastUser())
	}
	if res.Synthesis != "Opinions differ." || streamed.String() != res.Synthesis || tuned.Load() != 2 {
		t.Errorf("synthesis = %q, streamed %q, %d member requests tuned", res.Synthesis, streamed.String(), tuned.Load())
	}
	if _, err := runner.Lead(t.Context(), LeadRequest{Team: "other"}); err == nil {
		t.Error("a team without a leader model was led")
	}
	var me *agents.ModelError
	_, err = (&AgentRunner{Agent: func(hooks.AgentName) (Member, bool) { return Member{}, false }}).RunMember(context.Background(), "ghost", Task{})
	if err == nil || errors.As(err, &me) {
		t.Errorf("RunMember of an unknown agent = %v", err)
	}
}
