package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// A restart provisions only what it cannot vouch for: rooms whose
// configuration is unchanged and whose accounts are still joined are
// taken as remembered; a new room, a new agent or invitee in a room, or an
// account that left is provisioned again.
func TestRestartProvisionsOnlyWhatChanged(t *testing.T) {
	e := newEnv(t)
	bob := e.hs.RegisterUser(t, "bob")
	ctx := context.Background()
	base := fmt.Sprintf(`
rooms:
  lobby:
    alias: %[1]s
  side:
    alias: %[2]s
agents:
  helper:
    username: %[3]s
    rooms: [lobby, side]
`, e.localpart("lobby"), e.localpart("side"), e.localpart("helper"))
	changed := fmt.Sprintf(`
rooms:
  lobby:
    alias: %[1]s
    invite: ["%[5]s"]
  side:
    alias: %[2]s
  extra:
    alias: %[4]s
agents:
  helper:
    username: %[3]s
    rooms: [lobby, side, extra]
  other:
    username: %[6]s
    rooms: [side]
`, e.localpart("lobby"), e.localpart("side"), e.localpart("helper"), e.localpart("extra"), bob.UserID, e.localpart("other"))

	steps := []struct {
		name   string
		yaml   string
		before func(r *running) // while the previous run is still up
		fresh  []string
	}{
		{name: "cold start provisions everything", yaml: base, fresh: []string{"room:lobby", "room:side"}},
		{name: "warm restart provisions nothing", yaml: base, fresh: nil},
		{name: "an agent that left is joined again", yaml: base, before: func(r *running) {
			if _, err := r.bot.w().agents["helper"].Client().LeaveRoom(ctx, r.bot.w().rooms["side"]); err != nil {
				t.Fatal(err)
			}
		}, fresh: []string{"room:side"}},
		{name: "new room, new agent in a room, new invitee", yaml: changed,
			fresh: []string{"room:extra", "room:lobby", "room:side"}},
		{name: "warm again", yaml: changed, fresh: nil},
	}
	var rec events
	var r *running
	rooms := map[string]id.RoomID{}
	for _, st := range steps {
		if r != nil {
			if st.before != nil {
				st.before(r)
			}
			r.stop(t)
		}
		r = e.start(e.config(st.yaml), &rec, Options{})
		w := r.bot.w()
		if !slices.Equal(w.fresh, st.fresh) {
			t.Errorf("%s: provisioned %v, want %v", st.name, w.fresh, st.fresh)
		}
		for key, roomID := range w.rooms {
			if old, ok := rooms[key]; ok && old != roomID {
				t.Errorf("%s: room %s is %s, was %s", st.name, key, roomID, old)
			}
			rooms[key] = roomID
		}
		// Whatever was skipped or redone, every account is where the
		// configuration puts it.
		for name, roomIDs := range w.joined {
			var acct interface {
				JoinedRooms(context.Context) ([]id.RoomID, error)
			} = r.bot.router
			if name != "router" {
				acct = w.agents[name]
			}
			joined, err := acct.JoinedRooms(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, roomID := range roomIDs {
				if !slices.Contains(joined, roomID) {
					t.Errorf("%s: %s is not joined to %s", st.name, name, roomID)
				}
			}
		}
	}
	if got := len(r.bot.w().joined["other"]); got != 1 {
		t.Errorf("other is in %d configured rooms, want 1", got)
	}
	m, err := r.bot.router.Membership(ctx, rooms["lobby"], bob.UserID)
	if err != nil || m != event.MembershipInvite {
		t.Errorf("bob's membership in the lobby = %q, %v; want invite", m, err)
	}
}

// A room that cannot be provisioned (here: a private room of someone else,
// which the router may not join) stops the start with an error naming the
// room and its line in config.yaml, also when other rooms are being
// provisioned at the same time.
func TestProvisioningErrorNamesRoomAndLine(t *testing.T) {
	e := newEnv(t)
	bob := e.hs.RegisterUser(t, "bob")
	private, err := bob.Client.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{Preset: "private_chat"})
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	body.WriteString("rooms:\n")
	for i := range 12 {
		fmt.Fprintf(&body, "  r%02d:\n    alias: %s\n", i, e.localpart(fmt.Sprintf("r%02d", i)))
	}
	fmt.Fprintf(&body, "  broken:\n    id: \"%s\"\n", private.RoomID)
	fmt.Fprintf(&body, "agents:\n  helper:\n    username: %s\n    rooms: [r00, broken]\n", e.localpart("helper"))
	cfg := e.config(body.String())
	b, err := New(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Run(context.Background())
	if !errors.Is(err, mautrix.MForbidden) {
		t.Errorf("Run error = %v, want M_FORBIDDEN", err)
	}
	line := cfg.Line("rooms.broken")
	if want := fmt.Sprintf("failed to provision room broken (config.yaml:%d)", line); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run error = %v, want it to contain %q", err, want)
	}
}
