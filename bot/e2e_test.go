package bot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// From an empty homeserver, hookroom creates its accounts and rooms and
// joins them; a restart reuses the same devices and creates nothing twice.
func TestAccountsAndRoomsFromScratch(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(fmt.Sprintf(`
rooms:
  lobby:
    alias: %s
    name: Lobby
agents:
  helper:
    username: %s
    rooms: [lobby]
`, e.localpart("lobby"), e.localpart("helper")))
	var rec events
	r := e.start(cfg, &rec, Options{})
	lobby := r.bot.w().rooms["lobby"]
	if lobby == "" {
		t.Fatal("lobby was not provisioned")
	}
	devices := map[id.UserID]id.DeviceID{}
	for u, ent := range r.bot.w().accounts {
		devices[u] = ent.account.DeviceID()
	}
	agent := r.bot.w().agents["helper"]
	members, err := r.bot.router.JoinedMembers(context.Background(), lobby)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := members[agent.UserID()]; !ok {
		t.Errorf("agent not joined to the lobby: %v", members)
	}
	if got := rec.list("started:"); !slices.Equal(got, []string{"started:router", "started:helper"}) {
		t.Errorf("agent:started fired %v", got)
	}
	r.stop(t)
	if got := rec.list("stopped:"); len(got) != 2 {
		t.Errorf("agent:stopped fired %v", got)
	}

	r2 := e.start(cfg, &rec, Options{})
	if got := r2.bot.w().rooms["lobby"]; got != lobby {
		t.Errorf("after restart lobby is %s, was %s", got, lobby)
	}
	for u, ent := range r2.bot.w().accounts {
		if ent.account.DeviceID() != devices[u] {
			t.Errorf("%s: device %s after restart, was %s", u, ent.account.DeviceID(), devices[u])
		}
	}
	joined, err := r2.bot.router.Client().JoinedRooms(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(joined.JoinedRooms) != 1 {
		t.Errorf("router is in %d rooms after restart, want 1 (no room created twice)", len(joined.JoinedRooms))
	}
}

// createRoom makes a public room owned by a person, inviting the given users.
// barrier sends a message as u into room and waits until message:received
// saw it. A room's events are handled in order, so everything that
// reached the room before it has been handled by then: a barrier proves
// that something did not happen without sleeping.
func barrier(t testing.TB, rec *events, u *hstest.User, room id.RoomID) {
	t.Helper()
	resp, err := u.Client.SendText(context.Background(), room, "barrier")
	if err != nil {
		t.Fatalf("send barrier: %v", err)
	}
	rec.waitFor(t, fmt.Sprintf("msg:%s:%s", room, resp.EventID), 1, 60*time.Second)
}

func createRoom(t testing.TB, u *hstest.User, invite ...id.UserID) id.RoomID {
	t.Helper()
	resp, err := u.Client.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{Preset: "public_chat", Invite: invite})
	if err != nil {
		t.Fatalf("create room: %v", err)
	}
	return resp.RoomID
}

// room:member_joined fires once per room and person, ever: not for people
// present before hookroom first synced, not again after leave and rejoin or
// a restart. The joining person is an independent client (matrix-nio).
func TestMemberJoinedOnce(t *testing.T) {
	e := newEnv(t)
	owner := e.hs.RegisterUser(t, "owner")
	early := e.hs.RegisterUser(t, "early")
	late := e.hs.RegisterUser(t, "late")
	router := e.userID("router")
	room := createRoom(t, owner, router, early.UserID)
	if _, err := early.Client.JoinRoomByID(context.Background(), room); err != nil {
		t.Fatal(err)
	}
	cfg := e.config(fmt.Sprintf(`
rooms:
  club:
    id: "%s"
authorization:
  global_users: ["%s"]
`, room, owner.UserID))
	var rec events
	r := e.start(cfg, &rec, Options{})

	if _, err := owner.Client.InviteUser(context.Background(), room, &mautrix.ReqInviteUser{UserID: late.UserID}); err != nil {
		t.Fatal(err)
	}
	// The late member joins, leaves and joins again with matrix-nio.
	hstest.RunNio(t, `
import asyncio, sys, hsnio
async def main():
    url, user, password, room = sys.argv[1:5]
    c = await hsnio.login(url, user, password)
    for step in ("join", "leave", "join"):
        r = await (c.join(room) if step == "join" else c.room_leave(room))
        if type(r).__name__.endswith("Error"):
            hsnio.fail(f"{step} failed: {r}")
        await asyncio.sleep(0.3)
    await c.close()
asyncio.run(main())
`, e.hs.URL, string(late.UserID), late.Password, string(room))

	want := fmt.Sprintf("joined:%s:%s", room, late.UserID)
	rec.waitFor(t, "left:", 1, 30*time.Second)
	barrier(t, &rec, owner, room) // the rejoin came before it in the room
	if got := rec.list("joined:"); !slices.Equal(got, []string{want}) {
		t.Errorf("member_joined fired %v, want exactly [%s]", got, want)
	}
	if got := rec.list("left:"); !slices.Equal(got, []string{fmt.Sprintf("left:%s:%s", room, late.UserID)}) {
		t.Errorf("member_left fired %v", got)
	}
	r.stop(t)

	// After a restart nothing fires again, and a leave+rejoin while
	// hookroom was down does not count as new either.
	if _, err := late.Client.LeaveRoom(context.Background(), room); err != nil {
		t.Fatal(err)
	}
	if _, err := late.Client.JoinRoomByID(context.Background(), room); err != nil {
		t.Fatal(err)
	}
	e.start(cfg, &rec, Options{})
	barrier(t, &rec, owner, room)
	if got := rec.list("joined:"); len(got) != 1 {
		t.Errorf("after restart member_joined fired %v, want only the first join", got)
	}
}

