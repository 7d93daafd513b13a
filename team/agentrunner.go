package team

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
)

// Member is what AgentRunner needs of one agent (or of a team's own
// leader model): its model and the system prompt and tools of its runs.
type Member struct {
	Model agents.Model
	// ProviderModel is the model id its provider is asked for (usage).
	ProviderModel string
	// System is its system prompt (persona, instructions, the rendered
	// system-enrichment block of the turn).
	System string
	// Tools are the tools it may call (with delegate_to when the rules let
	// it delegate); nil: none.
	Tools *agents.Toolset
	// DailyTokens is its daily token budget (0: unlimited). A team turn
	// checks it, and the person's, before the member runs (the runner does
	// not).
	DailyTokens int
}

// AgentRunner is a Runner on the agents tool loop: each member run is an
// agents.Run of the member's model with its system prompt, its tools and
// the task as the user message; each leader call one tool-less
// completion. The turn may use it as it is, or wrap it to stream, trace
// and check budgets.
type AgentRunner struct {
	// Agent returns the agent called name; false when there is none.
	Agent func(name hooks.AgentName) (Member, bool)
	// Leader returns the team's own leader (Definition.Model and
	// Instructions) for teams led by their own model; false when there is
	// none.
	Leader func(team hooks.AgentName) (Member, bool)
	// Hooks is the registry tool:before_call and tool:after_call of member
	// runs are emitted on (nil: none).
	Hooks *hooks.Registry
	// Run, when set, tunes each member's agents.RunRequest before it runs
	// (approval, streaming callbacks, limits). Members run concurrently:
	// what it sets must be safe for that.
	Run func(member hooks.AgentName, req *agents.RunRequest)
	// OnLeadText, when set, receives the text of the leader's calls as it
	// streams (the turn streams the synthesis into the team's reply).
	OnLeadText func(team hooks.AgentName, step Step, delta string)
}

var _ Runner = (*AgentRunner)(nil)

// RunMember runs member on task.Question. The hooks see the member as the
// agent of its tool calls (hooks.WithWhere); ctx keeps the turn's room,
// thread, person and correlation id.
func (r *AgentRunner) RunMember(ctx context.Context, member hooks.AgentName, task Task) (MemberResult, error) {
	m, ok := r.Agent(member)
	if !ok {
		return MemberResult{}, fmt.Errorf("there is no agent called %q", member)
	}
	where := hooks.WhereFrom(ctx)
	where.Agent = member
	ctx = hooks.WithWhere(ctx, where)
	req := agents.RunRequest{
		Model: m.Model, Tools: m.Tools, Hooks: r.Hooks,
		Messages: []agents.Message{
			{Role: agents.RoleSystem, Content: m.System},
			{Role: agents.RoleUser, Content: memberPrompt(task)},
		},
	}
	if r.Run != nil {
		r.Run(member, &req)
	}
	res, err := agents.Run(ctx, req)
	out := MemberResult{Text: res.Text, Model: m.ProviderModel, Usage: res.Usage, ModelCalls: res.ModelCalls}
	if err != nil {
		return out, fmt.Errorf("failed to run %s: %w", member, err)
	}
	return out, nil
}

// Lead makes one completion of the leader's model.
func (r *AgentRunner) Lead(ctx context.Context, req LeadRequest) (MemberResult, error) {
	var (
		m  Member
		ok bool
	)
	if req.Leader != "" {
		m, ok = r.Agent(req.Leader)
	} else if r.Leader != nil {
		m, ok = r.Leader(req.Team)
	}
	if !ok {
		return MemberResult{}, fmt.Errorf("team %s has no leader model", req.Team)
	}
	system := strings.TrimSpace(m.System + "\n\n" + req.System)
	var onText func(string)
	if r.OnLeadText != nil {
		onText = func(delta string) { r.OnLeadText(req.Team, req.Step, delta) }
	}
	c, err := agents.Complete(ctx, m.Model, &agents.Request{
		Messages: []agents.Message{
			{Role: agents.RoleSystem, Content: system},
			{Role: agents.RoleUser, Content: req.Prompt},
		},
		ResponseSchema: req.Schema,
	}, onText)
	if c == nil {
		c = &agents.Completion{}
	}
	out := MemberResult{Text: c.Text, Model: m.ProviderModel, Usage: c.Usage, ModelCalls: 1}
	if err != nil {
		return out, fmt.Errorf("failed to ask the leader of team %s: %w", req.Team, err)
	}
	return out, nil
}

// memberPrompt is the user message of a member's run: the task, and, when
// the leader gave the member a task of its own, the person's message it
// serves.
func memberPrompt(t Task) string {
	q := strings.TrimSpace(t.Question)
	orig := strings.TrimSpace(t.Original)
	switch {
	case t.Reason == ReasonDelegation:
		return fmt.Sprintf("%s asks you:\n\n%s", t.From, q)
	case orig == "" || orig == q:
		return q
	default:
		return fmt.Sprintf("%s\n\n(Your team's leader, %s, asks this of you for the person's message:\n<message>\n%s\n</message>)", q, t.From, orig)
	}
}
