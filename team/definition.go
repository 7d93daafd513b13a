package team

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/hookroom/hookroom/hooks"
)

// Mode is how a team answers.
type Mode string

const (
	// ModeCoordinate: the leader reads the question first and decides
	// which members to ask and what (a JSON plan, see ParsePlan); the
	// members asked answer in parallel; the leader then writes the reply
	// from their answers.
	ModeCoordinate Mode = "coordinate"
	// ModeCollaborate: every member answers the question in parallel; the
	// leader writes the reply from their answers.
	ModeCollaborate Mode = "collaborate"
)

// Show is how the members' contributions appear in the room.
type Show string

const (
	// ShowFolded folds them into the team's reply as quoted sections, one
	// per member, before the synthesis (RenderFolded). The default.
	ShowFolded Show = "folded"
	// ShowSeparate posts each as its own message in the thread, from the
	// team's account, as it completes (Plan.OnContribution); the reply is
	// the synthesis alone.
	ShowSeparate Show = "separate"
)

// DefaultMaxDepth is how deep chains of delegation go when neither the
// delegation rules nor the team say: a person's turn is depth 0, an agent
// it delegates to runs at depth 1, and that one may delegate once more
// (depth 2).
const DefaultMaxDepth = 2

// Definition is one team, as config.yaml declares it under teams: (the key
// is the name). A team answers with its own Matrix account (Username,
// DisplayName) in its Rooms, like an agent; its members are configured
// agents.
//
//	teams:
//	  research:
//	    display_name: Research desk
//	    members: [searcher, analyst]
//	    mode: coordinate          # or collaborate; default coordinate
//	    leader: analyst           # a member; empty: the team's own model
//	    model: default            # the leader's model when leader is empty
//	    show: folded              # or separate; default folded
//	    max_depth: 2              # delegation depth under this team
//	    rooms: [lobby]
//
// Teams are not members of teams: a member must be an agent. That keeps
// every team one level deep, so a team can never contain itself.
type Definition struct {
	// Name is the team's name, the key under teams:. It shares the agents'
	// namespace: mentions, hooks and usage name a team like an agent.
	Name hooks.AgentName `yaml:"-"`
	// DisplayName is the team account's display name (default: the name).
	DisplayName string `yaml:"display_name"`
	// Username is the team account's localpart (default: the name).
	Username string `yaml:"username"`
	// Role is a one-line description (for the router and !help).
	Role string `yaml:"role"`
	// Members are the agents of the team, in the order their
	// contributions are shown. At least one; no duplicates; no teams.
	Members []hooks.AgentName `yaml:"members"`
	// Mode is coordinate (default) or collaborate.
	Mode Mode `yaml:"mode"`
	// Leader plans (coordinate) and writes the reply: one of the members,
	// or empty for the team's own model (Model), with Instructions.
	Leader hooks.AgentName `yaml:"leader"`
	// Model names the models: entry the team's own leader runs on when
	// Leader is empty (default: the default model, as for agents).
	Model string `yaml:"model"`
	// Instructions are added to the leader's system prompt for the team's
	// plan and synthesis.
	Instructions string `yaml:"instructions"`
	// Rooms lists the rooms the team account joins and answers in (room
	// keys, ids or aliases, as for agents).
	Rooms []string `yaml:"rooms"`
	// Show is folded (default) or separate.
	Show Show `yaml:"show"`
	// MaxDepth bounds delegation chains that start in this team's runs
	// (its members run at depth 1); 0: the delegation rules' max_depth.
	MaxDepth int `yaml:"max_depth"`
}

// WithDefaults returns d with its zero fields defaulted: mode coordinate,
// show folded, display name and username the team's name.
func (d Definition) WithDefaults() Definition {
	if d.Mode == "" {
		d.Mode = ModeCoordinate
	}
	if d.Show == "" {
		d.Show = ShowFolded
	}
	if d.DisplayName == "" {
		d.DisplayName = string(d.Name)
	}
	if d.Username == "" {
		d.Username = string(d.Name)
	}
	return d
}

// LeaderName is who the leader is in hooks, usage and the store: the
// leading member, or the team itself when the team's own model leads.
func (d Definition) LeaderName() hooks.AgentName {
	if d.Leader != "" {
		return d.Leader
	}
	return d.Name
}

// Teams are the teams of a configuration by name, as config.yaml's teams:
// map decodes.
type Teams map[hooks.AgentName]Definition

// List returns the teams sorted by name, each with its Name set from its
// key.
func (ts Teams) List() []Definition {
	out := make([]Definition, 0, len(ts))
	for name, d := range ts {
		d.Name = name
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Definition) int { return strings.Compare(string(a.Name), string(b.Name)) })
	return out
}

