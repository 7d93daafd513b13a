package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/tracking"
)

const (
	dmRoom     = id.RoomID("!dm:example.org")
	otherRoom  = id.RoomID("!other:example.org")
	agentUser  = id.UserID("@helper:example.org")
	aliceUser  = id.UserID("@alice:example.org")
	bobUser    = id.UserID("@bob:example.org")
	malloryOut = id.UserID("@mallory:elsewhere.org")
	rssBot     = id.UserID("@rss:example.org")
)

// offlineBot is a Bot on cfg's yaml with a temporary database and no
// homeserver: enough for authorization and the invited-room bookkeeping.
func offlineBot(t *testing.T, yaml string, rows ...tracking.InvitedRoom) *Bot {
	t.Helper()
	cfg, err := config.Parse([]byte("matrix:\n  homeserver: http://localhost:8008\n  server_name: example.org\n"+yaml), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b := &Bot{track: tracking.New(tempSQLite(t))}
	if err := b.track.Upgrade(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.track.RememberInvitedRoom(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.loadInvitedRooms(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.state.Store(&world{cfg: cfg, accounts: map[id.UserID]entity{agentUser: {name: "helper"}}, rooms: map[string]id.RoomID{}})
	return b
}

func TestAuthorizedInInvitedRooms(t *testing.T) {
	dm := tracking.InvitedRoom{RoomID: dmRoom, Account: agentUser, Inviter: aliceUser, IsDirect: true}
	byBot := tracking.InvitedRoom{RoomID: otherRoom, Account: agentUser, Inviter: rssBot}
	tests := []struct {
		name string
		auth string // the authorization section
		bots []id.UserID
		user id.UserID
		room id.RoomID
		want bool
	}{
		{name: "the inviter, allowed by invite_users, in the room it invited to",
			auth: `{invite_users: ["@alice:example.org"]}`, user: aliceUser, room: dmRoom, want: true},
		{name: "the inviter, allowed by a server pattern",
			auth: `{invite_users: ["@*:example.org"]}`, user: aliceUser, room: dmRoom, want: true},
		{name: "the inviter elsewhere",
			auth: `{invite_users: ["@alice:example.org"]}`, user: aliceUser, room: otherRoom},
		{name: "someone else invite_users allows, in alice's room",
			auth: `{invite_users: ["@*:example.org"]}`, user: bobUser, room: dmRoom},
		{name: "the inviter after a reload dropped them from invite_users",
			auth: `{invite_users: ["@bob:example.org"]}`, user: aliceUser, room: dmRoom},
		{name: "the inviter as a global user",
			auth: `{global_users: ["@alice:example.org"]}`, user: aliceUser, room: dmRoom, want: true},
		{name: "room_permissions for the invited room admits more people",
			auth: `{invite_users: ["@alice:example.org"], room_permissions: {"!dm:example.org": ["@bob:example.org"]}}`,
			user: bobUser, room: dmRoom, want: true},
		{name: "room_permissions for the invited room does not shut out the inviter",
			auth: `{invite_users: ["@alice:example.org"], room_permissions: {"!dm:example.org": ["@bob:example.org"]}}`,
			user: aliceUser, room: dmRoom, want: true},
		{name: "default_room_access admits everyone in rooms without an entry",
			auth: `{default_room_access: true}`, user: malloryOut, room: dmRoom, want: true},
		{name: "a stranger",
			auth: `{invite_users: ["@alice:example.org"]}`, user: malloryOut, room: dmRoom},
		{name: "a bot account a pattern matches, in a room it is recorded as inviter of",
			auth: `{invite_users: ["@*:example.org"]}`, bots: []id.UserID{rssBot}, user: rssBot, room: otherRoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := offlineBot(t, "authorization: "+tt.auth+"\n", dm, byBot)
			b.w().cfg.Matrix.BotAccounts = tt.bots
			if got := b.authorized(b.w(), tt.user, tt.room); got != tt.want {
				t.Errorf("authorized(%s, %s) = %v, want %v", tt.user, tt.room, got, tt.want)
			}
		})
	}
}

// memberEvent builds acct's membership event as a sync delivers it.
func memberEvent(t *testing.T, room id.RoomID, sender, target id.UserID, membership event.Membership) *event.Event {
	t.Helper()
	raw := fmt.Sprintf(`{"event_id":"$%s-%s","room_id":%q,"sender":%q,"type":"m.room.member","state_key":%q,"origin_server_ts":1,"content":{"membership":%q}}`,
		membership, sender[1:4], room, sender, target, membership)
	var ev event.Event
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	ev.Type.Class = event.StateEventType
	if err := ev.Content.ParseRaw(ev.Type); err != nil {
		t.Fatal(err)
	}
	return &ev
}

func TestForgetDepartures(t *testing.T) {
	dm := tracking.InvitedRoom{RoomID: dmRoom, Account: agentUser, Inviter: aliceUser}
	tests := []struct {
		name       string
		room       matrixio.RoomEvents
		remembered bool
	}{
		{"the room is in the batch's leave section",
			matrixio.RoomEvents{RoomID: dmRoom, Membership: event.MembershipLeave}, false},
		{"kicked: the account's own leave, sent by someone else",
			matrixio.RoomEvents{RoomID: dmRoom, Membership: event.MembershipLeave, Timeline: []*event.Event{
				memberEvent(t, dmRoom, aliceUser, agentUser, event.MembershipLeave)}}, false},
		{"banned, seen in a joined room's timeline",
			matrixio.RoomEvents{RoomID: dmRoom, Membership: event.MembershipJoin, Timeline: []*event.Event{
				memberEvent(t, dmRoom, aliceUser, agentUser, event.MembershipBan)}}, false},
		{"kicked and joined again within one batch",
			matrixio.RoomEvents{RoomID: dmRoom, Membership: event.MembershipJoin, Timeline: []*event.Event{
				memberEvent(t, dmRoom, aliceUser, agentUser, event.MembershipLeave),
				memberEvent(t, dmRoom, agentUser, agentUser, event.MembershipJoin)}}, true},
		{"someone else left",
			matrixio.RoomEvents{RoomID: dmRoom, Membership: event.MembershipJoin, Timeline: []*event.Event{
				memberEvent(t, dmRoom, bobUser, bobUser, event.MembershipLeave)}}, true},
		{"another room was left",
			matrixio.RoomEvents{RoomID: otherRoom, Membership: event.MembershipLeave}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := offlineBot(t, "", dm)
			ctx := zerolog.Nop().WithContext(context.Background())
			b.forgetDepartures(ctx, agentUser, matrixio.SyncBatch{Rooms: []matrixio.RoomEvents{tt.room}})
			rows, err := b.track.InvitedRooms(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(rows) == 1; got != tt.remembered {
				t.Errorf("in the database: %v, want %v", got, tt.remembered)
			}
			if got := b.invited.has(dmRoom, agentUser); got != tt.remembered {
				t.Errorf("in memory: %v, want %v", got, tt.remembered)
			}
		})
	}
}
