package bot

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
	"github.com/hookroom/hookroom/tracking"
)

// membership reads user's membership in room as u sees it ("" if none).
func membership(u *hstest.User, room id.RoomID, user id.UserID) event.Membership {
	var m event.MemberEventContent
	if err := u.Client.StateEvent(context.Background(), room, event.StateMember, user.String(), &m); err != nil {
		return ""
	}
	return m.Membership
}

// createDM makes a direct-message room of u (is_direct; preset
// private_chat, so that u may kick) inviting user.
func createDM(t testing.TB, u *hstest.User, user id.UserID) id.RoomID {
	t.Helper()
	resp, err := u.Client.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{
		Preset: "private_chat", IsDirect: true, Invite: []id.UserID{user},
	})
	if err != nil {
		t.Fatalf("create DM: %v", err)
	}
	return resp.RoomID
}

// dmEnv is hookroom with one agent and no configured rooms; alice may
// invite it (authorization.invite_users, not a global user), mallory may not.
func newDMEnv(t *testing.T) (*turnEnv, *config.Config, Options) {
	e := &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}
	e.person = e.hs.RegisterUser(t, "alice")
	e.cfg = fmt.Sprintf(`models:
  agent:
    provider: openai
    base_url: %s
    model: agent-model
agents:
  helper:
    username: %s
    model: agent
authorization:
  invite_users: ["%s"]
  default_room_access: false
`, e.llm.URL, e.localpart("helper"), e.person.UserID)
	cfg := e.config(e.cfg)
	opts := e.turnOptions()
	e.bot = e.start(cfg, e.rec, opts)
	return e, cfg, opts
}

// rememberedDM reports the database row of the agent's invited room.
func rememberedDM(t testing.TB, b *Bot, room id.RoomID, agent id.UserID) (tracking.InvitedRoom, bool) {
	t.Helper()
	rows, err := b.track.InvitedRooms(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.RoomID == room && r.Account == agent {
			return r, true
		}
	}
	return tracking.InvitedRoom{}, false
}

