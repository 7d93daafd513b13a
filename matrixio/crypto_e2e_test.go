package matrixio_test

import (
	"fmt"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"

	"github.com/hookroom/hookroom/internal/testkit"
)

// Two accounts in a room created encrypted: what one sends (a Markdown
// message, a reaction to it) goes over the wire as m.room.encrypted and
// reaches the other's sink decrypted, marked as decrypted, with its
// relation intact; a restart of the receiving account on the same database
// keeps its device and decrypts the next message.
func TestEncryptedRoomRoundTrip(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	m := newManager(t, testConfig(srv), reopenDB(t, openDB(t)))
	sender := ensure(t, m, matrixio.AccountSpec{Localpart: unique(t, "sender")})
	path := openDB(t)
	receiverMgr := newManager(t, testConfig(srv), reopenDB(t, path))
	receiver := ensure(t, receiverMgr, matrixio.AccountSpec{Localpart: unique(t, "receiver")})
	room, err := sender.CreateRoom(ctx, matrixio.CreateRoomOptions{Encrypted: true, Invite: []id.UserID{receiver.UserID()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receiver.Join(ctx, room.String()); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	stop := run(t, receiver, rec)
	rec.waitFor(t, 30*time.Second, "initial sync", func(b []matrixio.SyncBatch) bool { return len(b) > 0 })
	// The room's encryption state may come a sync batch after the first.
	testkit.Until(t, 30*time.Second, func() (bool, string) {
		enc, err := receiver.IsEncrypted(ctx, room)
		return err == nil && enc, fmt.Sprintf("IsEncrypted = %v, %v; want true", enc, err)
	})
	waitMember(t, sender, room, receiver.UserID())

	msg, err := sender.SendText(ctx, room, "**secret** plan", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reaction, err := sender.React(ctx, room, msg, "👍")
	if err != nil {
		t.Fatal(err)
	}
	for _, evID := range []id.EventID{msg, reaction} {
		// GET /event lags a moment behind the send on Dendrite.
		var raw *event.Event
		testkit.Until(t, 10*time.Second, func() (bool, string) {
			raw, err = receiver.Client().GetEvent(ctx, room, evID)
			return err == nil, fmt.Sprintf("get %s: %v", evID, err)
		})
		if raw.Type != event.EventEncrypted {
			t.Errorf("%s went over the wire as %s, want m.room.encrypted", evID, raw.Type)
		}
	}
	// The room key may come a sync response after the events: then they
	// arrive encrypted and are decrypted late, as the pipeline does
	// (decryptedEvent); those decrypted at sync are marked so.
	for _, evID := range []id.EventID{msg, reaction} {
		ev := decryptedEvent(t, receiverMgr, rec, room, evID)
		synced := timelineEvents(rec.snapshot(), room, func(e *event.Event) bool { return e.ID == evID })[0]
		if synced.Type != event.EventEncrypted && ev.Mautrix.EventSource&event.SourceDecrypted == 0 {
			t.Errorf("%s is not marked decrypted (source %v)", ev.ID, ev.Mautrix.EventSource)
		}
		switch ev.ID {
		case msg:
			if m := ev.Content.AsMessage(); ev.Type != event.EventMessage || m.Body != "**secret** plan" || m.FormattedBody != "<strong>secret</strong> plan" {
				t.Errorf("message arrived as %s %+v", ev.Type, m)
			}
		case reaction:
			rel := ev.Content.AsReaction().GetRelatesTo()
			if ev.Type != event.EventReaction || rel.Key != "👍" || rel.EventID != msg {
				t.Errorf("reaction arrived as %s %+v", ev.Type, rel)
			}
		}
	}

	// Restart the receiver on the same database: same device, new messages decrypt.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	device := receiver.DeviceID()
	againMgr := newManager(t, testConfig(srv), reopenDB(t, path))
	again := ensure(t, againMgr, matrixio.AccountSpec{Localpart: receiver.UserID().Localpart()})
	if again.DeviceID() != device {
		t.Errorf("device after restart = %s, want %s", again.DeviceID(), device)
	}
	rec2 := newRecorder()
	run(t, again, rec2)
	after, err := sender.SendText(ctx, room, "after the restart", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := decryptedEvent(t, againMgr, rec2, room, after); got.Type != event.EventMessage || got.Content.AsMessage().Body != "after the restart" {
		t.Fatalf("the message after the restart reads %s %+v", got.Type.Type, got.Content.Parsed)
	}
}
