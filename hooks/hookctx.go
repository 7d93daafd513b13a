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
	deadline instant
	depth    int
	// inner is nil until Done or Err is first called, then the live
	// context.
	inner atomic.Pointer[innerCtx]
	// over reports whether the hook's run is over (returned or abandoned);
	// after that, a context created late is born cancelled.
	over overFlag
}

// overFlag finds out whether a hook run is over from the state the engine
// keeps anyway, so that ending a hook's context costs no extra work.
type overFlag struct {
	state *atomic.Int32 // a collector slot: over when it left running
	done  *atomic.Bool  // a context of its own (ownCtx): over once set
}

func (o *overFlag) isOver() bool {
	if o.done != nil {
		return o.done.Load()
	}
	if o.state != nil {
		return o.state.Load() != slotRunning
	}
	return false
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
	d := c.deadline.time()
	if pd, ok := c.parent.Deadline(); ok && pd.Before(d) {
		return pd, true
	}
	return d, true
}

func (c *hookCtx) live() *innerCtx {
	if p := c.inner.Load(); p != nil {
		return p
	}
	if c.over.isOver() {
		return released
	}
	ctx, cancel := context.WithDeadline(c.parent, c.deadline.time())
	p := &innerCtx{ctx: ctx, cancel: cancel}
	if !c.inner.CompareAndSwap(nil, p) {
		cancel() // someone else created it first
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

// release ends the context once the hook's run is over (the engine has
// already marked it over), so goroutines the hook left behind see it end.
// A context they create concurrently with release ends at its deadline.
func (c *hookCtx) release() {
	if p := c.inner.Load(); p != nil {
		p.cancel()
	}
}
