package approval

import (
	"path"
	"slices"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// Rule is one tool_approval rule with its room references resolved. Empty
// filters match everything.
type Rule struct {
	// Tools are globs over the tool's name or, when they hold a "/", its
	// qualified name SOURCE/NAME.
	Tools  []string
	Agents []hooks.AgentName
	Rooms  []id.RoomID
	// Require is the rule's action: true for require_approval, false for
	// auto.
	Require bool
}

// Tool names a tool for matching: its name as the model sees it and its
// source ("builtin", a plugin's name, "mcp:SERVER").
type Tool struct {
	Name   string
	Source string
}

// Qualified returns SOURCE/NAME (NAME when the source is unknown).
func (t Tool) Qualified() string {
	if t.Source == "" {
		return t.Name
	}
	return t.Source + "/" + t.Name
}

// Match reports whether a call of tool by agent in room needs approval: the
// action of the first rule whose filters all match, or false (auto) when
// none does.
func Match(rules []Rule, tool Tool, agent hooks.AgentName, room id.RoomID) bool {
	for _, r := range rules {
		if len(r.Agents) > 0 && !slices.Contains(r.Agents, agent) {
			continue
		}
		if len(r.Rooms) > 0 && !slices.Contains(r.Rooms, room) {
			continue
		}
		if len(r.Tools) > 0 && !slices.ContainsFunc(r.Tools, func(p string) bool { return toolMatches(p, tool) }) {
			continue
		}
		return r.Require
	}
	return false
}

func toolMatches(pattern string, t Tool) bool {
	name := t.Name
	if strings.Contains(pattern, "/") {
		name = t.Qualified()
	}
	ok, _ := path.Match(pattern, name)
	return ok
}
