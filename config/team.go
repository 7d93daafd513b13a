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
