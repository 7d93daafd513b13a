package hstest_test

import (
	"fmt"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"

	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// TestClientsReact has each kind of client react to the other's message in an encrypted room:
// the other side sees the reaction with its sender, target and key, and the server stores it
// as a plain m.reaction, as Element sends it (both libraries leave reactions unencrypted).
func TestClientsReact(t *testing.T) {
	t.Parallel()
	srv := hstest.Shared(t)
	alice, bob := srv.RegisterUser(t, "alice"), srv.RegisterUser(t, "bob")
	// Started together (StartClients), as the bot's end-to-end tests start their people.
	cs := srv.StartClients(t, hstest.ClientSpec{Kind: hstest.Nio, User: alice}, hstest.ClientSpec{Kind: hstest.JS, User: bob})
	n, j := cs[0], cs[1]
	if n.Kind != hstest.Nio || n.UserID != alice.UserID || j.Kind != hstest.JS || j.UserID != bob.UserID {
		t.Fatalf("StartClients returned %s/%s and %s/%s, want nio/%s and js/%s", n.Kind, n.UserID, j.Kind, j.UserID, alice.UserID, bob.UserID)
	}
	room := encryptedRoom(t, n, j)
	j.WaitMember(t, room, alice.UserID)
	for _, tc := range []struct {
		from, to *hstest.Client
		key      string
	}{{n, j, "✅"}, {j, n, "👍"}} {
		t.Run(fmt.Sprintf("%s_to_%s", tc.from.Kind, tc.to.Kind), func(t *testing.T) {
			msg := tc.to.SendText(t, room, "react to this, "+string(tc.from.Kind))
			tc.from.WaitMessage(t, room, hstest.Match{EventID: msg})
			sent := tc.from.React(t, room, msg, tc.key)
			if sent == "" {
				t.Fatal("React returned no event id")
			}
			got := tc.to.WaitReaction(t, room, hstest.ReactionMatch{Target: msg})
			want := hstest.Reaction{RoomID: room, EventID: sent, Sender: tc.from.UserID, Target: msg, Key: tc.key}
			if got != want {
				t.Errorf("%s saw %+v, want %+v", tc.to.Kind, got, want)
			}
			// The sender's own client sees it too (its sync echoes it).
			if own := tc.from.WaitReaction(t, room, hstest.ReactionMatch{Sender: tc.from.UserID, Key: tc.key}); own.EventID != sent {
				t.Errorf("%s's own reaction seen as %+v, want %s", tc.from.Kind, own, sent)
			}
			u := alice
			if tc.from == j {
				u = bob
			}
			var ev *event.Event
			testkit.Until(t, 10*time.Second, func() (bool, string) {
				var err error
				ev, err = u.Client.GetEvent(t.Context(), room, sent)
				return err == nil, fmt.Sprintf("get %s from the server: %v", sent, err)
			})
			if ev.Type != event.EventReaction {
				t.Errorf("the server stores the reaction as %s, want %s (what the client library sends)", ev.Type.Type, event.EventReaction.Type)
			}
		})
	}
}
