package hooks

import (
	"sync"
	"sync/atomic"
	"time"
)

// This file holds what emissions share instead of paying for it each time:
// one deadline scheduler (a single timer for every emission in flight, in
// place of a timer per emission) and a pool of parked worker goroutines
// that run hooks (in place of a new goroutine per emission).

// epoch anchors the engine's clock: instants are durations since it.
var epoch = time.Now()

// instant is a reading of the engine's clock: nanoseconds since epoch. The
// engine keeps every time it needs (a hook's start, deadline and end, the
// emitter's wake-ups) as instants, which cost a monotonic clock reading
// and integer arithmetic, and makes a time.Time only for a hook that asks
// for its context's deadline.
type instant int64

// clock reads the engine's clock; it is called wherever an emission needs
// the time. Outside a testing/synctest bubble it reads only the monotonic
// clock, about half the cost of time.Now. Inside a bubble time.Since is
// computed from the bubble's fake wall clock, which starts in 2000: there
// instants are negative (how the waiter recognises the bubble) and still
// advance with the bubble's time.
func clock() instant { return instant(time.Since(epoch)) }

// time returns t as a time.Time: epoch moved by t. Its monotonic reading
// is exact; its wall clock ignores steps of the system clock since the
// process started (inside a synctest bubble it is the bubble's).
func (t instant) time() time.Time { return epoch.Add(time.Duration(t)) }

func (t instant) add(d time.Duration) instant { return t + instant(d) }

func (t instant) sub(u instant) time.Duration { return time.Duration(t - u) }

// waiter is an emitter's registration for a wake-up and the channel it
// sleeps on. Everyone who has news for the emitter (the runner that
// finished, the deadline) sends on sig without blocking; the emitter
// re-reads the run's state after every wake-up, so a token lost to a full
// buffer or left over from earlier news is harmless.
//
// Inside a testing/synctest bubble (where time.Now has no monotonic
// reading) a shared timer and parked workers cannot serve the emission:
// the waiter then falls back to a timer of its own and a new goroutine per
// runner, all created in the bubble, so fake time and the bubble's end
// work as for any other code.
type waiter struct {
	sig    chan struct{}
	when   instant // when the emitter wants to be woken
	index  int     // position in the scheduler's heap; -1 when not queued
	bubble bool
	timer  *time.Timer // bubble only
}

func (w *waiter) init(now instant) {
	w.index = -1
	// Only a synctest bubble's clock has no monotonic reading (Round(0)
	// strips it). The sign of now is no test: a bubble's instants are
	// negative only while its fake time stays before the process's start.
	t := time.Now()
	w.bubble = t == t.Round(0)
	switch {
	case w.bubble:
		w.sig, w.timer = make(chan struct{}, 1), nil
	case w.sig == nil:
		w.sig = getSig()
	}
}

// wakeAt asks to be woken d after now.
func (w *waiter) wakeAt(now instant, d time.Duration) {
	if !w.bubble {
		deadlines.schedule(w, now.add(d))
		return
	}
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.notify)
	} else {
		w.timer.Reset(d)
	}
}

// cancel withdraws the wake-up; afterwards only the runner can still send.
func (w *waiter) cancel() {
	if !w.bubble {
		deadlines.cancel(w)
	} else if w.timer != nil {
		w.timer.Stop()
	}
}

// start runs t on a pooled worker (a new goroutine in a bubble).
func (w *waiter) start(t task) {
	if w.bubble {
		go t.run()
		return
	}
	dispatch(t)
}

// notify wakes the emitter without blocking.
func (w *waiter) notify() {
	select {
	case w.sig <- struct{}{}:
	default:
	}
}

// drain empties the channel of a waiter whose emission is over, for the
// next emission of a pooled run: nobody can signal it anymore (the runner
// finished, the wake-up was cancelled, no runner was abandoned).
func (w *waiter) drain() {
	select {
	case <-w.sig:
	default:
	}
}

