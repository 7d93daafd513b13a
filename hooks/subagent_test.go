package hooks_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// The static facts of the sub-agent events: observers with a 1 s default,
// built-ins, in a reserved namespace, with no designated fields.
func TestSubagentEventsFacts(t *testing.T) {
	for _, ev := range []hooks.Event[hooks.SubagentContext]{hooks.SubagentSpawned, hooks.SubagentEnded} {
		if ev.Mode() != hooks.Observer || ev.DefaultTimeout() != time.Second {
			t.Errorf("%s: mode %s timeout %s", ev.Name(), ev.Mode(), ev.DefaultTimeout())
		}
		if !slices.Contains(hooks.BuiltinEvents(), ev.Name()) {
			t.Errorf("BuiltinEvents lacks %s", ev.Name())
		}
	}
	if hooks.SubagentSpawned.Name() != "subagent:spawned" || hooks.SubagentEnded.Name() != "subagent:ended" {
		t.Errorf("names %s, %s", hooks.SubagentSpawned.Name(), hooks.SubagentEnded.Name())
	}
	if err := hooks.ValidateEventName("subagent:mine"); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("subagent:mine as a custom event: %v", err)
	}
	if f := hooks.MutableFields(&hooks.SubagentContext{}); len(f) != 0 {
		t.Errorf("designated fields %v", f)
	}
	// Both filters can match (the context names an agent and a room).
	nop := func(context.Context, *hooks.SubagentContext) error { return nil }
	hooktest.NewRegistry(t, hooks.Handle(hooks.SubagentEnded, "x", nop, hooks.Agents("a"), hooks.Rooms("!r:hs")))
}

// agents= and rooms= match the conversation that started the run (Where),
// not the agent that runs; every hook observes, a failing one does not stop
// the next, and nothing a hook writes reaches the caller.
func TestSubagentEventsRouteAndObserve(t *testing.T) {
	var ran []string
	record := func(name string) func(context.Context, *hooks.SubagentContext) error {
		return func(_ context.Context, c *hooks.SubagentContext) error {
			ran = append(ran, name+":"+c.EventName()+":"+string(c.AgentID)+":"+string(c.Outcome))
			c.Task, c.Usage.TotalTokens = "scribbled", 1
			return nil
		}
	}
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.SubagentSpawned, "failing", func(context.Context, *hooks.SubagentContext) error { return errors.New("down") }, hooks.Priority(1)),
		hooks.Handle(hooks.SubagentSpawned, "team", record("team"), hooks.Agents(hooktest.TeamName)),
		hooks.Handle(hooks.SubagentEnded, "team_ended", record("team"), hooks.Agents(hooktest.TeamName), hooks.Rooms(hooktest.Room)),
		hooks.Handle(hooks.SubagentEnded, "member", record("member"), hooks.Agents("alice")),
		hooks.Handle(hooks.SubagentEnded, "elsewhere", record("elsewhere"), hooks.Rooms("!other:localhost")),
	)
	spawned := hooktest.SubagentSpawned("alice", "find the sources")
	ended := hooktest.SubagentEnded("alice", "find the sources", hooks.SubagentOK)
	hooktest.Emit(t, reg, hooks.SubagentSpawned, spawned)
	hooktest.Emit(t, reg, hooks.SubagentEnded, ended)
	if got := strings.Join(ran, ","); got != "team:subagent:spawned:alice:,team:subagent:ended:alice:ok" {
		t.Errorf("ran %s", got)
	}
	if spawned.Task != "find the sources" || ended.Usage.TotalTokens != 240 {
		t.Errorf("a hook's changes reached the caller: %+v %+v", spawned, ended)
	}
}

// The wire names are package team's (SubagentInfo, HookFields), so the
// turn fills one from the other field by field; the ended-only fields are
// absent from subagent:spawned.
func TestSubagentJSON(t *testing.T) {
	spawned, _ := json.Marshal(hooktest.SubagentSpawned("alice", "find the sources"))
	ended, _ := json.Marshal(hooktest.SubagentEnded("alice", "find the sources", hooks.SubagentTimeout))
	for _, want := range []string{
		`"agent":"research"`, `"room_id":"!room:localhost"`, `"run_id":"$event:localhost/research/alice/answer"`,
		`"agent_id":"alice"`, `"parent_agent":"research"`, `"team":"research"`, `"reason":"team_member"`,
		`"task":"find the sources"`, `"spawn_depth":1`, `"source_event_id":"$event:localhost"`,
		`"started_at":"2026-01-02T10:00:00Z"`, `"usage":{`,
	} {
		if !strings.Contains(string(spawned), want) || !strings.Contains(string(ended), want) {
			t.Errorf("JSON lacks %s:\n%s\n%s", want, spawned, ended)
		}
	}
	for _, f := range []string{`"outcome"`, `"error"`, `"ended_at"`, `"duration_ns"`} {
		if strings.Contains(string(spawned), f) {
			t.Errorf("subagent:spawned has %s: %s", f, spawned)
		}
	}
	for _, want := range []string{`"outcome":"timeout"`, `"error":"context deadline exceeded"`, `"ended_at":"2026-01-02T10:00:01.5Z"`, `"duration_ns":1500000000`} {
		if !strings.Contains(string(ended), want) {
			t.Errorf("subagent:ended lacks %s: %s", want, ended)
		}
	}
	var back hooks.SubagentContext
	if err := json.Unmarshal(ended, &back); err != nil {
		t.Fatal(err)
	}
	if want := hooktest.SubagentEnded("alice", "find the sources", hooks.SubagentTimeout); back.Where != want.Where ||
		back.RunID != want.RunID || back.Outcome != want.Outcome || !back.EndedAt.Equal(want.EndedAt) || back.Duration != want.Duration {
		t.Errorf("round trip: %+v, want %+v", back, want)
	}

	env := hooktest.Envelope("compare the two papers")
	single, _ := json.Marshal(env)
	if strings.Contains(string(single), `"team"`) {
		t.Errorf("a single agent's envelope has team fields: %s", single)
	}
	env.AgentName, env.Team = hooktest.TeamName, hooktest.Team(hooks.TeamCollaborate, "alice", "bob")
	env.Team.AdHoc = true
	raw, _ := json.Marshal(env)
	const want = `"team":{"team_name":"research","team_mode":"collaborate","team_leader":"alice","member_names":["alice","bob"],"target_member_names":["alice","bob"],"ad_hoc":true}`
	if !strings.Contains(string(raw), want) {
		t.Errorf("envelope JSON %s, want it to contain %s", raw, want)
	}
	c := hooktest.SystemEnrich("hi")
	c.TargetMembers = []hooks.AgentName{"bob"}
	raw, _ = json.Marshal(c)
	if !strings.Contains(string(raw), `"target_member_names":["bob"]`) {
		t.Errorf("system:enrich JSON %s", raw)
	}
	raw, _ = json.Marshal(hooktest.MessageEnrich("hi"))
	if strings.Contains(string(raw), "target_member_names") {
		t.Errorf("a single agent's message:enrich has target members: %s", raw)
	}
}

