package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// invocation is a hook or tool call in flight, which the plugin's host
// method calls refer to by id.
type invocation struct {
	id   uint64
	ctx  context.Context // the hook's or tool call's context: deadline, depth, logger
	c    hooks.Context   // the hook's copy (nil for tools)
	tool *ToolCall

	// attachments holds the files the hook read so far, so that reading a
	// large one in chunks downloads it once. They go with the invocation.
	attMu       sync.Mutex
	attachments map[string]*hooks.Attachment
}

// helpers are the Base helpers every hook context has (Base is embedded in
// every context type).
type helpers interface {
	SendMessage(ctx context.Context, room id.RoomID, text string, opts *hooks.SendOptions) (id.EventID, error)
	RoomStateEvent(ctx context.Context, room id.RoomID, eventType, stateKey string) (json.RawMessage, error)
	RoomStateEvents(ctx context.Context, room id.RoomID, eventType string) (map[string]json.RawMessage, error)
	PutRoomState(ctx context.Context, room id.RoomID, eventType, stateKey string, content any) (id.EventID, error)
	Emit(ctx context.Context, name string, payload any) error
	Attachment(ctx context.Context, attachmentID string) (*hooks.Attachment, error)
	Logger() *zerolog.Logger
}

var _ helpers = (*hooks.MessageReceivedContext)(nil)

func (p *Plugin) register(ctx context.Context, c hooks.Context, tool *ToolCall) *invocation {
	inv := &invocation{id: p.nextInv.Add(1), ctx: ctx, c: c, tool: tool}
	p.invMu.Lock()
	p.invs[inv.id] = inv
	p.invMu.Unlock()
	return inv
}

func (p *Plugin) unregister(inv *invocation) {
	p.invMu.Lock()
	delete(p.invs, inv.id)
	p.invMu.Unlock()
}

func (p *Plugin) invocation(n uint64) (*invocation, error) {
	p.invMu.Lock()
	inv := p.invs[n]
	p.invMu.Unlock()
	if inv == nil {
		return nil, jsonrpc.Errorf(protocol.CodeUnknownInvocation, "invocation %d is not in flight (it finished or passed its deadline)", n)
	}
	return inv, nil
}

// hostHandler serves the requests a plugin process sends.
type hostHandler struct {
	p    *Plugin
	inst *instance
}

