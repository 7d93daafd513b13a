package matrixio

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func TestFormatSAS(t *testing.T) {
	tests := []struct {
		name         string
		emojis       []rune
		descriptions []string
		decimals     []int
		want         string
	}{
		{"both", []rune{'🐶', '🔑'}, []string{"Dog", "Key"}, []int{1234, 5678, 9012}, "emoji 🐶 Dog, 🔑 Key; numbers 1234 5678 9012"},
		{"emoji only", []rune{'🐶'}, []string{"Dog"}, nil, "emoji 🐶 Dog"},
		{"decimals only", nil, nil, []int{1, 2, 3}, "numbers 1 2 3"},
		{"missing name", []rune{'🐶', '🔑'}, []string{"Dog"}, nil, "emoji 🐶 Dog, 🔑"},
		{"nothing", nil, nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatSAS(tt.emojis, tt.descriptions, tt.decimals); got != tt.want {
				t.Errorf("FormatSAS = %q, want %q", got, tt.want)
			}
		})
	}
}

// roomEvent builds a timeline event of type typ with content parsed.
func roomEvent(t *testing.T, evtID id.EventID, sender id.UserID, typ event.Type, raw map[string]any) *event.Event {
	t.Helper()
	typ.Class = event.MessageEventType
	data, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	evt := &event.Event{ID: evtID, RoomID: "!room:example.org", Sender: sender, Type: typ, Content: event.Content{Raw: raw, VeryRaw: data}}
	if err := evt.Content.ParseRaw(typ); err != nil {
		t.Fatal(err)
	}
	return evt
}

func TestVerificationEvents(t *testing.T) {
	request := map[string]any{"msgtype": "m.key.verification.request", "body": "verify me", "to": "@agent:example.org", "from_device": "D", "methods": []any{"m.sas.v1"}}
	start := map[string]any{"from_device": "D", "method": "m.sas.v1", "m.relates_to": map[string]any{"rel_type": "m.reference", "event_id": "$req"}}
	tests := []struct {
		name      string
		evt       *event.Event
		isRequest bool
		isVerify  bool
		txnID     id.EventID // the id the helper sees
	}{
		{"request", roomEvent(t, "$req", "@op:example.org", event.EventMessage, request), true, true, "$req"},
		{"start relates to the request", roomEvent(t, "$start", "@op:example.org", event.InRoomVerificationStart, start), false, true, "$req"},
		{"text message", roomEvent(t, "$text", "@op:example.org", event.EventMessage, map[string]any{"msgtype": "m.text", "body": "hi"}), false, false, "$text"},
		{"reaction", roomEvent(t, "$r", "@op:example.org", event.EventReaction, map[string]any{}), false, false, "$r"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isVerificationRequest(tt.evt); got != tt.isRequest {
				t.Errorf("isVerificationRequest = %v, want %v", got, tt.isRequest)
			}
			if got := isVerificationEvent(tt.evt); got != tt.isVerify {
				t.Errorf("isVerificationEvent = %v, want %v", got, tt.isVerify)
			}
			if tt.isVerify {
				if got := inRoomTransaction(tt.evt).ID; got != tt.txnID {
					t.Errorf("inRoomTransaction id = %s, want %s", got, tt.txnID)
				}
			}
		})
	}
}

// With verification on, an in-room request is taken out of the batch (it
// is not a message for an agent); other events, and everything when
// verification is off, stay. The dispatch itself needs a crypto helper,
// which this account lacks: the request goes unanswered (logged).
func TestHandleVerificationFiltersRequests(t *testing.T) {
	request := map[string]any{"msgtype": "m.key.verification.request", "body": "verify me", "to": "@agent:example.org", "from_device": "D", "methods": []any{"m.sas.v1"}}
	for _, on := range []bool{false, true} {
		m := &Manager{}
		if on {
			m.SetVerification(&Verification{Decide: func(id.UserID) (VerifyDecision, string) { return VerifyAccept, "" }})
		}
		a := &Account{m: m, userID: "@agent:example.org", client: &mautrix.Client{}}
		batch := SyncBatch{Rooms: []RoomEvents{{RoomID: "!room:example.org", Timeline: []*event.Event{
			roomEvent(t, "$req", "@op:example.org", event.EventMessage, request),
			roomEvent(t, "$text", "@op:example.org", event.EventMessage, map[string]any{"msgtype": "m.text", "body": "hi"}),
		}}}}
		a.handleVerification(context.Background(), &mautrix.RespSync{}, &batch)
		want := 2
		if on {
			want = 1
		}
		if got := len(batch.Rooms[0].Timeline); got != want {
			t.Errorf("verification on=%v: %d events left, want %d", on, got, want)
		}
		if on && batch.Rooms[0].Timeline[0].ID != "$text" {
			t.Errorf("the text message was dropped instead of the request")
		}
		m.SetVerification(nil)
	}
}

// Every account in a room sees every verification event there; only the
// requested account's and its own transactions' events are handed on.
func TestVerificationEventsFor(t *testing.T) {
	const agent, router = id.UserID("@agent:example.org"), id.UserID("@router:example.org")
	request := map[string]any{"msgtype": "m.key.verification.request", "body": "verify me", "to": string(agent), "from_device": "D", "methods": []any{"m.sas.v1"}}
	ready := map[string]any{"from_device": "D", "methods": []any{"m.sas.v1"}, "m.relates_to": map[string]any{"rel_type": "m.reference", "event_id": "$req"}}
	other := map[string]any{"from_device": "D", "methods": []any{"m.sas.v1"}, "m.relates_to": map[string]any{"rel_type": "m.reference", "event_id": "$elsewhere"}}
	toDevice := &event.Event{Sender: "@op:example.org", Type: event.ToDeviceVerificationRequest}
	events := []*event.Event{
		roomEvent(t, "$req", "@op:example.org", event.EventMessage, request),
		roomEvent(t, "$ready", "@op:example.org", event.InRoomVerificationReady, ready),
		roomEvent(t, "$other", "@op:example.org", event.InRoomVerificationReady, other),
		toDevice,
	}
	knowsReq := func(txn id.VerificationTransactionID) bool { return txn == "$req" }
	tests := []struct {
		name  string
		self  id.UserID
		known func(id.VerificationTransactionID) bool
		want  []id.EventID
	}{
		{"the requested account, transaction known", agent, knowsReq, []id.EventID{"$req", "$ready", ""}},
		{"the requested account, nothing known yet", agent, nil, []id.EventID{"$req", ""}},
		{"another account in the room", router, nil, []id.EventID{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []id.EventID
			for _, evt := range verificationEventsFor(tt.self, events, tt.known) {
				got = append(got, evt.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("verificationEventsFor = %v, want %v", got, tt.want)
			}
		})
	}
}
