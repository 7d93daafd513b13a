package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/internal/turn"
)

// Agents that work together, on a real homeserver. A message that
// mentions two agents is answered by both as an ad-hoc team: the members
// run in parallel (both model requests are in flight at once: each member's
// reply is held until the other's request arrived), and the leader's
// synthesis request holds both answers; the reply quotes them. Then an
// agent asks another through delegate_to and gets its answer as the tool
// result of its next request; a delegation the rules do not allow is
// refused in the tool result.
func TestAdHocTeamAndDelegation(t *testing.T) {
	var (
		subMu sync.Mutex
		subs  []string
	)
	sub := func(kind string) func(context.Context, *hooks.SubagentContext) error {
		return func(_ context.Context, c *hooks.SubagentContext) error {
			subMu.Lock()
			defer subMu.Unlock()
			subs = append(subs, fmt.Sprintf("%s:%s:%s:%s", kind, c.AgentID, c.Reason, c.Outcome))
			return nil
		}
	}
	e := newTurnEnvOn(t, "delegation:\n  rules:\n    - {from: [alpha], to: [beta]}\n", []string{"alpha", "beta", "gamma"}, "",
		hooks.Handle(hooks.SubagentSpawned, "spawned", sub("spawned")), hooks.Handle(hooks.SubagentEnded, "ended", sub("ended")))
	mention := func(name string) string { return "@" + e.localpart(name) }

	release := make(chan struct{})
	e.llm.On(llmtest.LastUserContains("Write the team's reply now."), llmtest.Text("Together: cats and dogs are both fine."))
	e.llm.On(llmtest.SystemContains("You are alpha,"), llmtest.Text("Alpha prefers cats.").WithHold(release))
	e.llm.On(llmtest.SystemContains("You are beta,"), llmtest.Text("Beta prefers dogs.").WithHold(release))
	e.say(fmt.Sprintf("%s %s cats or dogs?", mention("alpha"), mention("beta")), "")
	testkit.Eventually(t, 30*time.Second, "both members' requests are in flight", func() bool {
		var alpha, beta bool
		for _, r := range e.llm.Requests() {
			alpha = alpha || strings.Contains(r.System(), "You are alpha,")
			beta = beta || strings.Contains(r.System(), "You are beta,")
		}
		return alpha && beta
	})
	close(release)
	got := e.waitTerminal(1)
	reply := strings.TrimPrefix(got[0], "after:")
	for _, want := range []string{"> **alpha**", "Alpha prefers cats.", "> **beta**", "Beta prefers dogs.", "Together: cats and dogs are both fine."} {
		if !strings.Contains(reply, want) {
			t.Errorf("team reply lacks %q:\n%s", want, reply)
		}
	}
	var synth string
	for _, r := range e.llm.Requests() {
		if strings.Contains(r.LastUser(), "Write the team's reply now.") {
			synth = r.LastUser()
		}
	}
	if !strings.Contains(synth, "Alpha prefers cats.") || !strings.Contains(synth, "Beta prefers dogs.") {
		t.Errorf("the synthesis request lacks a member's answer:\n%s", synth)
	}
	if k := e.results[0].Kind; k != hooks.ResponseTeam {
		t.Errorf("response kind %q, want team", k)
	}
	if tm := e.results[0].Envelope.Team; tm == nil || !tm.AdHoc || len(tm.Members) != 2 || tm.Leader != "alpha" {
		t.Errorf("the reply's envelope names team %+v, want the ad-hoc team of alpha and beta led by alpha", tm)
	}
	subMu.Lock()
	slices.Sort(subs)
	if want := []string{"ended:alpha:team_member:ok", "ended:beta:team_member:ok", "spawned:alpha:team_member:", "spawned:beta:team_member:"}; !slices.Equal(subs, want) {
		t.Errorf("subagent events %v, want %v", subs, want)
	}
	subs = nil
	subMu.Unlock()

	// Delegation: alpha asks beta (allowed) and gamma (not allowed).
	e.llm.On(llmtest.SystemContains("You are beta,"), llmtest.Text("Beta: birds sing at dawn."))
	e.llm.On(llmtest.SystemContains("You are alpha,"),
		llmtest.Calls(llmtest.ToolCall("c1", "delegate_to", `{"agent":"beta","question":"When do birds sing?"}`),
			llmtest.ToolCall("c2", "delegate_to", `{"agent":"gamma","question":"And bats?"}`)),
		llmtest.Text("Beta says birds sing at dawn."))
	before := len(e.llm.Requests())
	e.say(mention("alpha")+" when do birds sing? ask beta", "")
	got = e.waitTerminal(2)
	if got[1] != "after:Beta says birds sing at dawn." {
		t.Fatalf("turns ended %v", got)
	}
	var last llmtest.Request
	for _, r := range e.llm.Requests()[before:] {
		if strings.Contains(r.System(), "You are alpha,") {
			last = r
		}
	}
	tools := strings.Join(messageContents(last.Body.Messages), "\n")
	if !strings.Contains(tools, "Beta: birds sing at dawn.") {
		t.Errorf("alpha's next request lacks beta's answer as the tool result:\n%s", tools)
	}
	if !strings.Contains(tools, "delegation to gamma is not allowed for alpha") {
		t.Errorf("alpha's next request lacks the refusal of the delegation to gamma:\n%s", tools)
	}
	subMu.Lock()
	defer subMu.Unlock()
	slices.Sort(subs)
	if want := []string{"ended:beta:delegation:ok", "spawned:beta:delegation:"}; !slices.Equal(subs, want) {
		t.Errorf("subagent events of the delegation %v, want %v (none for the refused one)", subs, want)
	}
}

