package hstest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio/hstest"
)

// encryptedRoom has a's client create an encrypted room with b invited, b's client join it, and
// a's client see b joined, so that what a sends next is encrypted for b's device.
func encryptedRoom(t *testing.T, a, b *hstest.Client) id.RoomID {
	t.Helper()
	room := a.CreateRoom(t, hstest.RoomOptions{Name: "e2ee", Encrypted: true, Invite: []id.UserID{b.UserID}})
	b.SyncUntil(t, room, hstest.Invited, "", 0)
	b.Join(t, room)
	a.WaitMember(t, room, b.UserID)
	return room
}

// assertEncryptedOnServer checks through the server (as u, a member of room) that eventID is
// stored as m.room.encrypted, i.e. the server never saw the text.
func assertEncryptedOnServer(t *testing.T, u *hstest.User, room id.RoomID, eventID id.EventID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var ev *event.Event
	var err error
	for ctx.Err() == nil {
		if ev, err = u.Client.GetEvent(ctx, room, eventID); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("get %s from the server: %v", eventID, err)
	}
	if ev.Type != event.EventEncrypted {
		t.Fatalf("the server stores %s as %s, want %s", eventID, ev.Type.Type, event.EventEncrypted.Type)
	}
	if alg, _ := ev.Content.Raw["algorithm"].(string); alg != string(id.AlgorithmMegolmV1) {
		t.Errorf("%s has algorithm %q, want %q", eventID, alg, id.AlgorithmMegolmV1)
	}
}

// TestClientsExchangeEncryptedMessages has each kind of client talk to the other in an
// encrypted room: a message, a threaded answer and an edit, each decrypted by the other side.
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
			answer := b.Send(t, room, hstest.Outgoing{Body: "answer in thread", ThreadRoot: sent})
			back := a.WaitMessage(t, room, hstest.Match{Sender: bob.UserID, ThreadRoot: sent})
			if back.EventID != answer || back.Body != "answer in thread" || !back.Encrypted {
				t.Fatalf("%s received %+v, want the encrypted answer %s", tc.a, back, answer)
			}

			// An edit: the receiver folds it into the original message.
			edit := a.Edit(t, room, sent, text+" (edited)")
			edited := b.WaitMessage(t, room, hstest.Match{EventID: sent, Edited: true})
			if edited.FinalBody != text+" (edited)" || edited.Body != text || edited.Edits != 1 || edited.LastEditID != edit {
				t.Fatalf("after the edit %s sees %+v, want final text %q from edit %s", tc.b, edited, text+" (edited)", edit)
			}
			assertEncryptedOnServer(t, bob, room, edit)
		})
	}
}
