package bot

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
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
	return hooks.WithRunDetail(trace.WithRecorder(ctx, trace.NewRecorder(trace.Trace{}, arrivalFrom(ctx))))
}

// newTraceRecorder starts the trace of t, with what was recorded for its
// message before (withPreTurnTrace); nil when traces are off.
func (b *Bot) newTraceRecorder(ctx context.Context, t *turn) *trace.Recorder {
	if b.traces == nil || !t.w.cfg.Traces.IsEnabled() {
		return nil
	}
	tr := trace.Trace{
		EventID: t.ev.ID, Agent: t.agent, RoomID: t.env.RoomID, ThreadID: t.env.ResolvedThreadID,
		Sender: t.env.RequesterID, CorrelationID: string(t.ev.ID), Replayed: t.replayed,
	}
	if pre := trace.From(ctx); pre != nil {
		return pre.Fork(tr)
	}
	return trace.NewRecorder(tr, arrivalFrom(ctx))
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

// onToolCall records a finished (or declined) tool call of the turn.
func (t *turn) onToolCall(e hooks.ToolTraceEntry) {
	c := trace.ToolCall{Name: e.Tool, Result: e.Result, Duration: e.Duration, Declined: e.Blocked}
	c.At = t.trace.Since() - e.Duration
	if len(e.Args) > 0 {
		c.Arguments = string(e.Args)
		var v any
		if json.Unmarshal(e.Args, &v) == nil {
			if b, err := json.MarshalIndent(v, "", "  "); err == nil {
				c.Arguments = string(b)
			}
		}
	}
	if e.Blocked {
		c.Reason = e.Error
	} else {
		c.Error = e.Error
	}
	c.Arguments, c.Result, c.Reason, c.Error = t.w.cfg.MaskSecrets(c.Arguments), t.w.cfg.MaskSecrets(c.Result),
		t.w.cfg.MaskSecrets(c.Reason), t.w.cfg.MaskSecrets(c.Error)
	t.trace.Tool(c)
}

// tracedAccount records what a turn sends to its room in the turn's trace.
type tracedAccount struct {
	replyAccount
	rec *trace.Recorder
}

func (a tracedAccount) SendText(ctx context.Context, room id.RoomID, text string, opts matrixio.SendOptions) (id.EventID, error) {
	evID, err := a.replyAccount.SendText(ctx, room, text, opts)
	if err == nil {
		kind := trace.DeliveryMessage
		if text == placeholderText {
			kind = trace.DeliveryPlaceholder
		}
		a.rec.Delivered(kind, evID)
	}
	return evID, err
}

func (a tracedAccount) Edit(ctx context.Context, room id.RoomID, target id.EventID, text string, opts matrixio.SendOptions) (id.EventID, error) {
	evID, err := a.replyAccount.Edit(ctx, room, target, text, opts)
	if err == nil {
		a.rec.Delivered(trace.DeliveryEdit, evID)
	}
	return evID, err
}

func (a tracedAccount) Redact(ctx context.Context, room id.RoomID, target id.EventID, reason string) (id.EventID, error) {
	evID, err := a.replyAccount.Redact(ctx, room, target, reason)
	if err == nil {
		a.rec.Delivered(trace.DeliveryRedact, evID)
	}
	return evID, err
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
