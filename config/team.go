package config

// Delegation is config.yaml's delegation: which agents may ask which other
// agents through the delegate_to tool (besides each agent's own delegate
// list), and how deep a chain of delegations may go. The bot checks the
// names and builds the rules (package team).
type Delegation struct {
	// MaxDepth bounds chains: a person's turn is depth 0, a run it
	// delegates to depth 1, … Default 2.
	MaxDepth int `yaml:"max_depth"`
	// Rules allow delegation; each lets every agent of From ask every
	// agent of To (agent names or "*").
	Rules []DelegationRule `yaml:"rules"`
}

// DelegationRule is one entry of delegation.rules.
type DelegationRule struct {
	From []string `yaml:"from"`
	To   []string `yaml:"to"`
}

// The values of defaults.ad_hoc_teams.
const (
	AdHocCollaborate = "collaborate"
	AdHocCoordinate  = "coordinate"
	AdHocOff         = "off"
)

// Team is one entry of teams: (see package team for the modes). Its name
// shares the agents' namespace: people mention a team like an agent.
type Team struct {
	DisplayName string `yaml:"display_name"`
	Username    string `yaml:"username"`
	Role        string `yaml:"role"`
	Avatar      string `yaml:"avatar"`
	// Members are agents (not teams), in the order their answers show.
	Members []string `yaml:"members"`
	// Mode is coordinate (default) or collaborate.
	Mode string `yaml:"mode"`
	// Leader is the member that plans and writes the reply; empty: the
	// team's own model (Model) with Instructions.
	Leader       string   `yaml:"leader"`
	Model        string   `yaml:"model"`
	Instructions string   `yaml:"instructions"`
	Rooms        []string `yaml:"rooms"`
	// Show is folded (default: members' answers quoted in the reply) or
	// separate (each its own message in the thread).
	Show     string `yaml:"show"`
	MaxDepth int    `yaml:"max_depth"`
}

// applyTeams adds the agent entry of each team: its account, rooms and
// persona, on the team's own model, else its leader's.
func (c *Config) applyTeams() {
	for name, t := range c.Teams {
		if a, ok := c.Agents[name]; ok && !a.team {
			continue // the name is an agent's: validate reports it
		}
		model := t.Model
		if model == "" && t.Leader != "" {
			model = c.Agents[t.Leader].Model
		}
		if c.Agents == nil {
			c.Agents = map[string]Agent{}
		}
		c.Agents[name] = Agent{
			DisplayName: t.DisplayName, Username: t.Username, Avatar: t.Avatar, Role: t.Role,
			Instructions: t.Instructions, Model: model, Rooms: t.Rooms, team: true,
		}
	}
}
