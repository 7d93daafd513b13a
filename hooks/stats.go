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
	abandoned   atomic.Uint64
	totalNanos  atomic.Int64
	maxNanos    atomic.Int64
	// buckets counts runs by duration: buckets[i] those up to
	// LatencyBuckets[i] (and above the previous bound), the last one those
	// above every bound.
	buckets [len(LatencyBuckets) + 1]atomic.Uint64
}

// LatencyBuckets are the upper bounds of the run-time histogram HookStats
// keeps (Prometheus-style buckets, from sub-millisecond built-in hooks to
// slow process-plugin hooks near their deadline).
var LatencyBuckets = [...]time.Duration{
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond,
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second,
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

// Effect is what a hook run did to the designated fields of its event's
// context, as far as it counts: only a run that succeeded in time has one.
type Effect uint8

const (
	// EffectNone: the run did not succeed (error, timeout, panic), so it
	// changed nothing.
	EffectNone Effect = iota
	// EffectUnchanged: the run succeeded and left every designated field as
	// it got it (a collector hook that added no item; every hook of an
	// event without designated fields).
	EffectUnchanged
	// EffectChanged: the run changed a designated field (a transformer's
	// text, an observer's message_text, a collector's items, a gate's
	// approval of the call, a cleared suppression).
	EffectChanged
	// EffectSuppressed: an observer or transformer set suppress.
	EffectSuppressed
	// EffectClaimed: a message:claim hook claimed the message.
	EffectClaimed
	// EffectDeclined: a gate declined (tool:before_call) or denied
	// (tool:approval_requested) the call.
	EffectDeclined
	// EffectApprovalRequired: a tool:before_call hook asked for a
	// person's approval.
	EffectApprovalRequired
)

var effectNames = [...]string{"none", "unchanged", "changed", "suppressed", "claimed", "declined", "approval_required"}

func (e Effect) String() string {
	if int(e) < len(effectNames) {
		return effectNames[e]
	}
	return "unknown"
}

// HookRun describes one finished hook run, for a RunObserver.
type HookRun struct {
	Event, Plugin, Hook, CorrelationID string
	// Mode is the event's mode.
	Mode     Mode
	Duration time.Duration
	Outcome  Outcome
	// Abandoned: the run passed its deadline and had not returned when the
	// emission gave up on it (Outcome is OutcomeTimeout); false for a run
	// that returned, late or not, and for Inline hooks, which are waited
	// for.
	Abandoned bool
	// Err is what the hook returned (a *PanicError when it panicked,
	// ErrHookTimeout when it passed its deadline without an error of its
	// own); nil when it succeeded.
	Err error
	// Effect is what the run did to the event's designated fields,
	// compared with what the hook got: EffectNone unless Outcome is
	// OutcomeOK.
	Effect Effect
	// Change describes the change in a few words, e.g.
	// `response_text: "Hello" → "Hello!"`, `suppress: false → true`,
	// `+2 items: message_context "weather", message_context "time"`,
	// `declined: "reason"`, `claimed: "answer"` (several fields joined by
	// "; ", each value cut to about 120 bytes). It is computed only for
	// emissions whose context was marked with WithRunDetail, and is ""
	// otherwise and for runs without an effect.
	Change string
}

// runDetailKey marks an emission's context.Context: see WithRunDetail.
type runDetailKey struct{}

// WithRunDetail returns ctx marked so that the emissions started with it
// (and the emissions nested in their hooks, which inherit the context)
// tell the registry's RunObserver what each successful hook changed
// (HookRun.Change). Without the mark, HookRun.Change stays empty and costs
// nothing; HookRun.Effect is set either way.
func WithRunDetail(ctx context.Context) context.Context {
	return context.WithValue(ctx, runDetailKey{}, true)
}

// runDetail reports whether ctx was marked with WithRunDetail.
func runDetail(ctx context.Context) bool {
	return ctx.Value(runDetailKey{}) != nil
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
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	s.buckets[i].Add(1)
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
	// Abandoned counts the timed-out runs whose hook had not returned
	// when the emission gave up on it (a part of Timeouts).
	Abandoned uint64 `json:"abandoned"`
	// Total and Max are the summed and the longest run time; an abandoned
	// run counts with the time until it was abandoned.
	Total time.Duration `json:"total_ns"`
	Max   time.Duration `json:"max_ns"`
	// Buckets counts the runs by duration, cumulatively: Buckets[i] is the
	// number of runs that took at most LatencyBuckets[i]. Runs above the
	// last bound are Invocations minus the last bucket.
	Buckets []uint64 `json:"buckets,omitempty"`
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
		buckets := make([]uint64, len(LatencyBuckets))
		var cum uint64
		for i := range buckets {
			cum += s.buckets[i].Load()
			buckets[i] = cum
		}
		out = append(out, HookStats{
			Event: h.event.name, Plugin: h.plugin.name, Hook: h.name,
			Invocations: s.invocations.Load(), Errors: s.errors.Load(),
			Timeouts: s.timeouts.Load(), Panics: s.panics.Load(), Abandoned: s.abandoned.Load(),
			Total: time.Duration(s.totalNanos.Load()), Max: time.Duration(s.maxNanos.Load()),
			Buckets: buckets,
		})
	}
	return out
}
