package protocol_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// TestToolCallRoundTrip: every field of hooks.ToolCall reaches the plugin
// through tool.call, so a field added to hooks.ToolCall but not to the wire
// fails here.
func TestToolCallRoundTrip(t *testing.T) {
	var call hooks.ToolCall
	v := reflect.ValueOf(&call).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(v.Type().Field(i).Name)
		case reflect.Slice: // json.RawMessage
			f.SetBytes([]byte(`{"field":"` + v.Type().Field(i).Name + `"}`))
		default:
			t.Fatalf("hooks.ToolCall.%s: unexpected kind %s", v.Type().Field(i).Name, f.Kind())
		}
	}
	raw, err := json.Marshal(protocol.NewToolCallParams(7, call, "corr", 1500))
	if err != nil {
		t.Fatal(err)
	}
	var got protocol.ToolCallParams
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Call(), call) {
		t.Errorf("Call() = %+v, want %+v", got.Call(), call)
	}
	if got.Invocation != 7 || got.CorrelationID != "corr" || got.DeadlineMS != 1500 {
		t.Errorf("params = %+v", got)
	}
}

// TestToolCallWire pins the bytes of tool.call params (docs/plugin-protocol.md
// §6.3): the fields in this order, the optional ones absent when empty.
func TestToolCallWire(t *testing.T) {
	for _, tc := range []struct {
		call hooks.ToolCall
		corr string
		want string
	}{{
		call: hooks.ToolCall{Tool: "add", Arguments: json.RawMessage(`{"a":1}`)},
		want: `{"invocation":3,"tool":"add","arguments":{"a":1},"deadline_ms":250}`,
	}, {
		call: hooks.ToolCall{
			Tool: "add", Arguments: json.RawMessage(`{}`), Agent: "code", RoomID: "!r:x", ThreadID: "$t",
			RequesterID: "@u:x", SessionID: "s1",
		},
		corr: "c1",
		want: `{"invocation":3,"tool":"add","arguments":{},"agent":"code","room_id":"!r:x","thread_id":"$t",` +
			`"requester_id":"@u:x","session_id":"s1","correlation_id":"c1","deadline_ms":250}`,
	}} {
		raw, err := json.Marshal(protocol.NewToolCallParams(3, tc.call, tc.corr, 250))
		if err != nil {
			t.Fatal(err)
		}
		if string(raw) != tc.want {
			t.Errorf("got  %s\nwant %s", raw, tc.want)
		}
	}
}