const (
	childEnv      = "HOOKROOM_TEST_CHILD_CONFIG"
	childSecret   = "HOOKROOM_TEST_CHILD_SECRET"
	childKillMode = "HOOKROOM_TEST_CHILD_KILL"
	// childLog, when set, makes the child log (info, JSON) to stderr.
	childLog = "HOOKROOM_TEST_CHILD_LOG"
)

// runChild runs a bot from the config named by the environment and kills
// itself with SIGKILL right after the first inbound event was written to
// the inbox, before anything is handled.
func runChild() {
	cfgPath := os.Getenv(childEnv)
	secret := os.Getenv(childSecret)
	// SIGTERM stops it in order, as it stops hookroom.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if os.Getenv(childLog) != "" {
		ctx = zerolog.New(os.Stderr).Level(zerolog.InfoLevel).With().Timestamp().Logger().WithContext(ctx)
	}
	cfg, err := loadConfigWithSecret(ctx, cfgPath, secret)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	opts := Options{PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond}
	b, err := New(ctx, cfg, Options{
		PlaceholderDelay: opts.PlaceholderDelay, EditInterval: opts.EditInterval,
		Registry: func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry(nil, hooks.Options{Services: s})
		},
		AfterRecord: func(*event.Event) {
			if os.Getenv(childKillMode) != "" {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Minute)
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	if err := b.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(4)
	}
}

// inboxSizeEnv sets the number of messages of TestInboxExactlyOnce, sent
// into 5 rooms (default 100; the size is 500).
const inboxSizeEnv = "HOOKROOM_INBOX_MESSAGES"

// Messages sent to 5 rooms while hookroom is down (100, or inboxSizeEnv)
// are each handed to the pipeline exactly once after it starts, also when
// the process is killed between writing them to the inbox and handling
// them.
func TestInboxExactlyOnce(t *testing.T) {
	const nRooms = 5
	perRoom := 20
	if v := os.Getenv(inboxSizeEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < nRooms {
			t.Fatalf("%s=%q: want a number of messages, at least %d", inboxSizeEnv, v, nRooms)
		}
		perRoom = n / nRooms
	}
	for _, kill := range []bool{false, true} {
		name := "restart"
		if kill {
			name = "sigkill between inbox and handling"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			owner := e.hs.RegisterUser(t, "owner")
			router := e.userID("router")
			var rooms []id.RoomID
			for range nRooms {
				rooms = append(rooms, createRoom(t, owner, router))
			}
			entries, _ := roomsByID("r", rooms)
			cfg := e.config("rooms:\n" + entries + fmt.Sprintf("authorization:\n  global_users: [\"%s\"]\n", owner.UserID))
			var rec events
			r := e.start(cfg, &rec, Options{})
			r.stop(t)

			// While hookroom is down: perRoom messages into each room.
			sent := map[id.EventID]bool{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, room := range rooms {
				wg.Go(func() {
					sendTexts(t, owner, room, perRoom, func(i int) string { return fmt.Sprintf("message %d", i) }, func(ev id.EventID) {
						mu.Lock()
						sent[ev] = true
						mu.Unlock()
					})
				})
			}
			wg.Wait()

			if kill {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), childEnv+"="+e.yaml, childSecret+"="+e.hs.Secret, childKillMode+"=1")
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if err == nil || !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("child did not die by SIGKILL: %v\n%s", err, out)
				}
			}

			e.start(cfg, &rec, Options{})
			rec.waitFor(t, "msg:", len(sent), 120*time.Second)
			// Events of a room are handled in order: once a later message
			// in every room was handled, a second hand-over of an earlier
			// one would have shown.
			for _, room := range rooms {
				barrier(t, &rec, owner, room)
			}
			got := rec.list("msg:")
			counts := map[string]int{}
			for _, s := range got {
				counts[s[strings.LastIndex(s, ":$")+1:]]++
			}
			for evID := range sent {
				if counts[string(evID)] != 1 {
					t.Errorf("%s handed over %d times", evID, counts[string(evID)])
				}
			}
			if len(got) != len(sent)+len(rooms) {
				t.Errorf("pipeline saw %d messages, %d were sent (and %d barriers)", len(got), len(sent), len(rooms))
			}
		})
	}
}
