package hooks

import "context"

// DefaultMaxDepth is how deep one causal chain of emissions may nest:
// emissions at depths 0, 1 and 2 run; a nested emission at depth 3 is
// dropped with ErrRecursionLimit.
const DefaultMaxDepth = 3

type depthKey struct{}

// Depth returns the causal-chain depth carried by ctx: 0 for work caused
// directly by a person, n inside the hooks of an emission at depth n-1.
func Depth(ctx context.Context) int {
	if hc, ok := ctx.(*hookCtx); ok {
		return hc.depth
	}
	d, _ := ctx.Value(depthKey{}).(int)
	return d
}

// WithDepth returns ctx carrying causal-chain depth d. The bot uses it when a
// message sent by a hook comes back in, so the chain continues across
// Matrix round trips.
func WithDepth(ctx context.Context, d int) context.Context {
	return context.WithValue(ctx, depthKey{}, d)
}
