package bot

import (
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func TestDispatcherSkipsRedacted(t *testing.T) {
	redacted := syncedMessage(t, `{}`)
	redacted.Unsigned.RedactedBecause = &event.Event{ID: "$r", Type: event.EventRedaction}
	tests := []struct {
		name    string
		ev      *event.Event
		noted   []id.EventID // handleSync saw their redactions
		handled []id.EventID // their redactions were handled
		want    bool
	}{
		{"plain message", syncedMessage(t, `{"msgtype":"m.text","body":"x"}`), nil, nil, false},
		{"redacted in the inbox or on the server", redacted, nil, nil, true},
		{"redaction recorded while queued", syncedMessage(t, `{"msgtype":"m.text","body":"x"}`), []id.EventID{"$m"}, nil, true},
		{"another event's redaction", syncedMessage(t, `{"msgtype":"m.text","body":"x"}`), []id.EventID{"$other"}, nil, false},
		{"redaction already handled", syncedMessage(t, `{"msgtype":"m.text","body":"x"}`), []id.EventID{"$m"}, []id.EventID{"$m"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDispatcher(nil)
			for _, e := range tt.noted {
				d.redacted(e)
			}
			for _, e := range tt.handled {
				d.redactionHandled(e)
			}
			if got := d.skip(tt.ev); got != tt.want {
				t.Errorf("skip = %v, want %v", got, tt.want)
			}
			if d.skip(syncedMessage(t, `{"msgtype":"m.text","body":"x"}`)) {
				t.Error("a note outlived the event it was for")
			}
		})
	}
}
