package bot

import (
	"errors"
	"maps"
	"slices"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/team"
)

// Agents that work together (package team): a message that mentions several
// agents is answered by them as an ad-hoc team (defaults.ad_hoc_teams), and
// an agent the delegation rules allow asks others through the delegate_to
// tool. Both run the other agents as sub-agents with their own model,
// persona and tools; their steps are recorded under the message
// (Bot.teams), so a replay after a crash does not ask them again.

// delegation is w's delegate_to rules: delegation.rules and every agent's
// delegate list.
func (w *world) delegation() team.Delegation {
	d := team.Delegation{MaxDepth: w.cfg.Delegation.MaxDepth}
	for _, r := range w.cfg.Delegation.Rules {
		d.Rules = append(d.Rules, team.Rule{From: r.From, To: r.To})
	}
	for _, name := range w.cfg.AgentNames() {
		if list := w.cfg.Agents[name].Delegate; len(list) > 0 {
			d.Rules = append(d.Rules, team.AgentRule(hooks.AgentName(name), list))
		}
	}
	return d
}

// checkTeams validates the delegation settings of cfg with file:line (a
// config.WithValidator check, like checkPolicy).
func checkTeams(cfg *config.Config) config.ErrorList {
	known := make([]hooks.AgentName, 0, len(cfg.Agents))
	for _, name := range cfg.AgentNames() {
		if !cfg.Agents[name].IsTeam() {
			known = append(known, hooks.AgentName(name))
		}
	}
	var errs config.ErrorList
	add := func(err error) {
		var fe *team.FieldError
		for _, e := range unjoin(err) {
			if errors.As(e, &fe) {
				errs = append(errs, cfg.Errorf(fe.Path, "%s", fe.Msg))
			} else if e != nil {
				errs = append(errs, cfg.Errorf("delegation", "%v", e))
			}
		}
	}
	d := team.Delegation{MaxDepth: cfg.Delegation.MaxDepth}
	for _, r := range cfg.Delegation.Rules {
		d.Rules = append(d.Rules, team.Rule{From: r.From, To: r.To})
	}
	add(d.Validate(known))
	var defs []team.Definition
	for _, name := range slices.Sorted(maps.Keys(cfg.Teams)) {
		defs = append(defs, teamDefinition(name, cfg.Teams[name]))
	}
	if len(defs) > 0 {
		add(team.Validate(defs, known))
	}
	for _, name := range cfg.AgentNames() {
		if list := cfg.Agents[name].Delegate; len(list) > 0 {
			add(team.ValidateList(config.JoinKey(config.JoinKey("agents", name), "delegate"), list, known))
		}
	}
	return errs
}

// unjoin splits an errors.Join error into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// mayDelegate reports whether agent may ask some other agent of w.
func (w *world) mayDelegate(d team.Delegation, agent hooks.AgentName) bool {
	for _, name := range w.cfg.AgentNames() {
		if other := hooks.AgentName(name); other != agent && d.Allows(agent, other) {
			return true
		}
	}
	return false
}

// member is agent of w as a team member or a delegated run sees itself:
// its model, its persona as the system prompt and its tools.
func (b *Bot) member(w *world, agent hooks.AgentName) (team.Member, bool) {
	a, ok := w.cfg.Agents[string(agent)]
	if !ok || a.IsTeam() {
		return team.Member{}, false
	}
	m := w.modelOption(a.Model)
	return team.Member{
		Model: m.Model, ProviderModel: m.ProviderModel,
		System:      turn.Persona{DisplayName: a.DisplayName, Role: a.Role, Instructions: a.Instructions}.System(agent),
		Tools:       b.toolsFor(w, agent),
		DailyTokens: a.DailyTokens(w.cfg.Usage),
	}, true
}

