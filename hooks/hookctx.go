package hooks

import (
	"context"
	"sync/atomic"
	"time"
)

// hookCtx is the context.Context a hook receives. It carries the hook's
// deadline and the causal-chain depth without allocating a timer up front:
// the timer behind Done is created only when a hook asks for it, so a hook
// that never waits on its context costs no timer at all.
type hookCtx struct {
	parent   context.Context
	deadline time.Time
	depth    int
	// inner is nil until Done or Err is first called, then the live
	// context; released once the hook returned or was abandoned.
	inner atomic.Pointer[innerCtx]
}

type innerCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// released marks a hookCtx whose hook is over.
var released = &innerCtx{ctx: func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()}

var _ context.Context = (*hookCtx)(nil)

func (c *hookCtx) Deadline() (time.Time, bool) {
	if pd, ok := c.parent.Deadline(); ok && pd.Before(c.deadline) {
		return pd, true
	}
	return c.deadline, true
}

func (c *hookCtx) live() *innerCtx {
	if p := c.inner.Load(); p != nil {
		return p
	}
	ctx, cancel := context.WithDeadline(c.parent, c.deadline)
	p := &innerCtx{ctx: ctx, cancel: cancel}
	if !c.inner.CompareAndSwap(nil, p) {
		cancel() // someone else created it first, or the hook is over
		return c.inner.Load()
	}
	return p
}

func (c *hookCtx) Done() <-chan struct{} { return c.live().ctx.Done() }

func (c *hookCtx) Err() error { return c.live().ctx.Err() }

func (c *hookCtx) Value(key any) any {
	if _, ok := key.(depthKey); ok {
		return c.depth
	}
	return c.parent.Value(key)
}

// release ends the context once the hook returned or was abandoned, so
// goroutines the hook left behind see it end.
func (c *hookCtx) release() {
	if p := c.inner.Swap(released); p != nil && p != released {
		p.cancel()
	}
}
