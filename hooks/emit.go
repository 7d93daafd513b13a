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
	// detail: the registry has an observer and ctx was marked with
	// WithRunDetail, so HookRun.Change is computed.
	detail bool
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
// A c whose CorrelationID is empty gets the one ctx carries
// (WithCorrelationID), or a new one.
//
// Every hook works on its own copy of c and only a hook that returns nil
// before its deadline counts. The copy is the hook's only while it runs:
// its memory is reused by later emissions, so a hook must not use it after
// it returned (its ctx stays ended and may be kept). Hooks that return an error, panic or pass
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
		base.CorrelationID = CorrelationID(ctx)
	}
	if base.CorrelationID == "" {
		base.CorrelationID = ev.info.name + ":" + strconv.FormatUint(rand.Uint64(), 36)
	}
	em := emission{reg: reg, info: ev.info, route: rt, correlationID: base.CorrelationID, log: zerolog.Ctx(ctx), depth: depth}
	if reg.observer != nil {
		em.detail = runDetail(ctx)
	}
	if ev.info.mode == Collector {
		return collect[T, P](ctx, em, hooks, c)
	}
	return serial[T, P](ctx, em, hooks, c)
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
	start    instant
	state    atomic.Int32 // collector only
	deadline atomic.Int64 // collector only: an instant, set before state becomes running
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

// runNote is what the observer learns of a hook run besides its outcome:
// for a successful run its effect (computed only when the registry has an
// observer; the change only for an emission with detail), for a timed-out
// one whether it was abandoned.
type runNote struct {
	effect    Effect
	change    string
	abandoned bool
}

// abandonedRun is the note of an abandoned run.
var abandonedRun = runNote{abandoned: true}

// note returns the runNote of hook copy cp's successful run, before being
// what it got its copy from. Only runs with an observer call it.
func note[T any, P ContextOf[T]](em *emission, cp P, before *T) runNote {
	eff, change := cp.describe(before, em.detail)
	return runNote{effect: eff, change: change}
}

