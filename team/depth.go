package team

import (
	"context"
	"slices"

	"github.com/hookroom/hookroom/hooks"
)

// chain is where a run stands in a chain of delegation: how deep, the
// limit the team it runs under set (0: none), and the agents above it.
type chain struct {
	depth int
	limit int
	path  []hooks.AgentName
}

type chainKey struct{}

func chainFrom(ctx context.Context) chain {
	c, _ := ctx.Value(chainKey{}).(chain)
	return c
}

// WithDepth returns ctx carrying delegation depth d: 0 for a person's turn
// (the default), 1 for a team member's or a delegated run, and so on. Run
// and Delegate set it for the runs they start; the turn passes the context
// on to the tool loop, where delegate_to reads it.
func WithDepth(ctx context.Context, d int) context.Context {
	c := chainFrom(ctx)
	c.depth = d
	return context.WithValue(ctx, chainKey{}, c)
}

// DepthFrom returns the delegation depth ctx carries (0 for none).
func DepthFrom(ctx context.Context) int { return chainFrom(ctx).depth }

// descend returns ctx for a run of agent one level below the run of ctx,
// whose agent is parent; limit, when positive, becomes the chain's limit.
func descend(ctx context.Context, parent hooks.AgentName, limit int) context.Context {
	c := chainFrom(ctx)
	c.depth++
	if limit > 0 {
		c.limit = limit
	}
	if parent != "" && !slices.Contains(c.path, parent) {
		c.path = append(slices.Clip(c.path), parent)
	}
	return context.WithValue(ctx, chainKey{}, c)
}