// FieldError is one problem of a team or delegation definition. Path is
// the key path in config.yaml ("teams.research.members[1]"), so that the
// configuration loader can add the file and line.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// nameRE is the grammar of agent names (config's).
var nameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

// Validate checks the teams against the configured agents (known) and
// reports every problem, as *FieldError values joined with errors.Join
// (nil when all is well): a bad or taken name, an empty team, unknown or
// repeated members, a team as a member (teams do not nest), a leader who
// is not a member, a bad mode or show, a negative max_depth.
func Validate(defs []Definition, known []hooks.AgentName) error {
	agents := make(map[hooks.AgentName]bool, len(known))
	for _, a := range known {
		agents[a] = true
	}
	teams := make(map[hooks.AgentName]bool, len(defs))
	for _, d := range defs {
		teams[d.Name] = true
	}
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	seen := make(map[hooks.AgentName]bool, len(defs))
	for _, d := range defs {
		p := "teams." + string(d.Name)
		switch {
		case !nameRE.MatchString(string(d.Name)):
			add(p, "team name %q must match %s", d.Name, nameRE)
		case d.Name == hooks.RouterName:
			add(p, "team name %q is reserved for the router", d.Name)
		case agents[d.Name]:
			add(p, "team %q has the name of an agent; teams and agents share one namespace", d.Name)
		case seen[d.Name]:
			add(p, "team %q is defined twice", d.Name)
		}
		seen[d.Name] = true
		if len(d.Members) == 0 {
			add(p+".members", "team %q has no members", d.Name)
		}
		members := make(map[hooks.AgentName]bool, len(d.Members))
		for i, m := range d.Members {
			mp := fmt.Sprintf("%s.members[%d]", p, i)
			switch {
			case m == d.Name:
				add(mp, "team %q cannot be a member of itself", d.Name)
			case teams[m]:
				add(mp, "%q is a team; teams cannot be members of teams (list its agents instead)", m)
			case !agents[m]:
				add(mp, "%q is not a configured agent (known: %s)", m, joinNames(known))
			case members[m]:
				add(mp, "%q is listed twice", m)
			}
			members[m] = true
		}
		if d.Leader != "" && !members[d.Leader] {
			add(p+".leader", "leader %q is not a member of team %q (members: %s); leave it empty for the team's own model", d.Leader, d.Name, joinNames(d.Members))
		}
		switch d.Mode {
		case "", ModeCoordinate, ModeCollaborate:
		default:
			add(p+".mode", "unknown mode %q: want %q or %q", d.Mode, ModeCoordinate, ModeCollaborate)
		}
		switch d.Show {
		case "", ShowFolded, ShowSeparate:
		default:
			add(p+".show", "unknown show %q: want %q or %q", d.Show, ShowFolded, ShowSeparate)
		}
		if d.MaxDepth < 0 {
			add(p+".max_depth", "max_depth %d must not be negative", d.MaxDepth)
		}
	}
	return errors.Join(errs...)
}

// AdHocName is the name of the ad-hoc team that answers a message
// mentioning several agents: "adhoc:" and their names joined by "+", in the
// order mentioned ("adhoc:searcher+analyst"). It keys the team's member
// runs in the Store.
func AdHocName(members []hooks.AgentName) hooks.AgentName {
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = string(m)
	}
	return hooks.AgentName("adhoc:" + strings.Join(names, "+"))
}

// AdHoc returns the team that answers a message mentioning several agents
// together: the mentioned agents (first mention first, repeats and teams
// dropped by the caller) in mode (collaborate when empty), led by the first
// mentioned, shown folded. The reply comes from the leader's account. It
// returns false when fewer than two agents are mentioned: one agent
// answers alone.
func AdHoc(mentioned []hooks.AgentName, mode Mode) (Definition, bool) {
	var members []hooks.AgentName
	for _, m := range mentioned {
		if m != "" && !slices.Contains(members, m) {
			members = append(members, m)
		}
	}
	if len(members) < 2 {
		return Definition{}, false
	}
	if mode == "" {
		mode = ModeCollaborate
	}
	return Definition{
		Name: AdHocName(members), DisplayName: string(members[0]), Members: members,
		Mode: mode, Leader: members[0], Show: ShowFolded,
	}, true
}

func joinNames(names []hooks.AgentName) string {
	if len(names) == 0 {
		return "none"
	}
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	slices.Sort(s)
	return strings.Join(s, ", ")
}

// isAdHoc reports whether name is an ad-hoc team's (AdHocName).
func isAdHoc(name hooks.AgentName) bool { return strings.HasPrefix(string(name), "adhoc:") }