// finished records a hook run: statistics, the failure log, the observer.
func (em *emission) finished(ctx context.Context, h *registered, elapsed time.Duration, o Outcome, err error, n runNote) {
	h.stats.record(elapsed, o)
	if o == OutcomeOK {
		if em.reg.observer != nil {
			em.reg.observer.HookRan(ctx, HookRun{Event: em.info.name, Plugin: h.plugin.name, Hook: h.name,
				CorrelationID: em.correlationID, Mode: em.info.mode, Duration: elapsed, Outcome: o,
				Effect: n.effect, Change: n.change})
		}
		return
	}
	if o == OutcomeTimeout && err == nil {
		err = ErrHookTimeout
	}
	logFailure(em, h, o, err, elapsed)
	if em.reg.observer != nil {
		em.reg.observer.HookRan(ctx, HookRun{Event: em.info.name, Plugin: h.plugin.name, Hook: h.name,
			CorrelationID: em.correlationID, Mode: em.info.mode, Duration: elapsed, Outcome: o,
			Abandoned: n.abandoned, Err: err})
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

// minWake is how soon, from now, any of hooks can pass its deadline plus
// the grace: the emitter never sleeps past it.
func minWake(hooks []*registered) time.Duration {
	if len(hooks) == 0 {
		return time.Hour
	}
	d := hooks[0].timeout
	for _, h := range hooks[1:] {
		d = min(d, h.timeout)
	}
	return d + abandonGrace
}

// serialRun is one emission of a serial mode (observer, transformer, gate,
// claim). The emitting goroutine runs the leading Inline hooks itself; a
// runner on a pooled worker runs the rest in order while the emitter
// sleeps until the runner finishes or the deadline scheduler wakes it. If
// the hook in progress passed its deadline, the emitter abandons that
// runner and dispatches a new one at the next hook. Whoever holds the
// cursor's position (emitter or runner) owns current.
//
// A run that ended normally goes back to its event's pool with its slots
// (the hooks' copies), so the next emission allocates only the hooks'
// contexts; a run with an abandoned hook, or cancelled, is left to the
// garbage collector, as its runner may still be using it.
type serialRun[T any, P ContextOf[T]] struct {
	em      emission
	hooks   []*registered
	parent  context.Context
	depth   int
	slab    []slot[T] // kept across emissions
	slots   []slot[T] // slab[:what this emission needs]
	cur     atomic.Int64
	current T
	// owns are the hooks' contexts, allocated for each emission: a hook
	// may keep its context.Context, which must stay ended after it
	// returned, so it must not live in memory the pool reuses.
	owns []ownCtx
	// stop is parent.Done(), read once: hooks are started only while it
	// is open.
	stop <-chan struct{}
	// off maps hooks to slots: hook j >= off uses slots[j-off]. The
	// leading Inline hooks run one after the other on the emitter and
	// share slots[0] (each still gets a fresh copy), so off is their
	// count less one.
	off int
	// interrupted is set by the runner before it publishes slotFinished
	// when it stopped because parent ended.
	interrupted bool
	// single: the chain is one ordinary hook. Its copy was made by the
	// emitter from the caller's context, and current holds only the
	// designated fields: one copy of the context less per emission.
	single bool
	// dispatched is when the emitter started the runner: the start of the
	// runner's first hook.
	dispatched instant
	// st is current as a stopper (gates, claims), found once per run;
	// checks says whether the context type is a checker.
	st     stopper
	stops  bool
	checks bool
	w      waiter
}

// newSerialRun takes a run from the event's pool (or makes one) and sets
// it up for hooks, leading Inline hooks sharing one slot.
func newSerialRun[T any, P ContextOf[T]](ctx context.Context, em emission, hooks []*registered, c P, inline int) *serialRun[T, P] {
	s, _ := em.info.runs.Get().(*serialRun[T, P])
	if s == nil {
		s = new(serialRun[T, P])
		s.st, s.stops = any(P(&s.current)).(stopper)
		_, s.checks = any(P(&s.current)).(checker[T])
	}
	s.em, s.hooks, s.parent, s.depth, s.stop = em, hooks, ctx, em.depth+1, ctx.Done()
	s.off = max(inline-1, 0)
	need := len(hooks) - s.off
	if cap(s.slab) < need {
		s.slab = make([]slot[T], need)
	}
	s.slots = s.slab[:need]
	s.owns = make([]ownCtx, len(hooks))
	s.cur.Store(0)
	s.interrupted = false
	s.single = len(hooks) == 1 && inline == 0
	if s.single {
		// No hook copies current, so it needs only the designated fields
		// (all the merges, stopped and failClosed touch); the hook's copy
		// is made from c right here.
		P(&s.current).merge((*T)(c))
		prepare[T, P](&s.em, hooks[0], &s.slots[0].copy, (*T)(c))
	} else {
		s.current = *(*T)(c)
	}
	return s
}

// recycle puts a run that ended normally back into its event's pool. Runs
// of a synctest bubble are not kept: their channel and timer belong to the
// bubble.
//
// The hooks' copies, current and s.em are not cleared: the next emission
// overwrites what it uses, and clearing them cost as much as a copy of the
// context per hook while the garbage collector marks. So a pooled run keeps
// the last emission's data reachable until it is reused or the pool drops
// it (sync.Pool drops what went unused for two garbage collections); it
// keeps no reference to the emission's context.Context or hook contexts.
// s.em must stay in any case: a hook that wrongly kept its copy (whose
// Base points at it) must not crash on a cleared emission.
func (s *serialRun[T, P]) recycle() {
	if s.w.bubble {
		return
	}
	s.w.drain()
	s.hooks, s.parent, s.stop, s.owns, s.slots = nil, nil, nil, nil, nil
	s.em.info.runs.Put(s)
}

func serial[T any, P ContextOf[T]](ctx context.Context, em emission, hooks []*registered, c P) error {
	n := len(hooks)
	k := 0
	for k < n && hooks[k].inline {
		k++
	}
	s := newSerialRun[T, P](ctx, em, hooks, c, k)
	fail := func() error { return fmt.Errorf("failed to finish %s hooks: %w", em.info.name, ctx.Err()) }

	// Inline hooks at the head of the chain run right here.
	t := clock()
	j := 0
	for ; j < k; j++ {
		if ended(s.stop) {
			s.recycle()
			return fail()
		}
		end, stop, _ := s.runHook(j, t, true)
		t = end
		if stop {
			j = n
			break
		}
	}
	if j >= n {
		err := error(nil)
		if ended(s.stop) {
			err = fail()
		} else {
			c.merge(&s.current)
		}
		s.recycle()
		return err
	}

	// The rest runs on a worker, from the cursor on.
	s.cur.Store(cursor(j, slotPending))
	s.w.init(t)
	s.w.wakeAt(t, minWake(hooks[j:]))
	s.dispatched = t
	s.w.start(s)
	abandoned := false
	for {
		if s.stop == nil {
			<-s.w.sig
		} else {
			select {
			case <-s.w.sig:
			case <-s.stop:
				// Whatever the runner is doing, it stops at its next step.
				for {
					v := s.cur.Load()
					j, _ := uncursor(v)
					if s.cur.CompareAndSwap(v, cursor(j, slotAbandoned)) {
						break
					}
				}
				s.w.cancel()
				return fail()
			}
		}
	check:
		v := s.cur.Load()
		j, state := uncursor(v)
		switch state {
		case slotFinished:
			s.w.cancel()
			err := error(nil)
			if s.interrupted {
				err = fail()
			} else {
				c.merge(&s.current)
			}
			if !abandoned {
				s.recycle()
			}
			return err
		case slotPending:
			// Between two hooks: j is the next one.
			s.w.wakeAt(clock(), minWake(hooks[j:]))
			continue
		}
		// slotRunning: has hook j passed its deadline and grace?
		sl := s.slot(j)
		h := hooks[j]
		now := clock()
		dl := sl.start.add(h.timeout + abandonGrace)
		if now < dl {
			s.w.wakeAt(now, min(dl.sub(now), minWake(hooks[j+1:])))
			continue
		}
		if !s.cur.CompareAndSwap(v, cursor(j, slotAbandoned)) {
			goto check // the runner moved on meanwhile
		}
		abandoned = true
		s.w.cancel()
		em := &s.em
		h.stats.abandoned.Add(1)
		em.finished(ctx, h, now.sub(sl.start), OutcomeTimeout, nil, abandonedRun)
		own := &s.owns[j]
		own.done.Store(true)
		own.hc.release()
		if ended(s.stop) {
			return fail()
		}
		if h.policy == FailClosed && s.failClosed(h, "timed out") {
			c.merge(&s.current)
			return nil
		}
		if j+1 >= n {
			c.merge(&s.current)
			return nil
		}
		// The next hook starts now, not when this one was given up: the
		// failure's log line and the observer took their time meanwhile.
		now = clock()
		s.cur.Store(cursor(j+1, slotPending))
		s.w.wakeAt(now, minWake(hooks[j+1:]))
		s.dispatched = now
		s.w.start(s)
	}
}

// failClosed declines on behalf of a failed gate hook with a closed
// failure policy; it reports whether the chain stops.
func (s *serialRun[T, P]) failClosed(h *registered, why string) bool {
	fc, ok := any(P(&s.current)).(failCloser)
	if !ok {
		return false
	}
	fc.declineUnavailable(fmt.Sprintf("gate %s/%s was unavailable (%s), so %s", h.plugin.name, h.name, why, failClosedOutcome(s.em.info.name)))
	return true
}

// failClosedOutcome is what a closed gate's failure does to what the gate
// guards.
func failClosedOutcome(event string) string {
	switch event {
	case ToolApprovalRequested.Name():
		return "the call was denied"
	case PluginBeforeInstall.Name():
		return "the install was declined"
	}
	return "the call was declined"
}

// slot returns hook j's slot.
func (s *serialRun[T, P]) slot(j int) *slot[T] { return &s.slots[max(j-s.off, 0)] }

// runHook runs hook j, which starts at now, on its own copy of current,
// and merges what it decided if it succeeded in time. It returns the time
// it ended (the next hook's start), whether the chain stops there, and
// whether the caller still holds the run: false when the emitter abandoned
// it meanwhile, after which the caller must not touch s again. The emitter
// runs Inline hooks before any runner exists (onEmitter) and skips the
// cursor.
func (s *serialRun[T, P]) runHook(j int, start instant, onEmitter bool) (end instant, stop, owned bool) {
	h := s.hooks[j]
	sl := s.slot(j)
	cp := &sl.copy
	if !s.single {
		prepare[T, P](&s.em, h, cp, &s.current)
	}
	own := &s.owns[j]
	hc := &own.hc
	hc.over = overFlag{done: &own.done}
	hc.parent = s.parent
	hc.depth = s.depth
	hc.deadline = start.add(h.timeout)
	sl.start = start
	// Publish the hook as running, unless the emitter gave up on the
	// whole emission meanwhile.
	if !onEmitter && !s.cur.CompareAndSwap(cursor(j, slotPending), cursor(j, slotRunning)) {
		return start, true, false
	}
	err := invoke[T, P](hc, h, P(cp))
	end = clock()
	elapsed := end.sub(start)
	own.done.Store(true)
	if !onEmitter && !s.cur.CompareAndSwap(cursor(j, slotRunning), cursor(j+1, slotPending)) {
		return end, true, false // abandoned: the emitter took over
	}
	hc.release()
	o := result(err, elapsed, h.timeout)
	if o == OutcomeOK && s.checks {
		if err = any(P(cp)).(checker[T]).check(&s.current); err != nil {
			o = OutcomeError
		}
	}
	var n runNote
	if o == OutcomeOK && s.em.reg.observer != nil {
		n = note[T, P](&s.em, P(cp), &s.current)
	}
	s.em.finished(s.parent, h, elapsed, o, err, n)
	if o != OutcomeOK || s.em.reg.observer != nil {
		// What finished did (a failure's log line, the observer) is not
		// the next hook's time: it starts now.
		end = clock()
	}
	if o != OutcomeOK {
		return end, h.policy == FailClosed && s.failClosed(h, failureWord(o)), true
	}
	P(&s.current).merge(cp)
	if s.stops && s.st.stopped() {
		return end, true, true
	}
	return end, false, true
}

// run is the runner: it starts at the hook the cursor names and runs the
// chain to its end, then publishes slotFinished and wakes the emitter.
func (s *serialRun[T, P]) run() {
	j, _ := uncursor(s.cur.Load())
	// One clock reading per hook: the end of one hook is the start of the
	// next (what runs in between is counted with the next hook), and the
	// first one starts when the emitter dispatched the runner (the
	// handoff is counted with it, as the emitter waits for it too).
	t := s.dispatched
	for ; j < len(s.hooks); j++ {
		if ended(s.stop) {
			s.interrupted = true
			break
		}
		end, stop, owned := s.runHook(j, t, false)
		if !owned {
			return
		}
		t = end
		if stop {
			break
		}
	}
	// A chain that ran to its end still reports a cancellation that came
	// during its last hook, as every other point of the chain would.
	if ended(s.stop) {
		s.interrupted = true
	}
	v := s.cur.Load()
	if _, state := uncursor(v); state != slotPending || !s.cur.CompareAndSwap(v, cursor(0, slotFinished)) {
		return // the emitter gave up on the emission
	}
	s.w.notify()
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

// collectRun is one collector emission: the emitter runs the Inline hooks
// itself, up to conc pooled workers pull the other hooks in order and run
// them concurrently, each on its own copy; the emitter abandons hooks that
// pass their deadline (dispatching a replacement worker) and merges the
// items of the hooks that succeeded, in hook order.
type collectRun[T any, P ContextOf[T]] struct {
	em        emission
	hooks     []*registered
	parent    context.Context
	depth     int
	src       T
	slots     []slot[T]
	one       [1]slot[T]
	next      atomic.Int32
	remaining atomic.Int32
	// stop is parent.Done(), read once: no hook starts after it closed.
	stop <-chan struct{}
	w    waiter
}

func collect[T any, P ContextOf[T]](ctx context.Context, em emission, hooks []*registered, c P) error {
	n := len(hooks)
	s := &collectRun[T, P]{em: em, hooks: hooks, parent: ctx, depth: em.depth + 1, stop: ctx.Done()}
	s.src = *(*T)(c)
	fail := func() error { return fmt.Errorf("failed to finish %s hooks: %w", em.info.name, ctx.Err()) }
	pooled := 0
	for _, h := range hooks {
		if !h.inline {
			pooled++
		}
	}
	if pooled == 0 {
		return s.inline(c, fail)
	}
	if n == 1 {
		s.slots = s.one[:]
	} else {
		s.slots = make([]slot[T], n)
	}
	s.remaining.Store(int32(n))
	// Start with a few workers: hooks that return at once are done by
	// them without a worker each. If hooks are still waiting after
	// spillAfter, the rest get their own workers, up to the bound, so slow
	// hooks still run side by side.
	limit := min(pooled, s.em.reg.conc)
	workers := min(limit, max(2, runtime.GOMAXPROCS(0)))
	start := clock()
	s.w.init(start)
	for range workers {
		s.w.start(s)
	}
	// The emitter's own share: the Inline hooks.
	for j, h := range hooks {
		if !h.inline {
			continue
		}
		if ended(s.stop) {
			s.abandonAll()
			return fail()
		}
		s.runSlot(j, &s.slots[j], false)
	}
	spill := workers < limit
	minWait := minWake(hooks)
	if spill {
		s.w.wakeAt(start, spillAfter)
	} else {
		s.w.wakeAt(start, minWait)
	}
	abandoned := false
	for {
		if s.stop == nil {
			<-s.w.sig
		} else {
			select {
			case <-s.w.sig:
			case <-s.stop:
				s.abandonAll()
				s.w.cancel()
				return fail()
			}
		}
		if s.remaining.Load() == 0 {
			s.w.cancel()
			if !abandoned {
				s.w.recycle()
			}
			return s.finish(c, fail)
		}
		now := clock()
		if spill && now.sub(start) >= spillAfter {
			spill = false
			for range min(limit-workers, n-int(s.next.Load())) {
				s.w.start(s)
			}
		}
		wait := time.Duration(-1)
		started := min(int(s.next.Load()), n)
		for j := 0; j < started; j++ {
			sl := &s.slots[j]
			if sl.state.Load() != slotRunning {
				continue
			}
			dl := instant(sl.deadline.Load()).add(abandonGrace)
			if now < dl {
				if d := dl.sub(now); wait < 0 || d < wait {
					wait = d
				}
				continue
			}
			if !sl.state.CompareAndSwap(slotRunning, slotAbandoned) {
				continue
			}
			abandoned = true
			h := hooks[j]
			h.stats.abandoned.Add(1)
			s.em.finished(ctx, h, now.sub(sl.start), OutcomeTimeout, nil, abandonedRun)
			sl.hc.release()
			if int(s.next.Load()) < n {
				s.w.start(s) // replace the worker stuck in the abandoned hook
			}
			s.finishOne()
		}
		if wait < 0 {
			wait = minWait
		}
		if spill {
			wait = min(wait, spillAfter-now.sub(start))
		}
		s.w.wakeAt(now, wait)
	}
}

// finish merges the items of the hooks that succeeded, in hook order.
func (s *collectRun[T, P]) finish(c P, fail func() error) error {
	if ended(s.stop) {
		return fail()
	}
	for j := range s.slots {
		if s.slots[j].ok {
			c.merge(&s.slots[j].copy)
		}
	}
	return nil
}

// abandonAll gives up on the hooks in progress when the emission is
// cancelled.
func (s *collectRun[T, P]) abandonAll() {
	for j := range s.slots {
		s.slots[j].state.CompareAndSwap(slotRunning, slotAbandoned)
	}
}

func (s *collectRun[T, P]) finishOne() {
	if s.remaining.Add(-1) == 0 && s.w.sig != nil {
		s.w.notify()
	}
}

// run is a worker's loop: it takes the next hook that is not Inline until
// none is left.
func (s *collectRun[T, P]) run() {
	for !ended(s.stop) {
		j := int(s.next.Add(1)) - 1
		if j >= len(s.hooks) {
			return
		}
		if s.hooks[j].inline {
			continue // the emitter runs it
		}
		if !s.runSlot(j, &s.slots[j], false) {
			return // abandoned; a replacement worker took over
		}
	}
}

// inline runs a collector whose hooks are all Inline on the emitter, one
// after the other, each on a fresh copy in one shared slot; the items of
// the hooks that succeed are gathered in hook order and reach c only when
// the emission was not cancelled.
func (s *collectRun[T, P]) inline(c P, fail func() error) error {
	var items T
	sl := &s.one[0]
	for j := range s.hooks {
		if ended(s.stop) {
			return fail()
		}
		sl.ok = false
		s.runSlot(j, sl, len(s.hooks) > 1)
		if sl.ok {
			P(&items).merge(&sl.copy)
		}
	}
	if ended(s.stop) {
		return fail()
	}
	c.merge(&items)
	return nil
}

// ownCtx is the context.Context of a hook that runs in a shared slot,
// with the state that says when its run is over: a hook may keep its
// context, which must stay ended after it returned while later hooks use
// the slot.
type ownCtx struct {
	hc   hookCtx
	done atomic.Bool
}

// runSlot runs hook j in slot sl on its own copy of src; it reports false
// when the emitter abandoned the run meanwhile. shared: sl is used by
// several hooks in turn (all-Inline collectors), so the hook gets an
// ownCtx.
func (s *collectRun[T, P]) runSlot(j int, sl *slot[T], shared bool) bool {
	h := s.hooks[j]
	cp := &sl.copy
	prepare[T, P](&s.em, h, cp, &s.src)
	hc := &sl.hc
	hc.over = overFlag{state: &sl.state}
	var own *ownCtx
	if shared {
		own = new(ownCtx)
		hc = &own.hc
		hc.over = overFlag{done: &own.done}
	}
	hc.parent = s.parent
	hc.depth = s.depth
	sl.start = clock()
	hc.deadline = sl.start.add(h.timeout)
	sl.deadline.Store(int64(hc.deadline))
	sl.state.Store(slotRunning)
	err := invoke[T, P](hc, h, P(cp))
	elapsed := clock().sub(sl.start)
	if own != nil {
		own.done.Store(true)
	}
	if !sl.state.CompareAndSwap(slotRunning, slotFinished) {
		return false
	}
	hc.release()
	o := result(err, elapsed, h.timeout)
	var n runNote
	if o == OutcomeOK && s.em.reg.observer != nil {
		n = note[T, P](&s.em, P(cp), &s.src)
	}
	s.em.finished(s.parent, h, elapsed, o, err, n)
	if o == OutcomeOK {
		sl.ok = true
	}
	s.finishOne()
	return true
}
