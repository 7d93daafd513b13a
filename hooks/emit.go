package hooks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// ErrRecursionLimit is returned by Emit when the causal chain carried by the
// context is already at the registry's maximum depth; no hook runs.
var ErrRecursionLimit = errors.New("hook recursion limit reached")

// ErrHookTimeout is the error a hook's failure is logged with when it passed
// its deadline.
var ErrHookTimeout = errors.New("hook passed its deadline")

// PanicError is the error a hook's failure is logged with when it panicked.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("hook panicked: %v", e.Value) }

// emission is what all hook runs of one Emit call share (read-only).
type emission struct {
	reg           *Registry
	info          *eventInfo
	route         route
	correlationID string
	log           *zerolog.Logger
	depth         int // the emission's depth; its hooks run at depth+1
}

// Emit runs the hooks of ev that apply to c, in the event's mode, on the
// registry snapshot reg, and writes what they decided back into c:
//
//   - observer: the designated mutable fields (Suppress, MessageText);
//   - collector: c's Items gain every item of the hooks that succeeded, in
//     hook order;
//   - transformer: c.Draft is the draft of the last hook that succeeded;
//   - gate: Declined and DeclineReason;
//   - claim: Claimed.
//
// Every hook works on its own copy of c and only a hook that returns nil
// before its deadline counts. Hooks that return an error, panic or pass
// their deadline are logged and counted in the registry's statistics; a
// hook that ignores its deadline is abandoned, never waited for.
//
// Cancelling ctx (or its deadline passing) stops the emission: no further
// hook is started (in a collector, hooks still waiting for a slot are
// skipped), the hooks in progress are abandoned, c is left unchanged and
// Emit returns ctx's error. Otherwise Emit returns nil, or
// ErrRecursionLimit when the causal chain is already too deep. A nil
// registry runs nothing.
func Emit[T any, P ContextOf[T]](ctx context.Context, reg *Registry, ev Event[T], c P) error {
	if reg == nil || ev.info == nil {
		return nil
	}
	eh := reg.lookup(ev.info)
	if eh == nil || len(eh.hooks) == 0 {
		return nil
	}
	depth := Depth(ctx)
	if depth >= reg.maxDepth {
		zerolog.Ctx(ctx).Warn().Str("event", ev.info.name).Int("depth", depth).
			Msg("dropping nested hook emission: recursion limit reached")
		return fmt.Errorf("failed to emit %s at depth %d: %w", ev.info.name, depth, ErrRecursionLimit)
	}
	rt := c.route()
	hooks := reg.eligible(eh, rt)
	if len(hooks) == 0 {
		return nil
	}
	base := c.hookBase()
	if base.CorrelationID == "" {
		base.CorrelationID = ev.info.name + ":" + strconv.FormatUint(rand.Uint64(), 36)
	}
	em := &emission{reg: reg, info: ev.info, route: rt, correlationID: base.CorrelationID, log: zerolog.Ctx(ctx), depth: depth}
	if ev.info.mode == Collector {
		return collect[T, P](ctx, em, hooks, c, depth)
	}
	return serial[T, P](ctx, em, hooks, c, depth)
}

// spillAfter is how long a collector emission runs on its first few
// workers before every waiting hook gets a worker of its own.
const spillAfter = 50 * time.Microsecond

// abandonGrace is how long past its deadline a hook may take to return
// before the emitter abandons it. A hook that honours its context returns
// within it (its effects are dropped all the same); only a hook that
// ignores its context is left behind.
const abandonGrace = 5 * time.Millisecond

// Slot states of one hook run.
const (
	slotPending int32 = iota
	slotRunning
	slotFinished
	slotAbandoned
)

// slot is everything one hook run of an emission needs, allocated for all
// hooks of the emission at once: the hook's own copy of the context, its
// context.Context and its bookkeeping.
type slot[T any] struct {
	copy     T
	hc       hookCtx
	start    time.Time
	state    atomic.Int32 // collector only
	deadline atomic.Int64 // collector only: unix nanoseconds, set before state becomes running
	ok       bool         // collector only: the hook succeeded in time
}

// cursor packs a serial run's position: the index of the hook in progress
// and its state. The runner and the emitter race on it with compare-and-swap
// to decide whether a hook finished or was abandoned.
func cursor(j int, state int32) int64 { return int64(j)<<2 | int64(state) }

func uncursor(v int64) (int, int32) { return int(v >> 2), int32(v & 3) }

