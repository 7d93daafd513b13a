package config

import (
	"path"
	"strings"
	"time"
)

// DefaultApprovalTimeout is how long a tool call waits for a person's
// approval when tool_approval.timeout is not set.
const DefaultApprovalTimeout = 5 * time.Minute

// Approval actions of tool_approval rules.
const (
	ApprovalAuto     = "auto"
	ApprovalRequired = "require_approval"
)

// ToolApproval decides which tool calls wait for a person's approval. The
// zero value asks for none: every call runs (after the tool:before_call
// gates).
type ToolApproval struct {
	// Timeout is how long a call waits for an answer; at the deadline it is
	// denied (fail-closed). Default 5m.
	Timeout Duration `yaml:"timeout"`
	// Rules are tried in order; the first whose filters all match a call
	// decides. A call no rule matches runs without approval.
	Rules []ApprovalRule `yaml:"rules"`
}

// ApprovalRule is one tool_approval rule. Empty filters match everything.
type ApprovalRule struct {
	// Tools are globs (path.Match) over the tool's name ("shell_*") or,
	// when they hold a "/", its qualified name SOURCE/NAME ("builtin/*",
	// "my_plugin/delete_*").
	Tools []string `yaml:"tools"`
	// Agents are agent names.
	Agents []string `yaml:"agents"`
	// Rooms are room references: room keys, room ids or full aliases.
	Rooms []string `yaml:"rooms"`
	// Action is "auto" (run) or "require_approval".
	Action string `yaml:"action"`
}

// ApprovalTimeout returns tool_approval.timeout, or its default.
func (a ToolApproval) ApprovalTimeout() time.Duration {
	if a.Timeout <= 0 {
		return DefaultApprovalTimeout
	}
	return time.Duration(a.Timeout)
}

// ApprovalRulePath is the key path of rule i of tool_approval.rules.
func ApprovalRulePath(i int) string { return JoinIndex("tool_approval.rules", i) }

func (v *validator) toolApproval() {
	a := v.c.ToolApproval
	if a.Timeout < 0 {
		v.errorf("tool_approval.timeout", "must be positive, not %s", time.Duration(a.Timeout))
	} else if a.Timeout > 0 && time.Duration(a.Timeout) < time.Second {
		v.errorf("tool_approval.timeout", "must be at least 1s (people need time to answer), not %s", time.Duration(a.Timeout))
	}
	for i, r := range a.Rules {
		p := ApprovalRulePath(i)
		switch r.Action {
		case ApprovalAuto, ApprovalRequired:
		case "":
			v.errorf(JoinKey(p, "action"), "is required: %q or %q", ApprovalAuto, ApprovalRequired)
		default:
			v.errorf(JoinKey(p, "action"), "must be %q or %q, not %q", ApprovalAuto, ApprovalRequired, r.Action)
		}
		for j, t := range r.Tools {
			tp := JoinIndex(JoinKey(p, "tools"), j)
			if strings.TrimSpace(t) == "" {
				v.errorf(tp, "must not be empty")
				continue
			}
			if _, err := path.Match(t, ""); err != nil {
				v.errorf(tp, "%q is not a valid glob: %v", t, err)
			}
		}
		for j, ag := range r.Agents {
			if _, ok := v.c.Agents[ag]; !ok {
				v.errorf(JoinIndex(JoinKey(p, "agents"), j), "unknown agent %q (agents: %s)", ag, strings.Join(v.c.AgentNames(), ", "))
			}
		}
		for j, room := range r.Rooms {
			if !v.roomRef(room) {
				v.errorf(JoinIndex(JoinKey(p, "rooms"), j), "%q is not a room key, room id or full alias", room)
			}
		}
	}
}
