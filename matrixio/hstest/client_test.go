package hstest_test

import (
	"fmt"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio/hstest"

	"github.com/hookroom/hookroom/internal/testkit"
)

// encryptedRoom has a's client create an encrypted room with b invited, b's client join it, and
// a's client see b joined, so that what a sends next is encrypted for b's device.
func encryptedRoom(t *testing.T, a, b *hstest.Client) id.RoomID {
	t.Helper()
	room := a.CreateRoom(t, hstest.RoomOptions{Name: "e2ee", Encrypted: true, Invite: []id.UserID{b.UserID}})
	b.SyncUntil(t, room, hstest.UntilInvited, "", 0)
	b.Join(t, room)
	a.WaitMember(t, room, b.UserID)
	return room
}

// assertEncryptedOnServer checks through the server (as u, a member of room) that eventID is
// stored as m.room.encrypted, i.e. the server never saw the text.
func assertEncryptedOnServer(t *testing.T, u *hstest.User, room id.RoomID, eventID id.EventID) {
	t.Helper()
	var ev *event.Event
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		var err error
		ev, err = u.Client.GetEvent(t.Context(), room, eventID)
		return err == nil, fmt.Sprintf("get %s from the server: %v", eventID, err)
	})
	if ev.Type != event.EventEncrypted {
		t.Fatalf("the server stores %s as %s, want %s", eventID, ev.Type.Type, event.EventEncrypted.Type)
	}
	if alg, _ := ev.Content.Raw["algorithm"].(string); alg != string(id.AlgorithmMegolmV1) {
		t.Errorf("%s has algorithm %q, want %q", eventID, alg, id.AlgorithmMegolmV1)
	}
}

// TestClientsExchangeEncryptedMessages has each kind of client talk to the other in an
// encrypted room: a message, a threaded answer and an edit, each decrypted by the other side,
// and a redaction.
func TestClientsExchangeEncryptedMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ a, b hstest.ClientKind }{
		{hstest.Nio, hstest.JS},
		{hstest.JS, hstest.Nio},
	} {
		t.Run(fmt.Sprintf("%s_to_%s", tc.a, tc.b), func(t *testing.T) {
			t.Parallel()
			srv := hstest.Shared(t)
			alice, bob := srv.RegisterUser(t, "alice"), srv.RegisterUser(t, "bob")
			a := srv.StartClient(t, tc.a, alice, hstest.ClientOptions{})
			b := srv.StartClient(t, tc.b, bob, hstest.ClientOptions{})
			room := encryptedRoom(t, a, b)

			text := fmt.Sprintf("hello from %s to %s", tc.a, tc.b)
			sent := a.SendText(t, room, text)
			got := b.WaitMessage(t, room, hstest.Match{Sender: alice.UserID, EventID: sent})
			if got.Body != text || !got.Encrypted || got.Undecryptable || got.History {
				t.Fatalf("%s received %+v, want the encrypted text %q", tc.b, got, text)
			}
			assertEncryptedOnServer(t, bob, room, sent)

			// The other way round, in a thread on the first message.
			// Without trusting alice's device, bob's client still encrypts for it.
			b.Trust(t, hstest.TrustNone)
			answer := b.Send(t, room, hstest.Outgoing{Body: "answer in thread", ThreadRoot: sent})
			back := a.WaitMessage(t, room, hstest.Match{Sender: bob.UserID, ThreadRoot: sent})
			if back.EventID != answer || back.Body != "answer in thread" || !back.Encrypted {
				t.Fatalf("%s received %+v, want the encrypted answer %s", tc.a, back, answer)
			}

			// After: the next message from alice after bob's answer, not her older one.
			more := a.SendText(t, room, "one more")
			if next := b.WaitMessage(t, room, hstest.Match{Sender: alice.UserID, After: answer}); next.EventID != more {
				t.Fatalf("%s's next message after %s is %+v, want %s", tc.a, answer, next, more)
			}

			// An edit: the receiver folds it into the original message.
			edit := a.Edit(t, room, sent, text+" (edited)")
			edited := b.WaitMessage(t, room, hstest.Match{EventID: sent, Edited: true})
			if edited.FinalBody != text+" (edited)" || edited.Body != text || edited.Edits != 1 || edited.LastEditID != edit {
				t.Fatalf("after the edit %s sees %+v, want final text %q from edit %s", tc.b, edited, text+" (edited)", edit)
			}
			assertEncryptedOnServer(t, bob, room, edit)

			// A redaction of the answer reaches its author's client.
			a.Redact(t, room, answer, "test")
			if gone := b.WaitMessage(t, room, hstest.Match{EventID: answer, Redacted: true}); !gone.Redacted || gone.Body != "" {
				t.Fatalf("after the redaction %s sees %+v", tc.b, gone)
			}
		})
	}
}

