package turn

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/metrics"
	"github.com/hookroom/hookroom/trace"
)

// arrivalKey carries the time an inbound event was queued for handling
// (right after the inbox recorded it) to its turn.
type arrivalKey struct{}

// WithArrival returns ctx carrying the time an inbound event was queued
// for handling, from which a turn measures its stages.
func WithArrival(ctx context.Context, at time.Time) context.Context {
	if at.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, arrivalKey{}, at)
}

// ArrivalFrom returns the arrival time ctx carries, or now.
func ArrivalFrom(ctx context.Context) time.Time {
	if at, ok := ctx.Value(arrivalKey{}).(time.Time); ok {
		return at
	}
	return time.Now()
}

// stages measures a turn's stages from its message's arrival in the
// inbox: each stage once, the outcome once.
type stages struct {
	m       *metrics.Metrics
	rec     *trace.Recorder // the turn's trace, which records the stages too
	arrived time.Time
	seen    [4]atomic.Bool // by index in metrics.Stages
	ended   atomic.Bool
}

func newStages(ctx context.Context, m *metrics.Metrics) *stages {
	return &stages{m: m, arrived: ArrivalFrom(ctx)}
}

// mark records stage, unless it was recorded already.
func (c *stages) mark(stage metrics.Stage) {
	if c == nil {
		return
	}
	i := slices.Index(metrics.Stages, stage)
	if i < 0 || c.seen[i].Swap(true) {
		return
	}
	c.rec.Stage(string(stage))
	c.m.TurnStage(stage, time.Since(c.arrived))
}

// end counts the turn's outcome ("responded", "claimed" or a
// message:cancelled reason), once.
func (c *stages) end(outcome string) {
	if c == nil || c.ended.Swap(true) {
		return
	}
	c.m.TurnEnded(outcome)
}

// responseOutcome is the outcome label of a turn that delivered a reply:
// a message:claim hook's ("claimed"), or the model's or a team's
// ("responded").
func responseOutcome(k hooks.ResponseKind) string {
	if k == hooks.ResponseSystem {
		return "claimed"
	}
	return "responded"
}

// countedModel counts an agent's model requests, their failures and the
// tokens they report.
type countedModel struct {
	agents.Model
	m            *metrics.Metrics
	agent, model string
}

// countModel wraps model so that its requests are counted for agent, whose
// provider calls the model providerModel.
func countModel(m *metrics.Metrics, agent hooks.AgentName, providerModel string, model agents.Model) agents.Model {
	if m == nil || model == nil {
		return model
	}
	return countedModel{Model: model, m: m, agent: string(agent), model: providerModel}
}

func (c countedModel) Stream(ctx context.Context, req *agents.Request) (agents.Stream, error) {
	start := time.Now()
	rec := trace.From(ctx)
	s, err := c.Model.Stream(ctx, req)
	if err != nil {
		c.m.ModelRequest(c.agent, c.model, ctx.Err() == nil)
		rec.Model(trace.ModelCall{Model: c.model, At: rec.Since() - time.Since(start), Latency: time.Since(start), Error: err.Error()})
		return nil, err
	}
	return &countedStream{Stream: s, c: c, ctx: ctx, rec: rec, call: trace.ModelCall{Model: c.model, At: rec.Since()}, start: start}, nil
}

// countedStream counts a model request and records it in the turn's
// trace when it ends.
type countedStream struct {
	agents.Stream
	c       countedModel
	ctx     context.Context
	counted bool
	rec     *trace.Recorder
	call    trace.ModelCall
	start   time.Time
}

func (s *countedStream) Recv() (agents.Event, error) {
	ev, err := s.Stream.Recv()
	switch {
	case err == nil && ev.Kind == agents.EventUsage:
		s.c.m.Tokens(s.c.agent, s.c.model, ev.Usage.PromptTokens, ev.Usage.CompletionTokens, ev.Usage.CachedTokens)
		s.call.PromptTokens, s.call.CompletionTokens, s.call.CachedTokens = ev.Usage.PromptTokens, ev.Usage.CompletionTokens, ev.Usage.CachedTokens
	case err == nil && ev.Kind == agents.EventFinish:
		s.call.FinishReason = string(ev.FinishReason)
	case errors.Is(err, io.EOF):
		s.count(false)
	case err != nil:
		// A stream cut short by the turn's end (🛑, shutdown) is not the
		// model's failure.
		s.call.Error = err.Error()
		s.count(s.ctx.Err() == nil)
	}
	return ev, err
}

func (s *countedStream) Close() error {
	s.count(false) // closed before its end: the turn stopped reading
	return s.Stream.Close()
}

func (s *countedStream) count(failed bool) {
	if s.counted {
		return
	}
	s.counted = true
	s.c.m.ModelRequest(s.c.agent, s.c.model, failed)
	s.call.Latency = time.Since(s.start)
	s.rec.Model(s.call)
}
