package hooks

import (
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

type outcome uint8

const (
	outcomeOK outcome = iota
	outcomeError
	outcomeTimeout
	outcomePanic
)

func (s *hookStats) record(d time.Duration, o outcome) {
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
	case outcomeError:
		s.errors.Add(1)
	case outcomeTimeout:
		s.timeouts.Add(1)
	case outcomePanic:
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
	// Invocations counts every run, whatever its outcome.
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
