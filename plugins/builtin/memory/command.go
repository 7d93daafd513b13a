package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookroom/hookroom/hooks"
	mem "github.com/hookroom/hookroom/memory"
	"github.com/hookroom/hookroom/plugins"
)

// Tools returns remember, recall and forget, for the agents whose tools are
// on (none: no tools). A call acts for the call's agent, requester and room.
func (p *Plugin) Tools() []plugins.Tool {
	if len(p.tools) == 0 {
		return nil
	}
	var out []plugins.Tool
	for _, spec := range mem.ToolSpecs() {
		out = append(out, plugins.Tool{
			Name: spec.Name, Description: spec.Description, Parameters: spec.Parameters,
			Agents: slices.Clone(p.tools),
			Func: func(ctx context.Context, call plugins.ToolCall) (string, error) {
				if !slices.Contains(p.tools, call.Agent) {
					return "", fmt.Errorf("memory tools are not enabled for agent %q", call.Agent)
				}
				if call.RequesterID == "" {
					return "", errors.New("memory tools only run for a person's message")
				}
				who := mem.Who{Agent: call.Agent, Person: call.RequesterID, Room: call.RoomID, Encrypted: p.env.Encrypted(ctx, call.RoomID)}
				return p.store.CallTool(ctx, who, spec.Name, call.Arguments)
			},
		})
	}
	return out
}

// CommandName is the chat command the plugin answers.
const CommandName = "memory"

// Commands returns !memory.
func (p *Plugin) Commands() []plugins.Command {
	return []plugins.Command{{
		Name: CommandName,
		Help: "[agent] — what the agents here remember about you; `!memory forget <id|all> [agent]` deletes it for good",
		Run:  p.command,
	}}
}

// command answers !memory [agent], !memory forget <id> [agent] and
// !memory forget all [agent] for the sender, with the agents that answer in
// the room (all of the plugin's agents when the host does not say).
func (p *Plugin) command(ctx context.Context, req plugins.CommandRequest) (string, error) {
	args := req.Args
	forget := len(args) > 0 && strings.EqualFold(args[0], "forget")
	var target string
	if forget {
		if len(args) < 2 {
			return "Usage: `!memory forget <id>` or `!memory forget all`, optionally followed by an agent's name.", nil
		}
		target, args = args[1], args[2:]
	}
	if len(args) > 1 {
		return "Usage: `!memory [agent]`, `!memory forget <id> [agent]` or `!memory forget all [agent]`.", nil
	}
	names, problem := p.commandAgents(req, args)
	if problem != "" {
		return problem, nil
	}
	who := func(a hooks.AgentName) mem.Who {
		return mem.Who{Agent: a, Person: req.Sender, Room: req.Room, Encrypted: req.Encrypted}
	}
	switch {
	case !forget:
		return p.list(ctx, names, who)
	case strings.EqualFold(target, "all"):
		var parts []string
		total := 0
		for _, a := range names {
			n, err := p.store.ForgetAll(ctx, who(a))
			if err != nil {
				return "", err
			}
			total += n
			if len(names) > 1 {
				parts = append(parts, fmt.Sprintf("%s: %d", a, n))
			}
		}
		text := fmt.Sprintf("Forgot %d %s for good.", total, plural(total, "memory", "memories"))
		if len(parts) > 0 {
			text += " (" + strings.Join(parts, ", ") + ")"
		}
		return text, nil
	default:
		for _, a := range names {
			err := p.store.Forget(ctx, who(a), target)
			if errors.Is(err, mem.ErrNotFound) {
				continue
			}
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("Forgot `%s` (%s) for good.", target, a), nil
		}
		return fmt.Sprintf("No memory `%s` that you may forget here. `!memory` lists yours; a room's memory can only be forgotten in its room, by whoever told it.", strings.ReplaceAll(target, "`", "")), nil
	}
}

// commandAgents picks the agents a command is about: the one named in args
// (which must have memory and answer here), else those that answer here and
// have memory.
func (p *Plugin) commandAgents(req plugins.CommandRequest, args []string) ([]hooks.AgentName, string) {
	here := p.agents
	if len(req.Agents) > 0 {
		here = nil
		for _, a := range req.Agents {
			if slices.Contains(p.agents, a) {
				here = append(here, a)
			}
		}
	}
	if len(args) == 1 {
		a := hooks.AgentName(args[0])
		if !slices.Contains(here, a) {
			return nil, fmt.Sprintf("%s has no memory here. Agents with memory here: %s.", args[0], agentList(here))
		}
		return []hooks.AgentName{a}, ""
	}
	if len(here) == 0 {
		return nil, "No agent in this room has memory."
	}
	return here, ""
}

// list renders what each agent remembers that the sender can see.
func (p *Plugin) list(ctx context.Context, names []hooks.AgentName, who func(hooks.AgentName) mem.Who) (string, error) {
	var b strings.Builder
	total := 0
	for _, a := range names {
		mems, err := p.store.List(ctx, who(a))
		if err != nil {
			return "", err
		}
		if len(mems) == 0 {
			continue
		}
		total += len(mems)
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "**%s** remembers (%d):\n%s", a, len(mems), mem.Listing(mems))
	}
	if total == 0 {
		if len(names) == 1 {
			return fmt.Sprintf("%s remembers nothing about you or this room.", names[0]), nil
		}
		return "The agents here remember nothing about you or this room.", nil
	}
	b.WriteString("\n\n`!memory forget <id>` forgets one for good, `!memory forget all` everything you told.")
	return b.String(), nil
}

func agentList(names []hooks.AgentName) string {
	if len(names) == 0 {
		return "none"
	}
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