// 🛑 on a team's reply stops every member: the turn ends once, cancelled by
// the person, and no model request starts after (the synthesis is never
// asked for).
func TestTeamStop(t *testing.T) {
	e := newTurnEnv(t, []string{"alpha", "beta"}, "")
	hold := make(chan struct{})
	defer close(hold)
	e.llm.On(llmtest.LastUserContains("Write the team's reply now."), llmtest.Text("never asked"))
	e.llm.On(llmtest.SystemContains("You are alpha,"), llmtest.Text("Alpha never finishes.").WithHold(hold))
	e.llm.On(llmtest.SystemContains("You are beta,"), llmtest.Text("Beta never finishes.").WithHold(hold))
	q := e.say(fmt.Sprintf("@%s @%s think hard", e.localpart("alpha"), e.localpart("beta")), "")
	testkit.Eventually(t, 30*time.Second, "both members' requests are in flight", func() bool { return e.llm.Count() >= 2 })
	if _, err := e.person.Client.SendReaction(context.Background(), e.room, q, turn.StopKey); err != nil {
		t.Fatal(err)
	}
	if got := e.waitTerminal(1); !slices.Equal(got, []string{"cancelled:cancelled_by_user"}) {
		t.Fatalf("terminal %v, want one message:cancelled by the person", got)
	}
	// Barrier: a later turn of the room runs to its end; by then a
	// synthesis request of the stopped team would have been made.
	e.llm.On(llmtest.LastUserContains("after the stop"), llmtest.Text("Still here."))
	e.say(fmt.Sprintf("@%s after the stop", e.localpart("alpha")), "")
	if got := e.waitTerminal(2); got[1] != "after:Still here." {
		t.Fatalf("terminal %v", got)
	}
	for _, r := range e.llm.Requests() {
		if strings.Contains(r.LastUser(), "Write the team's reply now.") {
			t.Errorf("the stopped team asked for a synthesis")
		}
	}
}

// A team configured in config.yaml has its own account and answers when
// mentioned, from its members' answers (mode collaborate, folded).
func TestConfiguredTeam(t *testing.T) {
	var e *turnEnv
	e = newTurnEnvWith(t, func(env *turnEnv) {
		env.cfg += fmt.Sprintf("teams:\n  crew:\n    username: %s\n    display_name: Crew\n    members: [alpha, beta]\n    mode: collaborate\n    leader: alpha\n    rooms: [main]\n", env.localpart("crew"))
		env.cfg = strings.Replace(env.cfg, "  beta:\n", "  beta:\n    daily_token_budget: 100\n", 1)
	}, "", []string{"alpha", "beta"}, "")
	e.llm.On(llmtest.LastUserContains("Write the team's reply now."), llmtest.Text("The crew agrees: tea."), llmtest.Text("The crew agrees: tea."))
	e.llm.On(llmtest.SystemContains("You are alpha,"), llmtest.Text("Alpha: tea."), llmtest.Text("Alpha: tea."))
	e.llm.On(llmtest.SystemContains("You are beta,"), llmtest.Text("Beta: tea as well.").WithUsage(150, 10))
	e.say("@"+e.localpart("crew")+" tea or coffee?", "")
	got := e.waitTerminal(1)
	reply := strings.TrimPrefix(got[0], "after:")
	for _, want := range []string{"Alpha: tea.", "Beta: tea as well.", "The crew agrees: tea."} {
		if !strings.Contains(reply, want) {
			t.Errorf("the team's reply lacks %q:\n%s", want, reply)
		}
	}
	r := e.results[0]
	if tm := r.Envelope.Team; tm == nil || tm.Name != "crew" || tm.AdHoc {
		t.Errorf("envelope team %+v, want the configured team crew", tm)
	}
	_, _, ev := e.visibleText(r.EventID)
	if ev.Sender != e.userID("crew") {
		t.Errorf("the reply is from %s, want the team's own account", ev.Sender)
	}

	// Beta used 160 of its 100 tokens: the next team turn goes on
	// without it, and says so.
	betaAsked := func() int {
		n := 0
		for _, r := range e.llm.Requests() {
			if strings.Contains(string(r.Raw), "You are beta,") {
				n++
			}
		}
		return n
	}
	before := betaAsked()
	e.say("@"+e.localpart("crew")+" and for dessert?", "")
	got = e.waitTerminal(2)
	reply = strings.TrimPrefix(got[1], "after:")
	for _, want := range []string{"Alpha: tea.", "**beta** could not answer: over its daily budget", "The crew agrees: tea."} {
		if !strings.Contains(reply, want) {
			t.Errorf("the second team reply lacks %q:\n%s", want, reply)
		}
	}
	if n := betaAsked() - before; n != 0 {
		t.Errorf("beta was asked %d times over its budget", n)
	}
}
