package hooks

import (
	"time"

	"maunium.net/go/mautrix/id"
)

// The contexts of agents that work together: the team fields of a team
// turn's envelope (TeamInfo), and subagent:spawned and subagent:ended, which
// observe each run of an agent on another's behalf (a team member answering
// for its team, an agent asked with delegate_to). The JSON names are those
// of package team's HookFields and SubagentInfo, so the turn fills one from
// the other field by field.

// TeamMode is how a team answers.
type TeamMode string

// The modes of a team.
const (
	// TeamCoordinate: the leader reads the question first, asks the
	// members it chooses and writes the answer from theirs.
	TeamCoordinate TeamMode = "coordinate"
	// TeamCollaborate: every member answers in parallel; the leader
	// writes the answer from theirs.
	TeamCollaborate TeamMode = "collaborate"
)

// TeamInfo describes the team a turn belongs to: Envelope.Team, nil for a
// turn of a single agent. Treat it as read-only, like the envelope.
type TeamInfo struct {
	// Name is the team's name (config.yaml's teams: key, or the generated
	// name of an ad-hoc team); the envelope's AgentName is the team too.
	Name AgentName `json:"team_name"`
	Mode TeamMode  `json:"team_mode"`
	// Leader is the agent that plans and writes the team's answer; "" when
	// the team's own model leads.
	Leader AgentName `json:"team_leader,omitempty"`
	// Members are the team's members, in config order.
	Members []AgentName `json:"member_names"`
	// TargetMembers are the members this turn asks: every member for
	// collaborate, the members the leader's plan names for coordinate
	// (every member before the plan is known).
	TargetMembers []AgentName `json:"target_member_names,omitempty"`
	// Member is the member a member's own context is about ("" in the
	// team's contexts).
	Member AgentName `json:"member_name,omitempty"`
	// AdHoc is set for a team formed because one message mentioned several
	// agents, rather than configured in teams:.
	AdHoc bool `json:"ad_hoc,omitempty"`
}

// clone returns a private copy of t (nil stays nil).
func (t *TeamInfo) clone() *TeamInfo {
	if t == nil {
		return nil
	}
	c := *t
	c.Members = cloneNonEmpty(c.Members)
	c.TargetMembers = cloneNonEmpty(c.TargetMembers)
	return &c
}

// SubagentReason says why a sub-agent runs.
type SubagentReason string

// The reasons of a sub-agent run.
const (
	// SubagentTeamMember: a team member answering for its team.
	SubagentTeamMember SubagentReason = "team_member"
	// SubagentDelegation: an agent asked it with the delegate_to tool.
	SubagentDelegation SubagentReason = "delegation"
)

// SubagentOutcome is how a sub-agent run ended (OpenClaw's subagent_ended
// outcomes).
type SubagentOutcome string

// The outcomes of a sub-agent run.
const (
	SubagentOK SubagentOutcome = "ok"
	// SubagentError: the run failed (its model, a tool loop limit).
	SubagentError SubagentOutcome = "error"
	// SubagentTimeout: the run exceeded its deadline.
	SubagentTimeout SubagentOutcome = "timeout"
	// SubagentKilled: the run was cancelled (🛑, a redaction, a shutdown).
	SubagentKilled SubagentOutcome = "killed"
)

// SubagentContext is passed to subagent:spawned hooks (observer, 1 s), right
// before an agent starts a run on another's behalf — each member run of a
// team turn, each delegate_to call — and to subagent:ended hooks (observer,
// 1 s) once that run is over, whatever its outcome: exactly one
// subagent:ended follows each subagent:spawned. A step that a replay after a
// restart takes from the ledger instead of running it again fires neither.
// Members of a collaborate team run in parallel, so the events of different
// runs interleave; RunID pairs them. Both fire on the run's path (the
// member's model call waits for subagent:spawned), so keep hooks short.
//
// Where names the conversation that started the run: the team's turn for
// a member, the delegating agent's for a delegation. Its agents= and rooms=
// filters match Where's Agent and RoomID, not AgentID. Nothing can be
// changed.
type SubagentContext struct {
	Base
	Where
	// RunID names this run: the source event, the team or delegating
	// agent, the agent and the step. The same in both events of a run and
	// across a replay.
	RunID string `json:"run_id"`
	// AgentID is the agent that runs.
	AgentID AgentName `json:"agent_id"`
	// Parent is who started it: the team, or the delegating agent.
	Parent AgentName `json:"parent_agent"`
	// Team is the team it runs for ("" for a delegation outside a team).
	Team   AgentName      `json:"team,omitempty"`
	Reason SubagentReason `json:"reason"`
	// Task is what it was asked.
	Task string `json:"task"`
	// SpawnDepth is its depth in the chain of delegations: 1 for a member
	// of a team a person asked, one more for each delegate_to hop.
	SpawnDepth int `json:"spawn_depth"`
	// SourceEventID is the person's message the run serves.
	SourceEventID id.EventID `json:"source_event_id,omitempty"`
	StartedAt     time.Time  `json:"started_at"`

	// Set on subagent:ended only. Error says why a run that did not end ok
	// ended; Usage is what its model calls used (zero when it called
	// none), counted against that agent and the person.
	Outcome  SubagentOutcome `json:"outcome,omitempty"`
	Error    string          `json:"error,omitempty"`
	Usage    TokenUsage      `json:"usage"`
	EndedAt  time.Time       `json:"ended_at,omitzero"`
	Duration time.Duration   `json:"duration_ns,omitempty"`
}

func (c *SubagentContext) route() route           { return c.Where.route() }
func (c *SubagentContext) isolate()               {}
func (c *SubagentContext) merge(*SubagentContext) {}
func (c *SubagentContext) describe(*SubagentContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}
