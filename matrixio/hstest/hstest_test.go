package hstest_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

func TestMain(m *testing.M) { hstest.Main(m) }

// waitForEvent syncs as u until an event with eventID shows up in room's timeline.
func waitForEvent(t *testing.T, u *hstest.User, room id.RoomID, eventID id.EventID) *event.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	since := ""
	for {
		resp, err := u.Client.SyncRequest(ctx, 5000, since, "", false, event.PresenceOffline)
		if err != nil {
			t.Fatalf("sync as %s waiting for %s: %v", u.UserID, eventID, err)
		}
		since = resp.NextBatch
		if joined, ok := resp.Rooms.Join[room]; ok {
			for _, ev := range joined.Timeline.Events {
				if ev.ID == eventID {
					return ev
				}
			}
		}
	}
}

// newRoom creates a room as owner with the other users invited and joins them.
func newRoom(t *testing.T, owner *hstest.User, others ...*hstest.User) id.RoomID {
	t.Helper()
	invite := make([]id.UserID, len(others))
	for i, u := range others {
		invite[i] = u.UserID
	}
	created, err := owner.Client.CreateRoom(t.Context(), &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: invite})
	if err != nil {
		t.Fatalf("create room: %v", err)
	}
	for _, u := range others {
		if _, err := u.Client.JoinRoomByID(t.Context(), created.RoomID); err != nil {
			t.Fatalf("%s joins: %v", u.UserID, err)
		}
	}
	return created.RoomID
}

func TestSharedMessageReachesOtherUsersSync(t *testing.T) {
	t.Parallel()
	srv := hstest.Shared(t)
	alice := srv.RegisterUser(t, "alice")
	bob := srv.RegisterUser(t, "bob")

	if alice.UserID == bob.UserID || alice.DeviceID == "" || alice.AccessToken == "" {
		t.Fatalf("users not distinct or not logged in: %+v / %+v", alice.UserID, bob.UserID)
	}
	if got := alice.UserID.Homeserver(); got != srv.ServerName {
		t.Errorf("alice's server = %q, want %q", got, srv.ServerName)
	}
	who, err := bob.Client.Whoami(t.Context())
	if err != nil || who.UserID != bob.UserID || who.DeviceID != bob.DeviceID {
		t.Fatalf("whoami as bob = %+v, %v; want %s / %s", who, err, bob.UserID, bob.DeviceID)
	}

	room := newRoom(t, alice, bob)
	sent, err := alice.Client.SendText(t.Context(), room, "hello bob")
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	got := waitForEvent(t, bob, room, sent.EventID)
	if got.Sender != alice.UserID {
		t.Errorf("sender = %s, want %s", got.Sender, alice.UserID)
	}
	if body, _ := got.Content.Raw["body"].(string); body != "hello bob" {
		t.Errorf("body = %q, want %q", body, "hello bob")
	}
}

func TestRegisterUserMakesNamesUnique(t *testing.T) {
	t.Parallel()
	srv := hstest.Shared(t)
	a, b := srv.RegisterUser(t, "Same"), srv.RegisterUser(t, "Same")
	if a.UserID == b.UserID {
		t.Fatalf("two registrations of %q gave the same id %s", "Same", a.UserID)
	}
	for _, u := range []*hstest.User{a, b} {
		if !strings.HasPrefix(u.UserID.Localpart(), "same-") {
			t.Errorf("localpart %q does not start with the lowercased name", u.UserID.Localpart())
		}
	}
	// The password works for a second, independent login.
	cli, err := mautrix.NewClient(srv.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Login(t.Context(), &mautrix.ReqLogin{
		Type:       mautrix.AuthTypePassword,
		Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: a.UserID.Localpart()},
		Password:   a.Password,
	})
	if err != nil || resp.UserID != a.UserID || resp.DeviceID == a.DeviceID {
		t.Fatalf("password login = %+v, %v; want %s on a new device", resp, err, a.UserID)
	}
}