// invoke calls the hook's handler on its copy, turning a panic into a
// *PanicError.
func invoke[T any, P ContextOf[T]](ctx context.Context, h *registered, c P) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	switch fn := h.fn.(type) {
	case func(context.Context, *T) error:
		return fn(ctx, (*T)(c))
	case AnyHandler:
		return fn(ctx, c)
	default:
		return fmt.Errorf("handler of type %T does not accept %T", h.fn, c)
	}
}

// prepare turns slot j's copy into the hook's own context: a copy of src
// with private reference fields, bound to the hook.
func prepare[T any, P ContextOf[T]](em *emission, h *registered, cp *T, src *T) {
	*cp = *src
	P(cp).isolate()
	b := P(cp).hookBase()
	b.hook = h
	b.em = em
}

// result classifies a finished hook run. A run that took longer than its
// deadline timed out, whether it returned an error (typically the
// context's) or not.
func result(err error, elapsed, timeout time.Duration) Outcome {
	if err != nil {
		if _, ok := err.(*PanicError); ok {
			return OutcomePanic
		}
	}
	switch {
	case elapsed >= timeout:
		return OutcomeTimeout
	case err != nil:
		return OutcomeError
	}
	return OutcomeOK
}

// finished records a hook run: statistics, the failure log, the observer.
func (em *emission) finished(ctx context.Context, h *registered, elapsed time.Duration, o Outcome, err error) {
	h.stats.record(elapsed, o)
	if o == OutcomeOK {
		if em.reg.observer != nil {
			em.reg.observer.HookRan(ctx, HookRun{Event: em.info.name, Plugin: h.plugin.name, Hook: h.name,
				CorrelationID: em.correlationID, Duration: elapsed, Outcome: o})
		}
		return
	}
	if o == OutcomeTimeout && err == nil {
		err = ErrHookTimeout
	}
	logFailure(em, h, o, err, elapsed)
	if em.reg.observer != nil {
		em.reg.observer.HookRan(ctx, HookRun{Event: em.info.name, Plugin: h.plugin.name, Hook: h.name,
			CorrelationID: em.correlationID, Duration: elapsed, Outcome: o, Err: err})
	}
}

func logFailure(em *emission, h *registered, o Outcome, err error, elapsed time.Duration) {
	var ev *zerolog.Event
	switch o {
	case OutcomePanic:
		ev = em.log.Error()
		var pe *PanicError
		if errors.As(err, &pe) {
			ev = ev.Bytes("stack", pe.Stack)
		}
	case OutcomeTimeout:
		ev = em.log.Warn()
		if err == nil {
			err = ErrHookTimeout
		}
	default:
		ev = em.log.Warn()
	}
	if ev == nil {
		return
	}
	ev.Err(err).Str("plugin", h.plugin.name).Str("hook", h.name).Str("event", em.info.name).
		Str("correlation_id", em.correlationID).Dur("duration", elapsed).Dur("timeout", h.timeout).
		Msg("hook failed; its effects are dropped")
}

// serialRun is one emission of a serial mode (observer, transformer, gate,
// claim). One runner goroutine runs the hooks in order while the emitting
// goroutine watches the deadline of the hook in progress; if a hook passes
// it, the emitter abandons that runner and starts a new one at the next
// hook. The runner owns current until it finishes or is abandoned.
type serialRun[T any, P ContextOf[T]] struct {
	em      *emission
	hooks   []*registered
	parent  context.Context
	depth   int
	slots   []slot[T]
	cur     atomic.Int64 // cursor(j, state)
	current T
	// stop is parent.Done(), read once: the runner checks it before each
	// hook and at the end of the chain.
	stop <-chan struct{}
	// interrupted is set by the runner before it signals done when it
	// stopped because parent ended.
	interrupted bool
}

