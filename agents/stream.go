package agents

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// streamSource is a provider's side of a streamed reply: it reads the
// SDK's items (T) and keeps what the reply holds back until its end.
// streamCore calls it from Recv and Close, never concurrently. It is the
// Stream handed out: it embeds the streamCore, whose Recv and Close it has.
type streamSource[T any] interface {
	Stream
	// next waits for the server's next item. It reports more=false when
	// the stream ended, with err nil when the server closed it.
	next() (item T, more bool, err error)
	// absorb takes in one item; text is queued with streamCore.queue at
	// once, the rest kept for reply.
	absorb(item *T)
	// reply is called once the server has closed the stream: it says
	// whether that was a complete reply and gives what was held back.
	reply() streamReply
	// closeRaw releases the SDK's stream; it may be called before next
	// ever was (the request failed) and is called once.
	closeRaw() error
}

// streamReply is what a provider's stream held back until the server
// closed it.
type streamReply struct {
	// notAStream, when set, says why what the server sent is not a reply
	// of the provider's API at all.
	notAStream string
	// finished says the model finished its reply (a stop or finish reason
	// came); else the stream was cut off.
	finished bool
	// calls are the tool calls in order; an empty ID becomes call_<n>,
	// empty arguments {}.
	calls  []ToolCall
	usage  *Usage // nil: the server sent no counts
	finish FinishReason
}

// errIdleTimeout is the cancel cause when the server stayed silent for the
// request timeout. It wraps context.DeadlineExceeded so that callers can
// treat every timeout alike.
var errIdleTimeout = fmt.Errorf("model server stayed silent: %w", context.DeadlineExceeded)

// streamCore is the part of a streamed reply every provider shares: the
// request's own context, the idle watchdog that cancels it while the
// server stays silent, the queue of events, the checks at the end of the
// stream and Close. A provider's stream embeds it and is its src.
type streamCore[T any] struct {
	src      streamSource[T]
	spec     ModelSpec
	fill     func(me *ModelError, err error)
	parent   context.Context
	ctx      context.Context
	cancel   context.CancelCauseFunc
	watchdog *time.Timer
	timeout  time.Duration

	pending   []Event
	err       error
	ended     bool
	closeOnce sync.Once
}

// start sends the request: it is called once, from the provider's Stream,
// and returns src, the stream to hand out. open sends the request with the
// request's own context and waits for the server's answer while the
// watchdog runs. Errors are classified with classifyError and the
// provider's fill. When open fails, start returns its error classified,
// with the stream closed.
func (c *streamCore[T]) start(ctx context.Context, spec ModelSpec, src streamSource[T], fill func(me *ModelError, err error), open func(sctx context.Context) error) (Stream, error) {
	c.src, c.spec, c.fill, c.parent = src, spec, fill, ctx
	c.timeout = spec.RequestTimeout
	if c.timeout <= 0 {
		c.timeout = DefaultRequestTimeout
	}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	c.watchdog = time.AfterFunc(c.timeout, func() { c.cancel(errIdleTimeout) })
	err := open(c.ctx)
	c.watchdog.Stop()
	if err != nil {
		me := classifyError(c.spec, c.ctx, ctx, err, c.fill)
		_ = c.Close()
		return nil, me
	}
	return src, nil
}

// queue adds ev to the events Recv returns next; src.absorb calls it.
func (c *streamCore[T]) queue(ev Event) { c.pending = append(c.pending, ev) }

// Recv returns the next event (see Stream).
func (c *streamCore[T]) Recv() (Event, error) {
	for len(c.pending) == 0 {
		if c.err != nil {
			return Event{}, c.err
		}
		if c.ended {
			return Event{}, io.EOF
		}
		// The watchdog runs only while we wait for the server, not while
		// the caller handles an event.
		c.watchdog.Reset(c.timeout)
		item, more, err := c.src.next()
		c.watchdog.Stop()
		switch {
		case more:
			c.src.absorb(&item)
		case err == nil && c.ctx.Err() == nil:
			c.end()
		default:
			if err == nil {
				err = c.ctx.Err()
			}
			c.err = classifyError(c.spec, c.ctx, c.parent, err, c.fill)
			_ = c.Close()
		}
	}
	ev := c.pending[0]
	c.pending = c.pending[1:]
	return ev, nil
}

// end runs when the server closed the stream: it checks that the reply was
// complete and queues the held-back events.
func (c *streamCore[T]) end() {
	c.ended = true
	_ = c.Close()
	r := c.src.reply()
	switch {
	case r.notAStream != "":
		c.err = &ModelError{Model: c.spec.Model, Kind: ErrorProtocol, Message: r.notAStream}
		return
	case !r.finished:
		c.err = &ModelError{Model: c.spec.Model, Kind: ErrorProtocol, Retryable: true, Err: io.ErrUnexpectedEOF,
			Message: "the stream ended before the model finished its reply (truncated)"}
		return
	}
	var calls []ToolCall
	for _, tc := range r.calls {
		if tc.ID == "" {
			tc.ID = fmt.Sprintf("call_%d", len(calls))
		}
		if strings.TrimSpace(tc.Arguments) == "" {
			tc.Arguments = "{}"
		}
		calls = append(calls, tc)
	}
	if len(calls) > 0 {
		c.queue(Event{Kind: EventToolCalls, ToolCalls: calls})
	}
	if r.usage != nil {
		c.queue(Event{Kind: EventUsage, Usage: *r.usage})
	}
	c.queue(Event{Kind: EventFinish, FinishReason: r.finish})
}

// Close releases the stream (see Stream); only the first call does
// anything.
func (c *streamCore[T]) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.watchdog.Stop()
		err = c.src.closeRaw()
		c.cancel(nil)
	})
	return err
}