func (h hostHandler) ServeRPC(ctx context.Context, req *jsonrpc.Request) (any, error) {
	p := h.p
	switch req.Method {
	case protocol.MethodPing:
		return struct{}{}, nil
	case protocol.MethodLog:
		return nil, p.pluginLog(req.Params)
	case protocol.MethodStateDir:
		return protocol.StateDirResult{Path: p.spec.StateDir}, nil
	case protocol.MethodSendMessage:
		var params protocol.SendMessageParams
		hp, hctx, cancel, err := p.hookCall(ctx, req, &params)
		if err != nil {
			return nil, err
		}
		defer cancel()
		var opts *hooks.SendOptions
		if params.ThreadID != "" || params.Extra != nil || params.TriggerDispatch {
			opts = &hooks.SendOptions{ThreadID: params.ThreadID, Extra: params.Extra, TriggerDispatch: params.TriggerDispatch}
		}
		evID, err := hp.SendMessage(hctx, params.RoomID, params.Text, opts)
		if err != nil {
			return nil, hostError(req.Method, err)
		}
		return protocol.SendMessageResult{EventID: evID}, nil
	case protocol.MethodRoomStateGet:
		var params protocol.RoomStateGetParams
		hp, hctx, cancel, err := p.hookCall(ctx, req, &params)
		if err != nil {
			return nil, err
		}
		defer cancel()
		if params.StateKey != nil {
			content, err := hp.RoomStateEvent(hctx, params.RoomID, params.EventType, *params.StateKey)
			if err != nil {
				return nil, hostError(req.Method, err)
			}
			return protocol.RoomStateGetResult{Content: content}, nil
		}
		events, err := hp.RoomStateEvents(hctx, params.RoomID, params.EventType)
		if err != nil {
			return nil, hostError(req.Method, err)
		}
		if events == nil {
			events = map[string]json.RawMessage{}
		}
		return protocol.RoomStateGetResult{Events: events}, nil
	case protocol.MethodRoomStatePut:
		var params protocol.RoomStatePutParams
		hp, hctx, cancel, err := p.hookCall(ctx, req, &params)
		if err != nil {
			return nil, err
		}
		defer cancel()
		if len(params.Content) == 0 {
			params.Content = json.RawMessage("{}")
		}
		evID, err := hp.PutRoomState(hctx, params.RoomID, params.EventType, params.StateKey, params.Content)
		if err != nil {
			return nil, hostError(req.Method, err)
		}
		return protocol.RoomStatePutResult{EventID: evID}, nil
	case protocol.MethodAttachmentGet:
		var params protocol.AttachmentGetParams
		inv, hctx, cancel, err := p.hostCall(ctx, req, &params)
		if err != nil {
			return nil, err
		}
		defer cancel()
		hp, err := inv.hookHelpers(req.Method)
		if err != nil {
			return nil, err
		}
		att, err := inv.attachment(hctx, hp, params.AttachmentID)
		if err != nil {
			return nil, hostError(req.Method, err)
		}
		return attachmentChunk(req.Method, att, params)
	case protocol.MethodEmit:
		var params protocol.EmitParams
		inv, hctx, cancel, err := p.hostCall(ctx, req, &params)
		if err != nil {
			return nil, err
		}
		defer cancel()
		payload := params.Payload
		if len(payload) == 0 {
			payload = json.RawMessage("{}")
		}
		switch {
		case inv.c != nil:
			err = inv.c.(helpers).Emit(hctx, params.Event, payload)
		case inv.tool != nil && inv.tool.Emit != nil:
			err = inv.tool.Emit(hctx, params.Event, payload)
		default:
			err = hooks.ErrNoService
		}
		if err != nil {
			return nil, hostError(req.Method, err)
		}
		return struct{}{}, nil
	}
	return nil, jsonrpc.Errorf(jsonrpc.CodeMethodNotFound, "method not found: %s", req.Method)
}

// hostCall decodes params (which carry an invocation id), finds the
// invocation and returns a context that ends with the invocation or when
// the plugin cancels the request.
func (p *Plugin) hostCall(ctx context.Context, req *jsonrpc.Request, params any) (*invocation, context.Context, context.CancelFunc, error) {
	if err := json.Unmarshal(req.Params, params); err != nil {
		return nil, nil, nil, jsonrpc.InvalidParams(req.Method, err)
	}
	var withInv struct {
		Invocation uint64 `json:"invocation"`
	}
	_ = json.Unmarshal(req.Params, &withInv)
	inv, err := p.invocation(withInv.Invocation)
	if err != nil {
		return nil, nil, nil, err
	}
	hctx, cancel := context.WithCancel(inv.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return inv, hctx, func() { stop(); cancel() }, nil
}

// hookCall is hostCall for the methods that act through the hook's
// context helpers (send message, room state): it also finds the helpers of
// the invocation, which tools do not have.
func (p *Plugin) hookCall(ctx context.Context, req *jsonrpc.Request, params any) (helpers, context.Context, context.CancelFunc, error) {
	inv, hctx, cancel, err := p.hostCall(ctx, req, params)
	if err != nil {
		return nil, nil, nil, err
	}
	hp, err := inv.hookHelpers(req.Method)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return hp, hctx, cancel, nil
}

func (inv *invocation) hookHelpers(method string) (helpers, error) {
	if inv.c == nil {
		return nil, jsonrpc.Errorf(protocol.CodeNoService, "%s is not available to tools (only host.emit and host.log are)", method)
	}
	return inv.c.(helpers), nil
}

// attachment fetches a file for the invocation's hook, once per
// invocation.
func (inv *invocation) attachment(ctx context.Context, hp helpers, attID string) (*hooks.Attachment, error) {
	inv.attMu.Lock()
	defer inv.attMu.Unlock()
	if att := inv.attachments[attID]; att != nil {
		return att, nil
	}
	att, err := hp.Attachment(ctx, attID)
	if err != nil {
		return nil, err
	}
	if inv.attachments == nil {
		inv.attachments = map[string]*hooks.Attachment{}
	}
	inv.attachments[attID] = att
	return att, nil
}

// attachmentChunk is the part of att that params ask for.
func attachmentChunk(method string, att *hooks.Attachment, params protocol.AttachmentGetParams) (*protocol.AttachmentGetResult, error) {
	size := int64(len(att.Data))
	if params.Offset < 0 || params.Offset > size || params.Length < 0 {
		return nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "%s: offset %d and length %d do not fit a file of %d bytes", method, params.Offset, params.Length, size)
	}
	n := params.Length
	if n == 0 || n > protocol.MaxAttachmentChunk {
		n = protocol.MaxAttachmentChunk
	}
	end := min(params.Offset+n, size)
	return &protocol.AttachmentGetResult{
		AttachmentID: att.ID, Kind: att.Kind, Name: att.Name, MimeType: att.MimeType, Size: size,
		Offset: params.Offset, Data: att.Data[params.Offset:end], EOF: end == size,
	}, nil
}

