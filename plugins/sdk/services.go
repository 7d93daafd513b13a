package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// rpcServices implements the host services of hook contexts by calling the
// host, on behalf of the invocation the context belongs to.
type rpcServices struct{ s *server }

var (
	_ hooks.MessageSender = rpcServices{}
	_ hooks.RoomState     = rpcServices{}
	_ hooks.EventEmitter  = rpcServices{}
	_ hooks.Attachments   = rpcServices{}
)

// EmitEvent forwards a custom event a hook emitted with c.Emit to the host,
// so it reaches every plugin's hooks there.
func (r rpcServices) EmitEvent(ctx context.Context, name string, payload json.RawMessage) error {
	c := callFrom(ctx)
	if c == nil {
		return fmt.Errorf("failed to emit %q: %w", name, hooks.ErrNoService)
	}
	return c.emit(ctx, name, payload)
}

func (r rpcServices) callHost(ctx context.Context, method string, params, result any) error {
	if callFrom(ctx) == nil {
		return fmt.Errorf("%s: %w", method, hooks.ErrNoService)
	}
	raw, err := r.s.conn.Call(ctx, method, params)
	if err != nil {
		return remoteError(err)
	}
	if result != nil {
		if err := json.Unmarshal(raw, result); err != nil {
			return fmt.Errorf("failed to decode the answer to %s: %w", method, err)
		}
	}
	return nil
}

func invocationOf(ctx context.Context) uint64 {
	if c := callFrom(ctx); c != nil {
		return c.inv
	}
	return 0
}

// SendHookMessage asks the host to send msg; the host fills in its origin.
func (r rpcServices) SendHookMessage(ctx context.Context, msg hooks.HookMessage) (id.EventID, error) {
	var res protocol.SendMessageResult
	err := r.callHost(ctx, protocol.MethodSendMessage, protocol.SendMessageParams{
		Invocation: invocationOf(ctx), RoomID: msg.RoomID, Text: msg.Text, ThreadID: msg.ThreadID,
		Extra: msg.Extra, TriggerDispatch: msg.TriggerDispatch,
	}, &res)
	return res.EventID, err
}

// RoomStateEvent reads one state event through the host.
func (r rpcServices) RoomStateEvent(ctx context.Context, room id.RoomID, eventType, stateKey string) (json.RawMessage, error) {
	var res protocol.RoomStateGetResult
	err := r.callHost(ctx, protocol.MethodRoomStateGet, protocol.RoomStateGetParams{
		Invocation: invocationOf(ctx), RoomID: room, EventType: eventType, StateKey: &stateKey,
	}, &res)
	return res.Content, err
}

// RoomStateEvents reads every state event of a type through the host.
func (r rpcServices) RoomStateEvents(ctx context.Context, room id.RoomID, eventType string) (map[string]json.RawMessage, error) {
	var res protocol.RoomStateGetResult
	err := r.callHost(ctx, protocol.MethodRoomStateGet, protocol.RoomStateGetParams{
		Invocation: invocationOf(ctx), RoomID: room, EventType: eventType,
	}, &res)
	return res.Events, err
}

// PutRoomState writes one state event through the host.
func (r rpcServices) PutRoomState(ctx context.Context, room id.RoomID, eventType, stateKey string, content any) (id.EventID, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return "", fmt.Errorf("failed to marshal state content: %w", err)
	}
	var res protocol.RoomStatePutResult
	err = r.callHost(ctx, protocol.MethodRoomStatePut, protocol.RoomStatePutParams{
		Invocation: invocationOf(ctx), RoomID: room, EventType: eventType, StateKey: stateKey, Content: raw,
	}, &res)
	return res.EventID, err
}

// FetchAttachment reads a file of the hook's message through the host, in
// chunks of protocol.MaxAttachmentChunk. The host knows the message from
// the invocation; room and sourceEvent only served the engine's check.
func (r rpcServices) FetchAttachment(ctx context.Context, _ id.RoomID, _ id.EventID, attachmentID string) (*hooks.Attachment, error) {
	var att *hooks.Attachment
	for {
		var offset int64
		if att != nil {
			offset = int64(len(att.Data))
		}
		var res protocol.AttachmentGetResult
		err := r.callHost(ctx, protocol.MethodAttachmentGet, protocol.AttachmentGetParams{
			Invocation: invocationOf(ctx), AttachmentID: attachmentID, Offset: offset,
		}, &res)
		if err != nil {
			return nil, fmt.Errorf("failed to fetch attachment %q: %w", attachmentID, err)
		}
		if att == nil {
			att = &hooks.Attachment{ID: res.AttachmentID, Kind: res.Kind, Name: res.Name, MimeType: res.MimeType, Size: res.Size}
			att.Data = make([]byte, 0, max(0, min(res.Size, 1<<30)))
		}
		if res.Offset != offset || (len(res.Data) == 0 && !res.EOF) {
			return nil, fmt.Errorf("failed to fetch attachment %q: the host answered offset %d with %d bytes, expected offset %d", attachmentID, res.Offset, len(res.Data), offset)
		}
		att.Data = append(att.Data, res.Data...)
		if res.EOF {
			att.Size = int64(len(att.Data))
			return att, nil
		}
	}
}

// remoteError maps the host's error codes back to the hooks package's
// sentinel errors, so plugin code checks them the same way built in.
func remoteError(err error) error {
	var re *jsonrpc.Error
	if !errors.As(err, &re) {
		return err
	}
	switch re.Code {
	case protocol.CodeNoService:
		return fmt.Errorf("%w: %s", hooks.ErrNoService, re.Message)
	case protocol.CodeNotFound:
		return fmt.Errorf("%w: %s", hooks.ErrNotFound, re.Message)
	case protocol.CodeTooLarge:
		return fmt.Errorf("%w: %s", hooks.ErrTooLarge, re.Message)
	case protocol.CodeRecursionLimit:
		return fmt.Errorf("%w: %s", hooks.ErrRecursionLimit, re.Message)
	case protocol.CodeDeadline:
		return fmt.Errorf("%w: %s", context.DeadlineExceeded, re.Message)
	}
	return err
}