// delegator is the delegate_to tool of w's agents.
func (b *Bot) delegator(w *world, d team.Delegation) *team.Delegator {
	return &team.Delegator{
		Rules: d,
		Runner: &team.AgentRunner{
			Agent: func(name hooks.AgentName) (team.Member, bool) { return b.member(w, name) },
			Hooks: w.reg,
		},
		Known:    func(name hooks.AgentName) bool { _, ok := w.cfg.Agents[string(name)]; return ok },
		Store:    b.teams,
		Observer: turn.SubagentObserver(w.reg),
	}
}

// withDelegation adds delegate_to to ts (the tools of agent) when the
// rules let agent ask another agent.
func (b *Bot) withDelegation(w *world, agent hooks.AgentName, tools []agents.Tool) []agents.Tool {
	d := w.delegation()
	if len(d.Rules) == 0 || !w.mayDelegate(d, agent) {
		return tools
	}
	return append(tools, b.delegator(w, d))
}

// adHocTeam is the team that answers env when it mentions several agents
// (defaults.ad_hoc_teams), led by the first mentioned.
func (b *Bot) adHocTeam(w *world, env hooks.Envelope) (*turn.TeamSpec, bool) {
	mode := w.cfg.Defaults.AdHocTeams
	if mode == config.AdHocOff || len(env.MentionedAgents) < 2 {
		return nil, false
	}
	for _, name := range env.MentionedAgents {
		if w.cfg.Agents[string(name)].IsTeam() {
			return nil, false // a team among them answers as routed
		}
	}
	def, ok := team.AdHoc(env.MentionedAgents, team.Mode(mode))
	if !ok {
		return nil, false
	}
	ts := &turn.TeamSpec{
		Definition: def, Members: map[hooks.AgentName]team.Member{},
		Display: map[hooks.AgentName]string{}, Roles: map[hooks.AgentName]string{}, Store: b.teams,
	}
	for _, name := range def.Members {
		m, ok := b.member(w, name)
		if !ok {
			return nil, false
		}
		ts.Members[name] = m
		ts.Display[name] = w.displayName(name)
		ts.Roles[name] = w.cfg.Agents[string(name)].Role
	}
	return ts, true
}

// teamDefinition is config.yaml's team name as package team reads it.
func teamDefinition(name string, t config.Team) team.Definition {
	d := team.Definition{
		Name: hooks.AgentName(name), DisplayName: t.DisplayName, Username: t.Username, Role: t.Role,
		Mode: team.Mode(t.Mode), Leader: hooks.AgentName(t.Leader), Model: t.Model, Instructions: t.Instructions,
		Rooms: t.Rooms, Show: team.Show(t.Show), MaxDepth: t.MaxDepth,
	}
	for _, m := range t.Members {
		d.Members = append(d.Members, hooks.AgentName(m))
	}
	return d
}

// configuredTeam is the team turn of the configured team agent, when
// agent is a team: its members, and its own leader model when no member
// leads.
func (b *Bot) configuredTeam(w *world, agent hooks.AgentName) (*turn.TeamSpec, bool) {
	t, ok := w.cfg.Teams[string(agent)]
	if !ok {
		return nil, false
	}
	def := teamDefinition(string(agent), t)
	ts := &turn.TeamSpec{
		Definition: def, Members: map[hooks.AgentName]team.Member{},
		Display: map[hooks.AgentName]string{}, Roles: map[hooks.AgentName]string{}, Store: b.teams,
	}
	for _, name := range def.Members {
		m, ok := b.member(w, name)
		if !ok {
			return nil, false
		}
		ts.Members[name] = m
		ts.Display[name] = w.displayName(name)
		ts.Roles[name] = w.cfg.Agents[string(name)].Role
	}
	if def.Leader == "" {
		// The team's own model leads, with the team's persona (its entry
		// under agents, which ApplyDefaults made).
		a := w.cfg.Agents[string(agent)]
		m := w.modelOption(a.Model)
		ts.Leader = &team.Member{
			Model: m.Model, ProviderModel: m.ProviderModel,
			System: turn.Persona{DisplayName: a.DisplayName, Role: a.Role}.System(agent),
		}
	}
	return ts, true
}