// A person allowed by invite_users starts a direct message with an agent
// that config.yaml puts in no room: the agent joins and answers without
// being mentioned, keeps doing so after a restart and a reload, and
// forgets the room when it is kicked. Member events there behave as in
// configured rooms.
func TestDirectMessageWithAnAgent(t *testing.T) {
	e, cfg, opts := newDMEnv(t)
	ctx := context.Background()
	helper := e.userID("helper")
	e.llm.Script(llmtest.Text("Hi Alice, how can I help?"), llmtest.Text("Still here."), llmtest.Text("Reloaded and here."))

	// As clients do, the first line follows the invite at once, whether or
	// not the agent joined yet. No mention: the only agent answers.
	e.room = createDM(t, e.person, helper)
	q := e.say("hello there", "")
	if got := e.waitTerminal(1); got[0] != "after:Hi Alice, how can I help?" {
		t.Fatalf("terminal %v", got)
	}
	if m := membership(e.person, e.room, helper); m != event.MembershipJoin {
		t.Fatalf("agent membership in the DM: %q", m)
	}
	row, ok := rememberedDM(t, e.bot.bot, e.room, helper)
	if !ok || row.Inviter != e.person.UserID || !row.IsDirect {
		t.Fatalf("DM not remembered as a direct room of alice: %+v, %v", row, ok)
	}
	_, ev := e.waitVisibleText(e.results[0].EventID, "Hi Alice, how can I help?")
	if ev.Sender != helper || ev.RoomID != e.room {
		t.Errorf("reply from %s in %s, want the agent's answer in the DM", ev.Sender, ev.RoomID)
	}
	if rel := ev.Content.AsMessage().RelatesTo; rel == nil || rel.EventID != q {
		t.Errorf("reply relation %+v, want the thread of %s", rel, q)
	}

	// Member events in a room only the agent is in: alice, present when
	// the agent first synced the room, is not "new"; bob is, once.
	bob := e.hs.RegisterUser(t, "bob")
	if _, err := e.person.Client.InviteUser(ctx, e.room, &mautrix.ReqInviteUser{UserID: bob.UserID}); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Client.JoinRoomByID(ctx, e.room); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Client.LeaveRoom(ctx, e.room); err != nil {
		t.Fatal(err)
	}
	e.rec.waitFor(t, "left:"+string(e.room), 1, 30*time.Second)
	// Events of a room are handled in order: the leave came last.
	if got := e.rec.list("joined:" + string(e.room)); !slices.Equal(got, []string{fmt.Sprintf("joined:%s:%s", e.room, bob.UserID)}) {
		t.Errorf("member_joined in the DM fired %v, want only bob", got)
	}
	if got := e.rec.list("left:" + string(e.room)); !slices.Equal(got, []string{fmt.Sprintf("left:%s:%s", e.room, bob.UserID)}) {
		t.Errorf("member_left in the DM fired %v, want bob", got)
	}

	// A restart on the same database: the DM is still served.
	e.bot.stop(t)
	e.bot = e.start(cfg, e.rec, opts)
	e.say("are you still there?", "")
	if got := e.waitTerminal(2); got[1] != "after:Still here." {
		t.Fatalf("after restart: terminal %v", got)
	}

	// A reload that rebuilds the agents and rooms does not forget the DM.
	body := strings.Replace(e.cfg, "    model: agent\n", "    model: agent\n    role: helps in DMs\n", 1)
	cur, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.yaml, []byte(strings.Replace(string(cur), e.cfg, body, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := e.bot.bot.Reload(ctx, false)
	if err != nil || !slices.Equal(rep.Config.AgentsChanged, []string{"helper"}) {
		t.Fatalf("reload: %+v, %v", rep.Config, err)
	}
	e.say("and now?", "")
	if got := e.waitTerminal(3); got[2] != "after:Reloaded and here." {
		t.Fatalf("after reload: terminal %v", got)
	}

	// Kicked: the room is forgotten, in memory and in the database.
	if _, err := e.person.Client.KickUser(ctx, e.room, &mautrix.ReqKickUser{UserID: helper, Reason: "done"}); err != nil {
		t.Fatal(err)
	}
	b := e.bot.bot
	testkit.Eventually(t, 30*time.Second, "the kicked agent forgot the DM", func() bool {
		_, remembered := rememberedDM(t, b, e.room, helper)
		return !remembered && !b.invited.has(e.room, helper)
	})
	if got := b.agentsOf(b.w(), e.room); len(got) != 0 {
		t.Errorf("agents in the DM after the kick: %v", got)
	}
	if b.authorized(b.w(), e.person.UserID, e.room) {
		t.Error("alice is still authorized in a room hookroom left")
	}
	if n := e.llm.Count(); n != 3 {
		t.Errorf("the model was asked %d times, want 3", n)
	}
}

// Invites from people authorization does not allow are declined (the
// agent leaves the room instead of letting the invite sit pending), and
// nothing is remembered; an allowed person's invite afterwards is accepted
// by the same sync loop. In a room with a past, what was said before the
// invite is not answered.
func TestInviteFromUnauthorizedPersonIsDeclined(t *testing.T) {
	e, _, _ := newDMEnv(t)
	helper := e.userID("helper")
	mallory := e.hs.RegisterUser(t, "mallory")

	room := createDM(t, mallory, helper)
	testkit.Eventually(t, 30*time.Second, "the agent declined mallory's invite", func() bool {
		return membership(mallory, room, helper) == event.MembershipLeave
	})
	if _, ok := rememberedDM(t, e.bot.bot, room, helper); ok {
		t.Error("a declined room is remembered")
	}
	if e.bot.bot.authorized(e.bot.bot.w(), mallory.UserID, room) {
		t.Error("mallory is authorized in the room she invited the agent to")
	}

	// Barrier: alice's invite, handed over after mallory's, is accepted.
	ctx := context.Background()
	e.room = createRoom(t, e.person)
	e.say("old news: nobody should answer this", "")
	if _, err := e.person.Client.InviteUser(ctx, e.room, &mautrix.ReqInviteUser{UserID: helper}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the agent joined alice's room", func() bool {
		return membership(e.person, e.room, helper) == event.MembershipJoin
	})
	// The room is remembered right after the join returns: wait for it.
	testkit.Eventually(t, 10*time.Second, "alice's room is remembered", func() bool {
		return len(e.bot.bot.invited.all()) > 0
	})
	if got := e.bot.bot.invited.all(); len(got) != 1 || got[0].RoomID != e.room || got[0].IsDirect {
		t.Errorf("invited rooms %+v, want only alice's room, not direct", got)
	}
	// Events of a room are handled in order: once the fresh question is
	// answered, an answer to the old one would have come first.
	e.llm.Script(llmtest.Text("Fresh answer."))
	e.say("a fresh question", "")
	if got := e.waitTerminal(1); len(got) != 1 || got[0] != "after:Fresh answer." {
		t.Fatalf("terminal %v", got)
	}
	if n := e.llm.Count(); n != 1 {
		t.Errorf("the model was asked %d times, want once", n)
	}
	if prompt := string(e.llm.LastRequest(t).Raw); !strings.Contains(prompt, "a fresh question") || strings.Contains(prompt, "old news") {
		t.Errorf("the prompt should hold the fresh question and not the room's past: %s", prompt)
	}
}
