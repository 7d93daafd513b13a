package turn

import (
	"context"
	"encoding/json"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/trace"
)

// A turn records its trace (package trace) for the console's turn
// inspector: the turn carries a trace.Recorder in its context, the hook
// engine's run observer, the model wrapper, the tool loop, the approvals
// and the reply account add to it, and finish hands the trace to
// Deps.SaveTrace. Recording never blocks or changes a turn.

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
	if mask := t.spec.Mask; mask != nil {
		c.Arguments, c.Result, c.Reason, c.Error = mask(c.Arguments), mask(c.Result), mask(c.Reason), mask(c.Error)
	}
	t.trace.Tool(c)
}

// tracedAccount records what a turn sends to its room in the turn's trace.
type tracedAccount struct {
	Account
	rec *trace.Recorder
}

func (a tracedAccount) SendText(ctx context.Context, room id.RoomID, text string, opts matrixio.SendOptions) (id.EventID, error) {
	evID, err := a.Account.SendText(ctx, room, text, opts)
	if err == nil {
		kind := trace.DeliveryMessage
		if text == Placeholder {
			kind = trace.DeliveryPlaceholder
		}
		a.rec.Delivered(kind, evID)
	}
	return evID, err
}

func (a tracedAccount) Edit(ctx context.Context, room id.RoomID, target id.EventID, text string, opts matrixio.SendOptions) (id.EventID, error) {
	evID, err := a.Account.Edit(ctx, room, target, text, opts)
	if err == nil {
		a.rec.Delivered(trace.DeliveryEdit, evID)
	}
	return evID, err
}

func (a tracedAccount) Redact(ctx context.Context, room id.RoomID, target id.EventID, reason string) (id.EventID, error) {
	evID, err := a.Account.Redact(ctx, room, target, reason)
	if err == nil {
		a.rec.Delivered(trace.DeliveryRedact, evID)
	}
	return evID, err
}