// TestClientRestartKeepsDevice closes a client and starts it again on the same store: it is the
// same device with the same keys, it decrypts what was sent while it was down, and what is sent
// after.
func TestClientRestartKeepsDevice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ restarted, other hstest.ClientKind }{
		{hstest.Nio, hstest.JS},
		{hstest.JS, hstest.Nio},
	} {
		t.Run(string(tc.restarted), func(t *testing.T) {
			t.Parallel()
			srv := hstest.Shared(t)
			alice, bob := srv.RegisterUser(t, "alice"), srv.RegisterUser(t, "bob")
			a := srv.StartClient(t, tc.other, alice, hstest.ClientOptions{})
			store := t.TempDir()
			b := srv.StartClient(t, tc.restarted, bob, hstest.ClientOptions{StoreDir: store, DeviceID: "PHONE"})
			if b.Restored || b.DeviceID != "PHONE" {
				t.Fatalf("the first start in an empty store is device %s (restored %v), want a new device PHONE", b.DeviceID, b.Restored)
			}
			room := encryptedRoom(t, a, b)
			first := a.SendText(t, room, "before the restart")
			b.WaitMessage(t, room, hstest.Match{EventID: first})

			b.Close(t)
			b.Close(t) // a second Close does nothing
			// Sent while bob's client is down: the room key waits for the device on the server.
			// (The session alice's client shares with bob's device stays the same.)
			down := a.SendText(t, room, "while you were away")

			b2 := srv.StartClient(t, tc.restarted, bob, hstest.ClientOptions{StoreDir: store})
			if !b2.Restored || b2.DeviceID != b.DeviceID || b2.Ed25519 != b.Ed25519 || b2.Curve25519 != b.Curve25519 {
				t.Fatalf("restarted client is %s (ed25519 %s, restored %v), want device %s with ed25519 %s",
					b2.DeviceID, b2.Ed25519, b2.Restored, b.DeviceID, b.Ed25519)
			}
			got := b2.WaitMessage(t, room, hstest.Match{EventID: down})
			if got.Body != "while you were away" || !got.Encrypted {
				t.Fatalf("after the restart %+v, want the encrypted message sent while down", got)
			}
			after := a.SendText(t, room, "after the restart")
			if got := b2.WaitMessage(t, room, hstest.Match{EventID: after}); got.Body != "after the restart" {
				t.Fatalf("after the restart %+v", got)
			}
			// And the restarted device can still send to the other side.
			reply := b2.SendText(t, room, "back again")
			if got := a.WaitMessage(t, room, hstest.Match{EventID: reply}); got.Body != "back again" || !got.Encrypted {
				t.Fatalf("%s received %+v from the restarted device", tc.other, got)
			}
		})
	}
}

// TestSecondDeviceReadsNewMessages logs a user in on a second device while the room is in use:
// the new device decrypts what is sent after it logged in and reports what came before as
// undecryptable history instead of skipping it.
func TestSecondDeviceReadsNewMessages(t *testing.T) {
	t.Parallel()
	// Each stack once as the sender that must share the room key with the new device, and
	// once as the new device.
	for _, tc := range []struct{ sender, first, second hstest.ClientKind }{
		{hstest.Nio, hstest.JS, hstest.JS},
		{hstest.JS, hstest.Nio, hstest.Nio},
	} {
		t.Run(fmt.Sprintf("%s_to_%s_then_%s", tc.sender, tc.first, tc.second), func(t *testing.T) {
			t.Parallel()
			srv := hstest.Shared(t)
			alice, bob := srv.RegisterUser(t, "alice"), srv.RegisterUser(t, "bob")
			a := srv.StartClient(t, tc.sender, alice, hstest.ClientOptions{})
			b1 := srv.StartClient(t, tc.first, bob, hstest.ClientOptions{})
			room := encryptedRoom(t, a, b1)
			old := a.SendText(t, room, "before the second device")
			b1.WaitMessage(t, room, hstest.Match{EventID: old})

			b2 := srv.StartClient(t, tc.second, bob, hstest.ClientOptions{})
			if b2.DeviceID == b1.DeviceID {
				t.Fatalf("the second login reused device %s", b1.DeviceID)
			}
			a.WaitDevice(t, bob.UserID, b2.DeviceID)
			fresh := a.SendText(t, room, "for both devices")
			for _, b := range []*hstest.Client{b1, b2} {
				got := b.WaitMessage(t, room, hstest.Match{Sender: alice.UserID, Contains: "both"})
				if got.EventID != fresh || got.Body != "for both devices" || !got.Encrypted {
					t.Fatalf("device %s received %+v, want the encrypted %s", b.DeviceID, got, fresh)
				}
			}
			// The message from before is history for the new device, and it has no key for it.
			past := b2.WaitMessage(t, room, hstest.Match{EventID: old, AllowUndecryptable: true})
			if !past.Undecryptable || !past.History || past.Body != "" || past.DecryptError == "" {
				t.Fatalf("the second device got %+v for the message from before its login, want it undecryptable history", past)
			}
		})
	}
}

// TestClientsExchangeEncryptedImages sends an image as an encrypted attachment each way; the
// receiver downloads and decrypts the same bytes.
func TestClientsExchangeEncryptedImages(t *testing.T) {
	t.Parallel()
	srv := hstest.Shared(t)
	alice, bob := srv.RegisterUser(t, "alice"), srv.RegisterUser(t, "bob")
	n := srv.StartClient(t, hstest.Nio, alice, hstest.ClientOptions{})
	j := srv.StartClient(t, hstest.JS, bob, hstest.ClientOptions{})
	room := encryptedRoom(t, n, j)
	for i, tc := range []struct {
		from, to *hstest.Client
	}{{n, j}, {j, n}} {
		data := []byte(fmt.Sprintf("\x89PNG not really an image %d from %s", i, tc.from.Kind))
		sent, uri := tc.from.SendImage(t, room, "pic.png", "image/png", data)
		got := tc.to.WaitMessage(t, room, hstest.Match{EventID: sent})
		if got.MsgType != "m.image" || !got.Encrypted || !got.MediaEncrypted || got.MediaURL != string(uri) || got.Body != "pic.png" {
			t.Fatalf("%s received %+v, want an encrypted m.image with an encrypted attachment at %s", tc.to.Kind, got, uri)
		}
		back, mimetype := tc.to.Download(t, room, sent)
		if string(back) != string(data) || mimetype != "image/png" {
			t.Fatalf("%s downloaded %q (%s), want %q (image/png)", tc.to.Kind, back, mimetype, data)
		}
	}
}