func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	srv := hstest.Start(t)
	url, dir := srv.URL, srv.Dir
	alice := srv.RegisterUser(t, "alice")
	room := newRoom(t, alice)
	sent, err := alice.Client.SendText(t.Context(), room, "before restart")
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	// Dendrite stores a sent event asynchronously (its send answers before
	// the room server committed it) and may drop what it had not committed
	// when it stops: restart once the event is readable.
	testkit.Eventually(t, 5*time.Second, "the sent event is readable before the restart", func() bool {
		_, err := alice.Client.GetEvent(t.Context(), room, sent.EventID)
		return err == nil
	})

	srv.Restart(t)

	if srv.URL != url || srv.Dir != dir {
		t.Fatalf("restart moved the server: %s %s -> %s %s", url, dir, srv.URL, srv.Dir)
	}
	// The same access token still works and the history is still there.
	// GET /event can lag a moment behind on Dendrite (more so right after
	// a start), so ask a few times.
	var ev *event.Event
	for range 100 {
		if ev, err = alice.Client.GetEvent(t.Context(), room, sent.EventID); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("get event after restart: %v", err)
	}
	if body, _ := ev.Content.Raw["body"].(string); body != "before restart" {
		t.Errorf("body after restart = %q", body)
	}
	// And the server takes new users.
	bob := srv.RegisterUser(t, "bob")
	if _, err := bob.Client.Whoami(t.Context()); err != nil {
		t.Fatalf("whoami after restart: %v", err)
	}
}

func TestStopIsIdempotent(t *testing.T) {
	t.Parallel()
	srv := hstest.Start(t)
	if err := srv.Stop(); err != nil {
		t.Fatalf("first stop: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second stop should do nothing, got %v", err)
	}
	cli, err := mautrix.NewClient(srv.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := cli.Versions(ctx); err == nil {
		t.Fatal("the stopped server still answers")
	}
}

func TestStopReportsACrash(t *testing.T) {
	t.Parallel()
	srv := hstest.Start(t)
	pidText, err := os.ReadFile(filepath.Join(srv.Dir, "dendrite.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err = srv.Stop()
	if err == nil || !strings.Contains(err.Error(), "exited on its own") {
		t.Fatalf("Stop after a crash = %v, want an error saying it exited on its own", err)
	}
}

func TestNioTakesPart(t *testing.T) {
	t.Parallel()
	srv := hstest.Shared(t)
	bot := srv.RegisterUser(t, "bot")
	human := srv.RegisterUser(t, "human")
	room := newRoom(t, bot, human)
	sent, err := bot.Client.SendText(t.Context(), room, "ping from go")
	if err != nil {
		t.Fatalf("send: %v", err)
	}

	// The nio client logs in on its own, sees the Go client's message, and answers it.
	out := hstest.RunNio(t, `
import asyncio, sys, hsnio

async def main(url, user_id, password, room_id, event_id):
    client = await hsnio.login(url, user_id, password)
    try:
        seen = await hsnio.sync_until(client, lambda r, ev: r == room_id and ev.event_id == event_id)
        if seen is None:
            hsnio.fail("did not see " + event_id)
        resp = await client.room_send(room_id, "m.room.message",
                                      {"msgtype": "m.text", "body": "pong from nio: " + seen.body})
        print(resp.event_id)
    finally:
        await client.close()

asyncio.run(main(*sys.argv[1:]))
`, srv.URL, string(human.UserID), human.Password, string(room), string(sent.EventID))

	reply := id.EventID(strings.TrimSpace(out))
	if !strings.HasPrefix(string(reply), "$") {
		t.Fatalf("nio printed %q, want an event id", out)
	}
	got := waitForEvent(t, bot, room, reply)
	if body, _ := got.Content.Raw["body"].(string); body != "pong from nio: ping from go" || got.Sender != human.UserID {
		t.Errorf("reply = %q from %s", body, got.Sender)
	}
}