func serial[T any, P ContextOf[T]](ctx context.Context, em *emission, hooks []*registered, c P, depth int) error {
	n := len(hooks)
	s := &serialRun[T, P]{
		em: em, hooks: hooks, parent: ctx, depth: depth + 1,
		slots: make([]slot[T], n), stop: ctx.Done(),
	}
	s.current = *(*T)(c)
	// wake[j] bounds how soon any hook from j on can pass its deadline:
	// the emitter never sleeps past the earliest deadline still possible.
	wake := make([]time.Duration, n+1)
	wake[n] = time.Hour
	for j := n - 1; j >= 0; j-- {
		wake[j] = min(wake[j+1], hooks[j].timeout+abandonGrace)
	}
	done := make(chan struct{}, 1)
	go s.run(0, done)

	timer := time.NewTimer(wake[0])
	defer timer.Stop()
	for {
		select {
		case <-done:
			if s.interrupted {
				return fmt.Errorf("failed to finish %s hooks: %w", em.info.name, ctx.Err())
			}
			c.merge(&s.current)
			return nil
		case <-ctx.Done():
			// Whatever the runner is doing, it stops at its next step.
			for {
				v := s.cur.Load()
				j, _ := uncursor(v)
				if s.cur.CompareAndSwap(v, cursor(j, slotAbandoned)) {
					break
				}
			}
			return fmt.Errorf("failed to finish %s hooks: %w", em.info.name, ctx.Err())
		case now := <-timer.C:
			v := s.cur.Load()
			j, state := uncursor(v)
			if state != slotRunning {
				// Between two hooks: j is the next one.
				timer.Reset(wake[min(j, n)])
				continue
			}
			sl := &s.slots[j]
			dl := sl.start.Add(hooks[j].timeout + abandonGrace)
			if now.Before(dl) {
				timer.Reset(min(dl.Sub(now), wake[j+1]))
				continue
			}
			if !s.cur.CompareAndSwap(v, cursor(j, slotAbandoned)) {
				timer.Reset(0)
				continue
			}
			h := hooks[j]
			elapsed := time.Since(sl.start)
			h.stats.abandoned.Add(1)
			em.finished(ctx, h, elapsed, OutcomeTimeout, nil)
			sl.hc.release()
			if ended(s.stop) {
				return fmt.Errorf("failed to finish %s hooks: %w", em.info.name, ctx.Err())
			}
			if h.policy == FailClosed && s.failClosed(h, "timed out") {
				c.merge(&s.current)
				return nil
			}
			if j+1 >= n {
				c.merge(&s.current)
				return nil
			}
			s.cur.Store(cursor(j+1, slotPending))
			done = make(chan struct{}, 1)
			go s.run(j+1, done)
			timer.Reset(wake[j+1])
		}
	}
}

// failClosed declines on behalf of a failed gate hook with a closed
// failure policy; it reports whether the chain stops.
func (s *serialRun[T, P]) failClosed(h *registered, why string) bool {
	fc, ok := any(P(&s.current)).(failCloser)
	if !ok {
		return false
	}
	fc.declineUnavailable(fmt.Sprintf("gate %s/%s was unavailable (%s), so the call was %s", h.plugin.name, h.name, why, failClosedWord(s.em.info.name)))
	return true
}

// failClosedWord is what a closed gate's failure does to the call.
func failClosedWord(event string) string {
	if event == ToolApprovalRequested.Name() {
		return "denied"
	}
	return "declined"
}

func (s *serialRun[T, P]) run(from int, done chan<- struct{}) {
	st, stops := any(P(&s.current)).(stopper)
	// One clock reading per hook: the end of one hook is the start of the
	// next (what runs in between is counted with the next hook).
	now := time.Now()
	for j := from; j < len(s.hooks); j++ {
		if ended(s.stop) {
			s.interrupted = true
			break
		}
		h := s.hooks[j]
		sl := &s.slots[j]
		cp := &sl.copy
		prepare[T, P](s.em, h, cp, &s.current)
		hc := &sl.hc
		hc.parent = s.parent
		hc.depth = s.depth
		hc.deadline = now.Add(h.timeout)
		hc.over = overFlag{cur: &s.cur, j: j}
		sl.start = now
		// Publish the hook as running, unless the emitter gave up on the
		// whole emission meanwhile.
		if !s.cur.CompareAndSwap(cursor(j, slotPending), cursor(j, slotRunning)) {
			return
		}
		err := invoke[T, P](hc, h, P(cp))
		end := time.Now()
		elapsed := end.Sub(now)
		now = end
		if !s.cur.CompareAndSwap(cursor(j, slotRunning), cursor(j+1, slotPending)) {
			return // abandoned: the emitter took over
		}
		hc.release()
		o := result(err, elapsed, h.timeout)
		s.em.finished(s.parent, h, elapsed, o, err)
		if o != OutcomeOK {
			if h.policy == FailClosed && s.failClosed(h, failureWord(o)) {
				break
			}
			continue
		}
		P(&s.current).merge(cp)
		if stops && st.stopped() {
			break
		}
	}
	// A chain that ran to its end still reports a cancellation that came
	// during its last hook, as every other point of the chain would.
	if ended(s.stop) {
		s.interrupted = true
	}
	done <- struct{}{}
}

