package bot

import (
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/trace"
)

// This file records each turn's trace (package trace) for the console's
// turn inspector: the turn carries a trace.Recorder in its context, the
// hook engine's run observer, the model wrapper, the tool loop, the
// approvals and the reply account add to it, and finish hands the trace to
// the traceWriter, which saves it in the background. Recording never
// blocks or changes a turn.

// withPreTurnTrace returns ctx carrying a recorder for what happens to a
// person's message before its turn begins (message:received hooks, the
// router's model request); each turn the message starts forks it
// (newTraceRecorder). ctx is returned as it is when traces are off.
func (b *Bot) withPreTurnTrace(ctx context.Context, w *world) context.Context {
	if b.traces == nil || !w.cfg.Traces.IsEnabled() {
		return ctx
	}
	return hooks.WithRunDetail(trace.WithRecorder(ctx, trace.NewRecorder(trace.Trace{}, turn.ArrivalFrom(ctx))))
}

// newTraceRecorder starts the trace of agent's turn for ev, with what was
// recorded for its message before (withPreTurnTrace); nil when traces are
// off.
func (b *Bot) newTraceRecorder(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName, replayed bool) *trace.Recorder {
	if b.traces == nil || !w.cfg.Traces.IsEnabled() {
		return nil
	}
	tr := trace.Trace{
		EventID: ev.ID, Agent: agent, RoomID: env.RoomID, ThreadID: env.ResolvedThreadID,
		Sender: env.RequesterID, CorrelationID: string(ev.ID), Replayed: replayed,
	}
	if pre := trace.From(ctx); pre != nil {
		return pre.Fork(tr)
	}
	return trace.NewRecorder(tr, turn.ArrivalFrom(ctx))
}

// traceObserver adds every hook run of a traced turn to its trace.
type traceObserver struct{}

var _ hooks.RunObserver = traceObserver{}

func (traceObserver) HookRan(ctx context.Context, run hooks.HookRun) {
	rec := trace.From(ctx)
	if rec == nil {
		return
	}
	h := trace.HookRun{Event: run.Event, Plugin: run.Plugin, Hook: run.Hook, Mode: run.Mode.String(),
		Duration: run.Duration, Effect: hookEffect(run), Change: run.Change}
	if run.Err != nil {
		h.Error = run.Err.Error()
	}
	rec.Hook(h)
}

// hookEffect names what a hook run did, as the trace records it.
func hookEffect(run hooks.HookRun) string {
	switch run.Outcome {
	case hooks.OutcomeOK:
		if run.Effect == hooks.EffectNone {
			return trace.EffectUnchanged
		}
		return run.Effect.String()
	case hooks.OutcomeTimeout:
		if run.Abandoned {
			return trace.EffectAbandoned
		}
		return trace.EffectTimedOut
	default:
		return trace.EffectFailed
	}
}

// traceWriter saves finished traces in the background, so that a slow
// database never holds up a turn; it prunes those past the retention once
// an hour.
type traceWriter struct {
	store *trace.Store
	log   zerolog.Logger
	queue chan *trace.Trace
	done  chan struct{}
	once  sync.Once
}

// traceQueue is how many finished traces may wait to be saved; past it a
// trace is dropped (and logged) rather than delay a turn.
const traceQueue = 1024

// traceBatch is the most traces saved in one transaction.
const traceBatch = 100

func newTraceWriter(store *trace.Store, log zerolog.Logger) *traceWriter {
	return &traceWriter{store: store, log: log, queue: make(chan *trace.Trace, traceQueue), done: make(chan struct{})}
}

// add queues tr to be saved.
func (w *traceWriter) add(tr *trace.Trace) {
	if w == nil || tr == nil {
		return
	}
	select {
	case w.queue <- tr:
	default:
		w.log.Warn().Str("event_id", tr.EventID.String()).Msg("turn trace not recorded: too many traces waiting to be saved")
	}
}

// run saves queued traces until close, and prunes every hour those older
// than retention() (read at each prune: it reloads live).
func (w *traceWriter) run(ctx context.Context, retention func() time.Duration) {
	defer close(w.done)
	prune := time.NewTicker(time.Hour)
	defer prune.Stop()
	w.prune(ctx, retention())
	for {
		select {
		case tr, ok := <-w.queue:
			if !ok {
				return
			}
			// What queued up while the last save ran goes in one
			// transaction with it.
			batch := []*trace.Trace{tr}
		more:
			for len(batch) < traceBatch {
				select {
				case next, ok := <-w.queue:
					if !ok {
						break more
					}
					batch = append(batch, next)
				default:
					break more
				}
			}
			if err := w.store.SaveBatch(ctx, batch); err != nil {
				w.log.Warn().Err(err).Int("traces", len(batch)).Msg("failed to save turn traces")
			}
		case <-prune.C:
			w.prune(ctx, retention())
		}
	}
}

func (w *traceWriter) prune(ctx context.Context, retention time.Duration) {
	n, err := w.store.Prune(ctx, time.Now().Add(-retention))
	if err != nil {
		w.log.Warn().Err(err).Msg("failed to prune old turn traces")
		return
	}
	if n > 0 {
		w.log.Info().Int64("deleted", n).Stringer("retention", retention).Msg("pruned turn traces past their retention")
	}
}

// close saves what is queued and stops the writer.
func (w *traceWriter) close() {
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.queue) })
	<-w.done
}