// recycle returns the waiter's channel for reuse. Only an emitter whose
// run nobody can signal anymore (the runner finished, the wake-up was
// cancelled, no runner was abandoned) calls it.
func (w *waiter) recycle() {
	if w.bubble {
		return
	}
	select {
	case <-w.sig:
	default:
	}
	sigPool.Put(w.sig)
	w.sig = nil
}

var sigPool = sync.Pool{New: func() any { return make(chan struct{}, 1) }}

func getSig() chan struct{} { return sigPool.Get().(chan struct{}) }

// deadlineScheduler wakes emitters at the deadlines they registered, all
// from one timer. The timer stays armed at its earliest deadline even when
// that registration is withdrawn: a registration later than the armed time
// (the usual case, as deadlines are far longer than emissions) then costs a
// heap insertion and no timer operation, and a timer that fires with
// nothing due just re-arms for the earliest registration left.
type deadlineScheduler struct {
	mu    sync.Mutex
	q     []*waiter // min-heap by when
	armed instant   // when the timer fires; 0 when it is not armed
	timer *time.Timer
}

var deadlines deadlineScheduler

// schedule (re)registers w to be woken at when.
func (d *deadlineScheduler) schedule(w *waiter, when instant) {
	d.mu.Lock()
	w.when = when
	if w.index >= 0 {
		d.down(w.index)
		d.up(w.index)
	} else {
		w.index = len(d.q)
		d.q = append(d.q, w)
		d.up(w.index)
	}
	if d.armed == 0 || when < d.armed {
		d.armed = when
		delay := when.sub(clock())
		if d.timer == nil {
			d.timer = time.AfterFunc(delay, d.fire)
		} else {
			d.timer.Reset(delay)
		}
	}
	d.mu.Unlock()
}

// cancel withdraws w; after it returns the scheduler no longer touches w.
func (d *deadlineScheduler) cancel(w *waiter) {
	d.mu.Lock()
	if i := w.index; i >= 0 {
		last := len(d.q) - 1
		if i != last {
			d.swap(i, last)
		}
		d.q[last] = nil
		d.q = d.q[:last]
		if i != last {
			d.down(i)
			d.up(i)
		}
		w.index = -1
	}
	d.mu.Unlock()
}

func (d *deadlineScheduler) fire() {
	d.mu.Lock()
	now := clock()
	for len(d.q) > 0 && d.q[0].when <= now {
		w := d.q[0]
		last := len(d.q) - 1
		d.swap(0, last)
		d.q[last] = nil
		d.q = d.q[:last]
		d.down(0)
		w.index = -1
		w.notify()
	}
	d.armed = 0
	if len(d.q) > 0 {
		d.armed = d.q[0].when
		d.timer.Reset(d.armed.sub(now))
	}
	d.mu.Unlock()
}

func (d *deadlineScheduler) swap(i, j int) {
	d.q[i], d.q[j] = d.q[j], d.q[i]
	d.q[i].index = i
	d.q[j].index = j
}

func (d *deadlineScheduler) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if d.q[p].when <= d.q[i].when {
			return
		}
		d.swap(i, p)
		i = p
	}
}

func (d *deadlineScheduler) down(i int) {
	n := len(d.q)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && d.q[r].when < d.q[l].when {
			m = r
		}
		if d.q[i].when <= d.q[m].when {
			return
		}
		d.swap(i, m)
		i = m
	}
}

// task is work for a pooled worker: a serial chain's runner or a
// collector's worker loop.
type task interface{ run() }

// maxParked bounds the idle workers kept for reuse; a worker that finds
// the pool full exits.
const maxParked = 64

var (
	idle   = make(chan task)
	parked atomic.Int32
)

// dispatch runs t on a parked worker, or on a new one if none is idle.
// A worker stuck in an abandoned hook is simply not idle: it rejoins the
// pool (or exits) when the hook finally returns.
func dispatch(t task) {
	select {
	case idle <- t:
	default:
		go worker(t)
	}
}

func worker(t task) {
	for {
		t.run()
		if parked.Add(1) > maxParked {
			parked.Add(-1)
			return
		}
		t = <-idle
		parked.Add(-1)
	}
}
