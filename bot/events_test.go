package bot

import (
	"encoding/json"
	"testing"

	"maunium.net/go/mautrix/event"
)

// syncedMessage parses content as a sync hands a message event over.
func syncedMessage(t *testing.T, content string) *event.Event {
	t.Helper()
	var ev event.Event
	raw := `{"event_id":"$m","room_id":"!r:hs","sender":"@alice:hs","type":"m.room.message","origin_server_ts":1,"content":` + content + `}`
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	ev.Type.Class = event.MessageEventType
	_ = ev.Content.ParseRaw(ev.Type)
	return &ev
}

func TestMalformedMessage(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"text", `{"msgtype":"m.text","body":"hello"}`, ""},
		{"empty body is still a body", `{"msgtype":"m.text","body":""}`, ""},
		{"notice with html", `{"msgtype":"m.notice","body":"x","format":"org.matrix.custom.html","formatted_body":"<b>x</b>"}`, ""},
		{"number body", `{"msgtype":"m.text","body":42}`, "body is not a string"},
		{"object body", `{"msgtype":"m.text","body":{"not":"text"}}`, "body is not a string"},
		{"null body", `{"msgtype":"m.text","body":null}`, "body is not a string"},
		{"no body", `{"msgtype":"m.text"}`, "body is not a string"},
		{"number msgtype", `{"msgtype":5,"body":"x"}`, "msgtype is not a string"},
		{"no msgtype", `{"body":"x"}`, "msgtype is not a string"},
		{"empty msgtype", `{"msgtype":"","body":"x"}`, "no msgtype"},
		{"redacted", `{}`, "msgtype is not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := syncedMessage(t, tt.content)
			if got := malformedMessage(ev, ev.Content.AsMessage()); got != tt.want {
				t.Errorf("malformedMessage = %q, want %q", got, tt.want)
			}
		})
	}
}
