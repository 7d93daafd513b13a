package turn

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/enrich"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/team"
	"github.com/hookroom/hookroom/usage"
)

// A team turn (Spec.Team) answers with several agents (package team): the
// members run as sub-agents — each with its own model, tools and
// instructions, the turn's system-enrichment block added to its system
// prompt — and the leader (a member, or the team's own model, the block
// added to its system prompt as well) writes the reply, which streams into
// the turn's placeholder like a single model's text. The steps are
// recorded under the message (team.Store), so a replay after a crash
// reuses the member answers that completed. 🛑 cancels the turn's context, which every
// member's run derives from: no model call starts after it, and the turn
// ends once, as any turn does.

// TeamSpec makes a turn a team's.
type TeamSpec struct {
	Definition team.Definition
	// Members are the team's agents as the runner needs them (model,
	// persona as the system prompt, tools); Leader the team's own leader
	// model when no member leads (nil otherwise).
	Members map[hooks.AgentName]team.Member
	Leader  *team.Member
	// Display names the agents for the room; Roles describes them to a
	// coordinating leader.
	Display map[hooks.AgentName]string
	Roles   map[hooks.AgentName]string
	// Store records the team run's steps (nil: not durable).
	Store *team.Store
	// Observer is told of every member run (subagent events); nil: none.
	Observer team.Observer
}

// runTeam runs the turn's team on the enriched message and returns what
// deliver needs: the reply's text, what every step used, and the stored
// messages (the reply).
func (t *turn) runTeam(ctx context.Context, et enrich.Turn) (*agents.RunResult, error) {
	ts := t.spec.Team
	members := make(map[hooks.AgentName]team.Member, len(ts.Members))
	for name, m := range ts.Members {
		if et.System != "" {
			m.System = strings.TrimSpace(m.System + "\n\n" + et.System)
		}
		members[name] = m
	}
	var leader *team.Member
	if ts.Leader != nil {
		// The team's own leader gets the block too.
		l := *ts.Leader
		if et.System != "" {
			l.System = strings.TrimSpace(l.System + "\n\n" + et.System)
		}
		leader = &l
	}
	var traceMu sync.Mutex
	runner := &team.AgentRunner{
		Agent: func(name hooks.AgentName) (team.Member, bool) {
			m, ok := members[name]
			return m, ok
		},
		Leader: func(hooks.AgentName) (team.Member, bool) {
			if leader == nil {
				return team.Member{}, false
			}
			return *leader, true
		},
		Hooks: t.reg,
		Run: func(_ hooks.AgentName, req *agents.RunRequest) {
			req.OnToolCall = func(e hooks.ToolTraceEntry) {
				traceMu.Lock()
				defer traceMu.Unlock()
				t.onToolCall(e)
			}
		},
		OnLeadText: func(_ hooks.AgentName, step team.Step, delta string) {
			if step == team.StepSynthesis {
				t.onText(delta)
			}
		},
	}
	plan := team.Plan{
		Team: ts.Definition, SourceEventID: t.ev.ID, Question: et.Prompt, Roles: ts.Roles,
		Store: ts.Store, Observer: ts.Observer,
	}
	if ts.Definition.WithDefaults().Show == team.ShowSeparate {
		plan.OnContribution = t.postContribution
	}
	gate := &memberBudgets{Runner: runner, log: t.log, check: func(ctx context.Context, member hooks.AgentName) (*usage.Exceeded, error) {
		b := usage.Budgets{PerUser: t.spec.Budgets.PerUser, PerAgent: members[member].DailyTokens}
		return t.deps.Usage.Check(ctx, time.Now(), member, t.env.RequesterID, b)
	}}
	res, err := team.Run(ctx, plan, gate)
	out := &agents.RunResult{}
	t.mu.Lock()
	t.teamUsage = res.UsageByAgent()
	t.mu.Unlock()
	for _, u := range t.teamUsage {
		out.ModelCalls += u.ModelCalls
		out.Usage.PromptTokens += u.Usage.PromptTokens
		out.Usage.CompletionTokens += u.Usage.CompletionTokens
		out.Usage.CachedTokens += u.Usage.CachedTokens
		out.Usage.TotalTokens += u.Usage.TotalTokens
	}
	if err != nil {
		return out, err
	}
	out.Text = res.Synthesis
	if ts.Definition.WithDefaults().Show != team.ShowSeparate {
		out.Text = team.RenderFolded(res, ts.Display)
	}
	out.Messages = []agents.Message{{Role: agents.RoleAssistant, Content: out.Text}}
	t.log.Info().Str("team", string(res.Team)).Int("members", len(res.Contributions)).Int("reused_steps", res.Reused).Msg("team answered")
	return out, nil
}

// memberBudgets is the team runner of a team turn with the daily token
// budgets checked before each member runs: the member's own
// (Member.DailyTokens) and the person's. A member whose budget, or whose
// person's, is used up today does not run: its run ends with a
// *MemberOverBudgetError (subagent:ended with outcome error and that
// error), its contribution shows as not answered ("beta could not answer:
// over its daily budget …") and the other members go on. The team turn
// checks the person's budget and its own agent's before it starts, as
// every turn does; this catches what the members used up of them, and
// the members' own budgets. When a budget cannot be read the member runs.
type memberBudgets struct {
	team.Runner
	log   zerolog.Logger
	check func(ctx context.Context, member hooks.AgentName) (*usage.Exceeded, error)
}

