package bot

import (
	"context"
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/matrixio"
)

// configWithMatrix is e.config with more lines (two spaces in) at the end
// of the matrix section.
func (e *testEnv) configWithMatrix(matrixLines, body string) *config.Config {
	e.t.Helper()
	return e.writeConfig(e.configHead() + matrixLines + body)
}

// spaceState reads the space's children (m.space.child state key → via)
// and whether it is a space, as the router sees them.
func spaceState(t *testing.T, router *matrixio.Account, space id.RoomID) (children map[id.RoomID][]any, isSpace bool) {
	t.Helper()
	ctx := context.Background()
	var create event.CreateEventContent
	if err := router.GetState(ctx, space, event.StateCreate, "", &create); err != nil {
		t.Fatal(err)
	}
	events, err := router.GetStateEvents(ctx, space, event.StateSpaceChild)
	if err != nil {
		t.Fatal(err)
	}
	children = map[id.RoomID][]any{}
	for key, evt := range events {
		via, _ := evt.Content.Raw["via"].([]any)
		children[id.RoomID(key)] = via
	}
	return children, create.Type == event.RoomTypeSpace
}

// With matrix.space, the router keeps a root space: created once with its
// alias (a restart finds it again rather than creating another), holding
// every provisioned room as a child (with via) while the rooms name it as
// their parent, the global users invited; a room removed from config.yaml
// has its child event emptied; a reload that changes only matrix.space
// applies it without a restart.
func TestRootSpace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice := e.hs.RegisterUser(t, "alice")
	spaceLines := "  space:\n    name: Team rooms\n    alias: " + e.localpart("space") + "\n"
	setup := agentSetup{
		LLM:        "http://127.0.0.1:9",
		Rooms:      "  main:\n    alias: " + e.localpart("main") + "\n  side:\n    alias: " + e.localpart("side") + "\n",
		AgentRooms: "main, side",
		Admins:     []id.UserID{alice.UserID},
	}
	cfg := e.configWithMatrix(spaceLines, setup.body(e))
	rec := &events{}
	r := e.start(cfg, rec, Options{ConfigOptions: e.configOptions()})
	router := r.bot.router
	alias := id.NewRoomAlias(e.localpart("space"), e.hs.ServerName)
	space, err := router.ResolveAlias(ctx, alias)
	if err != nil {
		t.Fatalf("the space's alias does not resolve: %v", err)
	}
	main, side := r.bot.w().rooms["main"], r.bot.w().rooms["side"]
	children, isSpace := spaceState(t, router, space)
	if !isSpace {
		t.Errorf("%s is not a space (m.room.create type)", space)
	}
	for _, room := range []id.RoomID{main, side} {
		if len(children[room]) == 0 {
			t.Errorf("the space lacks room %s as a child with via: %v", room, children)
		}
		var parent event.SpaceParentEventContent
		if err := router.GetState(ctx, room, event.StateSpaceParent, space.String(), &parent); err != nil || len(parent.Via) == 0 {
			t.Errorf("room %s names no space parent %s: %v %+v", room, space, err, parent)
		}
	}
	if len(children) != 2 {
		t.Errorf("the space has %d children, want 2: %v", len(children), children)
	}
	if m, err := router.Membership(ctx, space, alice.UserID); err != nil || m != event.MembershipInvite {
		t.Errorf("alice's membership in the space is %q (%v), want invite", m, err)
	}
	r.stop(t)

	// A restart finds the space again.
	r = e.start(cfg, rec, Options{ConfigOptions: e.configOptions()})
	if again, err := r.bot.router.ResolveAlias(ctx, alias); err != nil || again != space {
		t.Errorf("after a restart the alias points to %s (%v), want %s", again, err, space)
	}
	if n := countSpaces(t, r.bot.router); n != 1 {
		t.Errorf("the router is in %d spaces after a restart, want 1", n)
	}
	r.stop(t)

	// side removed from config.yaml: its child event is emptied.
	setup.Rooms = "  main:\n    alias: " + e.localpart("main") + "\n"
	setup.AgentRooms = "main"
	cfg = e.configWithMatrix(spaceLines, setup.body(e))
	r = e.start(cfg, rec, Options{ConfigOptions: e.configOptions()})
	children, _ = spaceState(t, r.bot.router, space)
	if via, ok := children[side]; !ok || len(via) != 0 {
		t.Errorf("the removed room's child event has via %v (present %v), want an emptied event", via, ok)
	}
	if len(children[main]) == 0 {
		t.Errorf("the space lost room main: %v", children)
	}
	if got, err := r.bot.router.SpaceChildren(ctx, space); err != nil || !slices.Equal(got, []id.RoomID{main}) {
		t.Errorf("SpaceChildren = %v (%v), want [%s]", got, err, main)
	}
	want := "Root space " + string(alias) + " (`" + string(space) + "`): 1 rooms"
	if report := r.bot.e2eeCommand(ctx, r.bot.w(), nil, true); !strings.Contains(report, want) {
		t.Errorf("!e2ee lacks %q:\n%s", want, report)
	}

	// A reload that changes only matrix.space applies it at once: the
	// other space is made, with the rooms.
	alias2 := id.NewRoomAlias(e.localpart("space2"), e.hs.ServerName)
	e.configWithMatrix("  space:\n    name: Other rooms\n    alias: "+e.localpart("space2")+"\n", setup.body(e))
	if _, err := r.bot.Reload(ctx, false); err != nil {
		t.Fatalf("reload: %v", err)
	}
	space2, err := r.bot.router.ResolveAlias(ctx, alias2)
	if err != nil {
		t.Fatalf("after the reload the new space's alias does not resolve: %v", err)
	}
	if children, isSpace := spaceState(t, r.bot.router, space2); !isSpace || len(children[main]) == 0 {
		t.Errorf("the space made by the reload (space %v) has children %v, want main", isSpace, children)
	}
}

// countSpaces counts the spaces acct is joined to.
func countSpaces(t *testing.T, acct *matrixio.Account) int {
	t.Helper()
	rooms, err := acct.JoinedRooms(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, room := range rooms {
		var create event.CreateEventContent
		if err := acct.GetState(context.Background(), room, event.StateCreate, "", &create); err != nil {
			t.Fatal(err)
		}
		if create.Type == event.RoomTypeSpace {
			n++
		}
	}
	return n
}