// A team's turn: hooks see the team in the envelope and the enrichment
// contexts and the response kind team, and each works on its own copy of
// the team fields.
func TestTeamFieldsInTurnContexts(t *testing.T) {
	team := hooktest.Team(hooks.TeamCoordinate, "alice", "bob", "carol")
	team.TargetMembers = []hooks.AgentName{"alice", "carol"}
	env := hooktest.Envelope("compare the two papers")
	env.AgentName, env.Team = hooktest.TeamName, team

	scribble := func(team *hooks.TeamInfo, targets []hooks.AgentName) {
		team.Members[0], team.TargetMembers[0], team.Member = "mallory", "mallory", "mallory"
		targets[0] = "mallory"
	}
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.SystemEnrich, "team_rules", func(_ context.Context, c *hooks.SystemEnrichContext) error {
			if c.Envelope.Team != nil {
				c.AddInstruction("team", "You answer as part of "+string(c.Envelope.Team.Name)+" with "+joinNames(c.TargetMembers))
				scribble(c.Envelope.Team, c.TargetMembers)
			}
			return nil
		}),
		hooks.Handle(hooks.MessageEnrich, "who", func(_ context.Context, c *hooks.MessageEnrichContext) error {
			c.AddMetadata("members", joinNames(c.TargetMembers))
			scribble(c.Envelope.Team, c.TargetMembers)
			return nil
		}),
		hooks.Handle(hooks.MessageBeforeResponse, "sign", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			if c.Draft.Kind == hooks.ResponseTeam {
				c.Draft.Text += "\n-- " + joinNames(c.Draft.Envelope.Team.TargetMembers)
			}
			c.Draft.Kind = hooks.ResponseAI // read-only: dropped
			scribble(c.Draft.Envelope.Team, []hooks.AgentName{""})
			return nil
		}),
	)
	sys := &hooks.SystemEnrichContext{Envelope: env, TargetAgent: hooktest.TeamName, TargetMembers: slices.Clone(team.TargetMembers)}
	hooktest.Emit(t, reg, hooks.SystemEnrich, sys)
	msg := &hooks.MessageEnrichContext{Envelope: env, TargetAgent: hooktest.TeamName, TargetMembers: slices.Clone(team.TargetMembers)}
	hooktest.Emit(t, reg, hooks.MessageEnrich, msg)
	draft := &hooks.BeforeResponseContext{Draft: hooks.ResponseDraft{Text: "Both agree.", Kind: hooks.ResponseTeam, Envelope: env}}
	hooktest.Emit(t, reg, hooks.MessageBeforeResponse, draft)

	if len(sys.Items) != 1 || sys.Items[0].Text != "You answer as part of research with alice, carol" {
		t.Errorf("system:enrich items %+v", sys.Items)
	}
	if len(msg.Items) != 1 || msg.Items[0].Text != "alice, carol" {
		t.Errorf("message:enrich items %+v", msg.Items)
	}
	if draft.Draft.Text != "Both agree.\n-- alice, carol" || draft.Draft.Kind != hooks.ResponseTeam {
		t.Errorf("draft %q kind %s", draft.Draft.Text, draft.Draft.Kind)
	}
	for _, got := range []*hooks.TeamInfo{team, sys.Envelope.Team, msg.Envelope.Team, draft.Draft.Envelope.Team} {
		if joinNames(got.Members) != "alice, bob, carol" || joinNames(got.TargetMembers) != "alice, carol" || got.Member != "" {
			t.Errorf("a hook's scribbles reached the caller: %+v", got)
		}
	}
	if joinNames(sys.TargetMembers) != "alice, carol" || joinNames(msg.TargetMembers) != "alice, carol" {
		t.Errorf("target members changed: %v %v", sys.TargetMembers, msg.TargetMembers)
	}
}

func joinNames(names []hooks.AgentName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}
