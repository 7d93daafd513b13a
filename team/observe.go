package team

import (
	"context"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
)

// ResponseKind is the hooks.ResponseKind of a team's reply (the seed's
// response_kind "team"), for the draft and result contexts of a team run.
const ResponseKind hooks.ResponseKind = "team"

// HookFields are the team fields of the hook contexts of a team run: the
// envelope and the enrichment contexts of the team and of each member
// (the lead adds them to hooks' contexts as an embedded, omitempty
// struct). TargetMembers are the members the run addresses: every member
// for collaborate, the members the leader's plan asks for coordinate (all
// members before the plan is known).
type HookFields struct {
	Team          hooks.AgentName   `json:"team_name,omitempty"`
	TeamMode      Mode              `json:"team_mode,omitempty"`
	Leader        hooks.AgentName   `json:"team_leader,omitempty"`
	Members       []hooks.AgentName `json:"member_names,omitempty"`
	TargetMembers []hooks.AgentName `json:"target_member_names,omitempty"`
	// Member is the member a member's own context is about ("" in the
	// team's contexts).
	Member hooks.AgentName `json:"member_name,omitempty"`
	AdHoc  bool            `json:"ad_hoc,omitempty"`
}

// Fields returns the team fields for d's contexts, addressing targets
// (nil: every member).
func (d Definition) Fields(targets []hooks.AgentName) HookFields {
	if targets == nil {
		targets = d.Members
	}
	return HookFields{
		Team: d.Name, TeamMode: d.WithDefaults().Mode, Leader: d.LeaderName(),
		Members: d.Members, TargetMembers: targets, AdHoc: isAdHoc(d.Name),
	}
}

// Reason says why a sub-agent runs.
type Reason string

const (
	// ReasonMember: a team member answering for its team.
	ReasonMember Reason = "team_member"
	// ReasonDelegation: an agent asked it with delegate_to.
	ReasonDelegation Reason = "delegation"
)

// Outcome is how a sub-agent run ended (OpenClaw's subagent_ended
// outcomes).
type Outcome string

const (
	OutcomeOK      Outcome = "ok"
	OutcomeError   Outcome = "error"
	OutcomeTimeout Outcome = "timeout"
	// OutcomeKilled: the run was cancelled (🛑, a redaction, a shutdown).
	OutcomeKilled Outcome = "killed"
)

// SubagentInfo is the payload of subagent:spawned (the ended-only fields
// empty) and subagent:ended: who runs, for whom, why, and how it went.
// Its JSON names follow OpenClaw's subagent events, in the snake case of
// hookroom's contexts.
type SubagentInfo struct {
	// RunID names this run of the sub-agent: the source event, the team
	// or delegating agent, the agent and the step (Key.String).
	RunID string `json:"run_id"`
	// AgentID is the agent that runs.
	AgentID hooks.AgentName `json:"agent_id"`
	// Parent is who started it: the team, or the delegating agent.
	Parent hooks.AgentName `json:"parent_agent"`
	// Team is the team it runs for ("" for a delegation outside teams).
	Team   hooks.AgentName `json:"team,omitempty"`
	Reason Reason          `json:"reason"`
	// Task is what it was asked.
	Task string `json:"task"`
	// SpawnDepth is its delegation depth (1 for a member of a team a person
	// asked).
	SpawnDepth    int        `json:"spawn_depth"`
	SourceEventID id.EventID `json:"source_event_id,omitempty"`
	StartedAt     time.Time  `json:"started_at"`

	// Set on subagent:ended only.
	Outcome    Outcome          `json:"outcome,omitempty"`
	Error      string           `json:"error,omitempty"`
	Usage      hooks.TokenUsage `json:"usage"`
	EndedAt    time.Time        `json:"ended_at,omitzero"`
	DurationMS int64            `json:"duration_ms,omitempty"`
}

// Observer is told when a member or delegated run starts and ends; the
// turn implements it by emitting subagent:spawned and subagent:ended.
// Both are called on the run's goroutine (members run concurrently, so
// calls may overlap) and should return quickly. Ended is called exactly
// once after each Spawned, also when the run failed or was cancelled.
// Answers taken from the Store on a replay spawn nothing.
type Observer interface {
	Spawned(ctx context.Context, info SubagentInfo)
	Ended(ctx context.Context, info SubagentInfo)
}

// tokenUsage converts a member's usage for the hooks.
func tokenUsage(r MemberResult) hooks.TokenUsage {
	u := r.Usage
	if r.ModelCalls == 0 && u == (agents.Usage{}) {
		return hooks.TokenUsage{}
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return hooks.TokenUsage{
		Model: r.Model, InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CachedTokens: u.CachedTokens, TotalTokens: total, ModelCalls: r.ModelCalls,
	}
}
