package protocol

import (
	"encoding/json"
	"fmt"

	"github.com/hookroom/hookroom/plugins/process/internal/jsonscan"
)

// DecodeHookInvokeParams decodes hook.invoke params. It does what
// json.Unmarshal does, but leaves the context a sub-slice of raw without
// scanning it twice: the context is most of the message, and its receiver
// decodes it once more into the event's type.
func DecodeHookInvokeParams(raw json.RawMessage) (HookInvokeParams, error) {
	var p HookInvokeParams
	err := jsonscan.Object(raw, func(key string, v []byte) error {
		var err error
		switch key {
		case "invocation":
			p.Invocation, err = jsonscan.Uint(v)
		case "hook":
			p.Hook, err = jsonscan.String(v)
		case "event":
			p.Event, err = jsonscan.String(v)
		case "context":
			p.Context = v
		case "deadline_ms":
			p.DeadlineMS, err = jsonscan.Int(v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		return nil
	})
	if err != nil {
		return HookInvokeParams{}, fmt.Errorf("failed to decode hook.invoke params: %w", err)
	}
	return p, nil
}

// DecodeHookInvokeResult decodes a hook.invoke result the same way.
func DecodeHookInvokeResult(raw json.RawMessage) (HookInvokeResult, error) {
	var r HookInvokeResult
	if jsonscan.IsNull(raw) {
		return r, nil
	}
	err := jsonscan.Object(raw, func(key string, v []byte) error {
		if key == "context" {
			r.Context = v
		}
		return nil
	})
	if err != nil {
		return HookInvokeResult{}, fmt.Errorf("failed to decode hook.invoke result: %w", err)
	}
	return r, nil
}
