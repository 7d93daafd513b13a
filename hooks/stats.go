package hooks

import (
	"context"
	"sync/atomic"
	"time"
)

type hookStats struct {
	invocations atomic.Uint64
	errors      atomic.Uint64
	timeouts    atomic.Uint64
	panics      atomic.Uint64
	totalNanos  atomic.Int64
	maxNanos    atomic.Int64
}

// Outcome is how one hook run ended.
type Outcome uint8

const (
	// OutcomeOK: the hook returned nil before its deadline; its effects count.
	OutcomeOK Outcome = iota
	// OutcomeError: the hook returned an error.
	OutcomeError
	// OutcomeTimeout: the hook passed its deadline (returned late or was
	// abandoned).
	OutcomeTimeout
	// OutcomePanic: the hook panicked.
	OutcomePanic
)

var outcomeNames = [...]string{"ok", "error", "timeout", "panic"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// HookRun describes one finished hook run, for a RunObserver.
type HookRun struct {
	Event, Plugin, Hook, CorrelationID string
	Duration                           time.Duration
	Outcome                            Outcome
	// Err is what the hook returned (a *PanicError when it panicked,
	// ErrHookTimeout when it passed its deadline without an error of its
	// own); nil when it succeeded.
	Err error
}

// RunObserver is told about every hook run: metrics exporters, tracing and
// the Go SDK use it. HookRan is called on the goroutine that saw the run
// end (the hook's runner, or the emitter for an abandoned hook) with the
// context of the emission, and must return quickly.
type RunObserver interface {
	HookRan(ctx context.Context, run HookRun)
}

func (s *hookStats) record(d time.Duration, o Outcome) {
	s.invocations.Add(1)
	n := int64(d)
	s.totalNanos.Add(n)
	for {
		m := s.maxNanos.Load()
		if n <= m || s.maxNanos.CompareAndSwap(m, n) {
			break
		}
	}
	switch o {
	case OutcomeError:
		s.errors.Add(1)
	case OutcomeTimeout:
		s.timeouts.Add(1)
	case OutcomePanic:
		s.panics.Add(1)
	}
}

// HookStats are the run statistics of one hook since it was first
// registered (they carry over across reloads while the hook keeps its
// plugin, name and event).
type HookStats struct {
	Event  string `json:"event"`
	Plugin string `json:"plugin"`
	Hook   string `json:"hook"`
	// Invocations counts every run, whatever its Outcome.
	Invocations uint64 `json:"invocations"`
	// Errors counts runs that returned an error.
	Errors uint64 `json:"errors"`
	// Timeouts counts runs that passed their deadline (returned late or
	// were abandoned).
	Timeouts uint64 `json:"timeouts"`
	// Panics counts runs that panicked.
	Panics uint64 `json:"panics"`
	// Total and Max are the summed and the longest run time; an abandoned
	// run counts with the time until it was abandoned.
	Total time.Duration `json:"total_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Mean returns the mean run time.
func (s HookStats) Mean() time.Duration {
	if s.Invocations == 0 {
		return 0
	}
	return s.Total / time.Duration(s.Invocations)
}

// Stats returns the run statistics of every hook in service, in the order
// of Hooks.
func (r *Registry) Stats() []HookStats {
	out := make([]HookStats, 0, len(r.all))
	for _, h := range r.all {
		s := h.stats
		out = append(out, HookStats{
			Event: h.event.name, Plugin: h.plugin.name, Hook: h.name,
			Invocations: s.invocations.Load(), Errors: s.errors.Load(),
			Timeouts: s.timeouts.Load(), Panics: s.panics.Load(),
			Total: time.Duration(s.totalNanos.Load()), Max: time.Duration(s.maxNanos.Load()),
		})
	}
	return out
}
