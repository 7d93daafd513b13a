package protocol_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hookroom/hookroom/plugins/process/protocol"
)

func TestDecodeHookInvokeParamsAgreesWithUnmarshal(t *testing.T) {
	for _, in := range []string{
		`{"invocation":7,"hook":"footer","event":"message:before_response","context":{"draft":{"text":"a\"}"}},"deadline_ms":200}`,
		`{"hook":"h\u00e9","context":null,"extra":[1,2]}`,
		`{}`,
	} {
		var want protocol.HookInvokeParams
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		got, err := protocol.DecodeHookInvokeParams(json.RawMessage(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if string(got.Context) == "null" {
			got.Context = nil
		}
		if string(want.Context) == "null" {
			want.Context = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", in, got, want)
		}
	}
	for _, bad := range []string{`[]`, `{"invocation":-1}`, `{"hook":3}`, `{"deadline_ms":"x"}`, `{"context":{}`} {
		if _, err := protocol.DecodeHookInvokeParams(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestDecodeHookInvokeResult(t *testing.T) {
	r, err := protocol.DecodeHookInvokeResult(json.RawMessage(`{"context":{"suppress":true},"other":1}`))
	if err != nil || string(r.Context) != `{"suppress":true}` {
		t.Errorf("got %s, %v", r.Context, err)
	}
	for _, empty := range []string{``, `null`, `{}`} {
		if r, err := protocol.DecodeHookInvokeResult(json.RawMessage(empty)); err != nil || r.Context != nil {
			t.Errorf("%q: got %s, %v", empty, r.Context, err)
		}
	}
}