// RunMember checks member's budgets, then runs it (or not).
func (g *memberBudgets) RunMember(ctx context.Context, member hooks.AgentName, task team.Task) (team.MemberResult, error) {
	ex, err := g.check(ctx, member)
	if err != nil {
		g.log.Error().Err(err).Str("member", string(member)).Msg("failed to check the daily token budgets; answering anyway")
	} else if ex != nil {
		g.log.Info().Str("member", string(member)).Str("budget", string(ex.Scope)).Int64("limit", ex.Limit).Int64("used", ex.Used).
			Msg("a team member's daily token budget is used up; it does not answer")
		return team.MemberResult{}, &MemberOverBudgetError{Member: member, Exceeded: *ex}
	}
	return g.Runner.RunMember(ctx, member, task)
}

// MemberOverBudgetError is why a team member did not run: its daily
// token budget, or the person's, is used up.
type MemberOverBudgetError struct {
	Member hooks.AgentName
	usage.Exceeded
}

func (e *MemberOverBudgetError) Error() string {
	if e.Scope == usage.ScopeAgent {
		return fmt.Sprintf("over its daily budget (%s of %s tokens used today; it resets at 00:00 UTC)",
			usage.FormatCount(e.Used), usage.FormatCount(e.Limit))
	}
	return fmt.Sprintf("the person's daily budget is used up (%s of %s tokens used today; it resets at 00:00 UTC)",
		usage.FormatCount(e.Used), usage.FormatCount(e.Limit))
}

// postContribution posts one member's contribution as its own message in
// the thread (team show: separate), once: a replay finds the message the
// killed run posted and leaves it.
func (t *turn) postContribution(ctx context.Context, c team.Contribution) {
	ts := t.spec.Team
	part := -2
	for i, m := range ts.Definition.Members {
		if m == c.Member {
			part = -2 - i
		}
	}
	if t.earlierPart(part) != "" {
		return
	}
	opts := t.sendOptions("member-" + string(c.Member))
	opts.Notice = true
	opts.TxnKey = matrixio.TxnKey(t.ev.ID, "member-"+string(c.Member))
	if _, err := t.sendNew(ctx, part, team.RenderContribution(c, ts.Display), opts); err != nil && ctx.Err() == nil {
		t.log.Warn().Err(err).Str("member", string(c.Member)).Msg("failed to post a team member's answer")
	}
}

// responseKind is the kind of the turn's reply: the model's, or a team's.
func (t *turn) responseKind() hooks.ResponseKind {
	if t.spec.Team != nil {
		return team.ResponseKind
	}
	return hooks.ResponseAI
}

// SubagentObserver emits subagent:spawned and subagent:ended on reg for
// the member and delegated runs of package team.
func SubagentObserver(reg *hooks.Registry) team.Observer { return subagents{reg: reg} }

type subagents struct{ reg *hooks.Registry }

func (s subagents) Spawned(ctx context.Context, info team.SubagentInfo) {
	if s.reg.Has(hooks.SubagentSpawned.Name()) {
		Emit(ctx, s.reg, hooks.SubagentSpawned, subagentContext(ctx, info))
	}
}

func (s subagents) Ended(ctx context.Context, info team.SubagentInfo) {
	if s.reg.Has(hooks.SubagentEnded.Name()) {
		Emit(ctx, s.reg, hooks.SubagentEnded, subagentContext(ctx, info))
	}
}

// subagentContext is info as the hooks see it.
func subagentContext(ctx context.Context, info team.SubagentInfo) *hooks.SubagentContext {
	c := &hooks.SubagentContext{
		Where: hooks.WhereFrom(ctx), RunID: info.RunID, AgentID: info.AgentID, Parent: info.Parent, Team: info.Team,
		Reason: hooks.SubagentReason(info.Reason), Task: info.Task, SpawnDepth: info.SpawnDepth,
		SourceEventID: info.SourceEventID, StartedAt: info.StartedAt, Outcome: hooks.SubagentOutcome(info.Outcome),
		Error: info.Error, Usage: info.Usage, EndedAt: info.EndedAt,
	}
	if !info.EndedAt.IsZero() {
		c.Duration = info.EndedAt.Sub(info.StartedAt)
	}
	return c
}

// teamInfo is the team of a team turn as hooks see it (the envelope's
// Team).
func (ts *TeamSpec) teamInfo() *hooks.TeamInfo {
	def := ts.Definition.WithDefaults()
	info := &hooks.TeamInfo{
		Name: def.Name, Mode: hooks.TeamMode(def.Mode), Leader: def.Leader, Members: def.Members,
		TargetMembers: def.Members, AdHoc: strings.HasPrefix(string(def.Name), "adhoc:"),
	}
	return info
}

// targetMembers are the members a team turn asks; nil for one agent's.
func (t *turn) targetMembers() []hooks.AgentName {
	if t.spec.Team == nil {
		return nil
	}
	return t.spec.Team.Definition.Members
}
