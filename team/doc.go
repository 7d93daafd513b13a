// Package team owns teams, delegation and sub-agents: agents that answer
// together. It holds the team definitions and their validation, the
// orchestration of a team run, the delegate_to tool, the store that makes
// both durable across crashes, the payloads of the subagent events and
// the texts a team run shows the leader and the room. It knows nothing of
// Matrix or of the configuration file: the turn runs the models (Runner),
// the bot maps config.yaml onto Definition and Delegation.
//
// # Teams and their modes
//
// A team (Definition, config.yaml's teams:) has its own Matrix account and
// rooms, members (configured agents; teams do not nest) and a leader: one
// of the members, or the team's own model. In mode coordinate the leader
// first reads the message and answers with a JSON plan naming the members
// to ask and what to ask each (PlanSystem, PlanSchema, ParsePlan; an
// unusable plan or a failed call falls back to asking every member the
// message); the members asked run in parallel; the leader then writes the
// team's reply from every member's answer (SynthesisPrompt). In mode
// collaborate every member answers the message in parallel and the leader
// synthesises. A message that mentions several agents is answered by an
// ad-hoc team of them (AdHoc: collaborate by default, led by the first
// mentioned). Members' answers are shown folded into the reply as quoted
// sections (RenderFolded, the default) or as separate thread messages
// (RenderContribution, from Plan.OnContribution).
//
// # Durability
//
// A team run is one turn of the ledger: the turn of the person's message.
// Run records each of its steps in the Store, keyed by (message, team,
// agent, step): running before the model call, done or failed after.
// When hookroom dies during a team run, the message is replayed and the
// replayed turn calls Run again: steps done are reused (no second model
// call), steps still running or failed run again, and the synthesis, a
// step too, is produced once — a crash after it but before the reply was
// delivered reuses it. Usage sums what every recorded step used, per agent.
//
// # Delegation
//
// delegate_to (Delegator, an agents.Tool) lets an agent ask another agent
// a question and read its answer as the tool result; the other agent runs
// as a sub-agent with its own model, tools, instructions and budget
// (Runner.RunMember). Who may ask whom is configured (Delegation: rules
// from/to, and each agent's delegate: list); the depth of a chain travels
// in the context (WithDepth, DepthFrom; a team's members run at depth 1
// under the team's max_depth). Refusals are *RefusedError values the model
// reads: "delegation to X is not allowed for Y", "delegation depth limit N
// reached", a cycle. With a Store, delegations are recorded under the
// turn's message like team steps.
//
// # What the turn does
//
// The turn implements Runner: RunMember runs one agent as agents.Run does
// for a turn (its persona, the member's task as the user message, its
// tools with delegate_to, hooks.WithWhere naming the member, the ctx it is
// given so 🛑 and the depth reach it), Lead makes one tool-less call of
// the leader's model. It implements Observer by emitting subagent:spawned
// and subagent:ended. For a team turn it calls Run where a single agent's
// turn calls agents.Run, delivers RenderFolded(result) (or the synthesis,
// after the separate contributions) as the reply with response kind
// ResponseKind, and records Store.Usage per agent with the message's
// handled mark.
package team
