package agents

import (
	"context"
	"io"
	"strings"
)

// EchoPrefix starts every reply of the echo model.
const EchoPrefix = "[echo model] "

// EchoModel is the offline demo model. Every reply says that it comes from
// the echo model and repeats the last user message; it streams the reply in
// word-sized pieces and never calls tools (it ignores Request.Tools). It
// makes no network calls and cannot fail except by cancellation.
type EchoModel struct{}

var _ Model = EchoModel{}

// EchoReply is the full text the echo model answers to msgs.
func EchoReply(msgs []Message) string {
	last := ""
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			last = msgs[i].Content
			break
		}
	}
	if strings.TrimSpace(last) == "" {
		return EchoPrefix + "I am the echo model, a stand-in for a real model; I repeat your last message, but there was nothing to repeat."
	}
	return EchoPrefix + "I am the echo model, a stand-in for a real model; I repeat your last message:\n\n" + last
}

// Stream returns the echo reply to req.
func (EchoModel) Stream(ctx context.Context, req *Request) (Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxModelError("echo", ctx)
	}
	reply := EchoReply(req.Messages)
	var pieces []string
	for rest := reply; rest != ""; {
		// Split after each space so that concatenating the pieces gives the
		// reply back exactly.
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			pieces = append(pieces, rest)
			break
		}
		pieces = append(pieces, rest[:i+1])
		rest = rest[i+1:]
	}
	prompt := EstimateTokens(req.Messages...)
	completion := EstimateTextTokens(reply)
	events := make([]Event, 0, len(pieces)+2)
	for _, p := range pieces {
		events = append(events, Event{Kind: EventText, Text: p})
	}
	events = append(events,
		Event{Kind: EventUsage, Usage: Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}},
		Event{Kind: EventFinish, FinishReason: FinishStop},
	)
	return &eventStream{ctx: ctx, model: "echo", events: events}, nil
}

// eventStream replays prepared events.
type eventStream struct {
	ctx    context.Context
	model  string
	events []Event
}

func (s *eventStream) Recv() (Event, error) {
	if s.ctx.Err() != nil {
		return Event{}, ctxModelError(s.model, s.ctx)
	}
	if len(s.events) == 0 {
		return Event{}, io.EOF
	}
	ev := s.events[0]
	s.events = s.events[1:]
	return ev, nil
}

func (s *eventStream) Close() error { return nil }

// ctxModelError describes the end of ctx as a *ModelError.
func ctxModelError(model string, ctx context.Context) *ModelError {
	if ctx.Err() == context.DeadlineExceeded {
		return &ModelError{Model: model, Kind: ErrorTimeout, Retryable: true, Err: context.DeadlineExceeded, Message: "the reply did not finish before the deadline"}
	}
	return &ModelError{Model: model, Kind: ErrorCancelled, Err: context.Canceled, Message: "the request was cancelled"}
}
