package bot

import (
	"context"
	"errors"
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

func TestTurnIndexStop(t *testing.T) {
	tests := []struct {
		name     string
		running  bool
		target   id.EventID
		viaReply bool
		found    bool
		cause    error // what the turn's context ends with
	}{
		{name: "running, by its message", running: true, target: "$q", found: true, cause: errRedacted},
		{name: "queued, by its message", target: "$q", found: true, cause: errRedacted},
		{name: "running, by its reply", running: true, target: "$reply", viaReply: true, found: true, cause: errRedacted},
		{name: "a reply does not count for a redaction", running: true, target: "$reply", found: false},
		{name: "unknown", running: true, target: "$nope", found: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var x turnIndex
			x.queue("$q", "scope")
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			if tt.running {
				x.start("$q", cancel)
				x.alias("$reply", "$q")
			}
			scope, ok := x.stop(tt.target, errRedacted, tt.viaReply)
			if ok != tt.found || (ok && scope != "scope") {
				t.Fatalf("stop = %q, %v; want found %v", scope, ok, tt.found)
			}
			if !tt.running {
				x.start("$q", cancel) // the queued turn's turn comes
			}
			if got := context.Cause(ctx); !errors.Is(got, tt.cause) || (tt.cause == nil && got != nil) {
				t.Errorf("turn context ends with %v, want %v", got, tt.cause)
			}
			x.remove("$q")
			if _, ok := x.stop("$q", errStopped, true); ok {
				t.Error("a removed turn was found")
			}
		})
	}
}