// ended reports whether done (a context's Done channel, nil for a context
// that never ends) is closed, without blocking.
func ended(done <-chan struct{}) bool {
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func failureWord(o Outcome) string {
	switch o {
	case OutcomePanic:
		return "panicked"
	case OutcomeTimeout:
		return "timed out"
	}
	return "failed"
}

// collectRun is one collector emission: up to conc workers pull hooks in
// order and run them concurrently, each on its own copy; the emitter
// abandons hooks that pass their deadline (starting a replacement worker)
// and merges the items of the hooks that succeeded, in hook order.
type collectRun[T any, P ContextOf[T]] struct {
	em        *emission
	hooks     []*registered
	parent    context.Context
	depth     int
	src       T
	slots     []slot[T]
	next      atomic.Int32
	remaining atomic.Int32
	// stop is parent.Done(), read once: no worker starts a hook after it
	// closed.
	stop <-chan struct{}
	done chan struct{}
}

func collect[T any, P ContextOf[T]](ctx context.Context, em *emission, hooks []*registered, c P, depth int) error {
	n := len(hooks)
	s := &collectRun[T, P]{
		em: em, hooks: hooks, parent: ctx, depth: depth + 1,
		slots: make([]slot[T], n), done: make(chan struct{}), stop: ctx.Done(),
	}
	s.src = *(*T)(c)
	s.remaining.Store(int32(n))
	// Start with a few workers: hooks that return at once are done by
	// them without a goroutine each. If hooks are still waiting after
	// spillAfter, the rest get their own workers, up to the bound, so slow
	// hooks still run side by side.
	limit := min(n, em.reg.conc)
	workers := min(limit, max(2, runtime.GOMAXPROCS(0)))
	minTimeout := hooks[0].timeout
	for _, h := range hooks {
		minTimeout = min(minTimeout, h.timeout)
	}
	for range workers {
		go s.work()
	}
	var spill <-chan time.Time
	if workers < limit {
		t := time.NewTimer(spillAfter)
		defer t.Stop()
		spill = t.C
	}
	timer := time.NewTimer(minTimeout + abandonGrace)
	defer timer.Stop()
	for {
		select {
		case <-spill:
			spill = nil
			for range min(limit-workers, n-int(s.next.Load())) {
				go s.work()
			}
		case <-s.done:
			if ended(s.stop) {
				return fmt.Errorf("failed to finish %s hooks: %w", em.info.name, ctx.Err())
			}
			for j := range s.slots {
				if s.slots[j].ok {
					c.merge(&s.slots[j].copy)
				}
			}
			return nil
		case <-ctx.Done():
			for j := range s.slots {
				s.slots[j].state.CompareAndSwap(slotRunning, slotAbandoned)
			}
			return fmt.Errorf("failed to finish %s hooks: %w", em.info.name, ctx.Err())
		case now := <-timer.C:
			wait := time.Duration(-1)
			started := min(int(s.next.Load()), n)
			for j := 0; j < started; j++ {
				sl := &s.slots[j]
				if sl.state.Load() != slotRunning {
					continue
				}
				dl := time.Unix(0, sl.deadline.Load()).Add(abandonGrace)
				if now.Before(dl) {
					if d := dl.Sub(now); wait < 0 || d < wait {
						wait = d
					}
					continue
				}
				if !sl.state.CompareAndSwap(slotRunning, slotAbandoned) {
					continue
				}
				h := hooks[j]
				elapsed := time.Since(sl.start)
				h.stats.abandoned.Add(1)
				em.finished(ctx, h, elapsed, OutcomeTimeout, nil)
				sl.hc.release()
				if int(s.next.Load()) < n {
					go s.work() // replace the worker stuck in the abandoned hook
				}
				s.finishOne()
			}
			if wait < 0 {
				wait = minTimeout + abandonGrace
			}
			timer.Reset(wait)
		}
	}
}

func (s *collectRun[T, P]) finishOne() {
	if s.remaining.Add(-1) == 0 {
		close(s.done)
	}
}

func (s *collectRun[T, P]) work() {
	for !ended(s.stop) {
		j := int(s.next.Add(1)) - 1
		if j >= len(s.hooks) {
			return
		}
		h := s.hooks[j]
		sl := &s.slots[j]
		cp := &sl.copy
		prepare[T, P](s.em, h, cp, &s.src)
		hc := &sl.hc
		hc.parent = s.parent
		hc.depth = s.depth
		hc.over = overFlag{state: &sl.state}
		sl.start = time.Now()
		hc.deadline = sl.start.Add(h.timeout)
		sl.deadline.Store(hc.deadline.UnixNano())
		sl.state.Store(slotRunning)
		err := invoke[T, P](hc, h, P(cp))
		elapsed := time.Since(sl.start)
		if !sl.state.CompareAndSwap(slotRunning, slotFinished) {
			return // abandoned; a replacement worker took over
		}
		hc.release()
		o := result(err, elapsed, h.timeout)
		s.em.finished(s.parent, h, elapsed, o, err)
		if o == OutcomeOK {
			sl.ok = true
		}
		s.finishOne()
	}
}