// hostError maps a host service's error to the protocol's codes.
func hostError(method string, err error) *jsonrpc.Error {
	code := jsonrpc.CodeInternalError
	switch {
	case errors.Is(err, hooks.ErrNoService):
		code = protocol.CodeNoService
	case errors.Is(err, hooks.ErrNotFound):
		code = protocol.CodeNotFound
	case errors.Is(err, hooks.ErrTooLarge):
		code = protocol.CodeTooLarge
	case errors.Is(err, hooks.ErrRecursionLimit):
		code = protocol.CodeRecursionLimit
	case errors.Is(err, context.DeadlineExceeded):
		code = protocol.CodeDeadline
	case errors.Is(err, context.Canceled):
		code = protocol.CodeRequestCancelled
	}
	return &jsonrpc.Error{Code: code, Message: fmt.Sprintf("%s failed: %v", method, err)}
}

const (
	maxLogMessage = 4 << 10
	maxLogFields  = 32
)

// pluginLog writes a host.log record to the server log, under the hook's
// logger when it names an invocation in flight. Records share the stderr
// rate limit.
func (p *Plugin) pluginLog(raw json.RawMessage) error {
	var params protocol.LogParams
	if err := json.Unmarshal(raw, &params); err != nil {
		return jsonrpc.InvalidParams(protocol.MethodLog, err)
	}
	ok, dropped := p.stderrLimit.allow()
	if dropped > 0 {
		p.log.Warn().Int("dropped", dropped).Msg("process plugin logs too much; dropped log lines")
	}
	if !ok {
		return nil
	}
	log := &p.log
	if params.Invocation != 0 {
		p.invMu.Lock()
		inv := p.invs[params.Invocation]
		p.invMu.Unlock()
		if inv != nil && inv.c != nil {
			log = inv.c.(helpers).Logger()
		}
	}
	var ev *zerolog.Event
	switch params.Level {
	case "debug":
		ev = log.Debug()
	case "warn", "warning":
		ev = log.Warn()
	case "error":
		ev = log.Error()
	default:
		ev = log.Info()
	}
	if ev == nil {
		return nil
	}
	if len(params.Fields) > maxLogFields {
		ev = ev.Int("fields_dropped", len(params.Fields)-maxLogFields)
		n := 0
		for k := range params.Fields {
			if n++; n > maxLogFields {
				delete(params.Fields, k)
			}
		}
	}
	msg := p.redact(params.Message)
	for k, v := range params.Fields {
		params.Fields[k] = p.redactField(v)
	}
	if len(msg) > maxLogMessage {
		msg = msg[:maxLogMessage] + "…"
	}
	ev.Fields(params.Fields).Str("source", "plugin").Msg(msg)
	return nil
}

// redactField masks the plugin's secrets in a log field's value: in a
// string, or anywhere in a structured value (then replaced whole).
func (p *Plugin) redactField(v any) any {
	if p.mask == nil {
		return v
	}
	if s, ok := v.(string); ok {
		return p.redact(s)
	}
	raw, err := json.Marshal(v)
	if err != nil || p.redact(string(raw)) != string(raw) {
		return redactedText
	}
	return v
}
