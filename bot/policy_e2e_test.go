package bot

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// messagesFrom returns the texts of sender's messages in room, as u sees
// them, oldest first.
func messagesFrom(t testing.TB, u *hstest.User, room id.RoomID, sender id.UserID) []string {
	t.Helper()
	resp, err := u.Client.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, nil, 100)
	if err != nil {
		t.Fatalf("read %s: %v", room, err)
	}
	var out []string
	for i := len(resp.Chunk) - 1; i >= 0; i-- {
		ev := resp.Chunk[i]
		if ev.Sender != sender || ev.Type != event.EventMessage {
			continue
		}
		_ = ev.Content.ParseRaw(ev.Type)
		if msg := ev.Content.AsMessage(); msg != nil && msg.RelatesTo.GetReplaceID() == "" {
			out = append(out, msg.Body)
		}
	}
	return out
}

// waitMessageFrom waits until sender posted a message in room containing
// want, as u sees it, and returns its text.
func waitMessageFrom(t testing.TB, u *hstest.User, room id.RoomID, sender id.UserID, want string) string {
	t.Helper()
	var found string
	testkit.Until(t, 60*time.Second, func() (bool, string) {
		for _, text := range messagesFrom(t, u, room, sender) {
			if strings.Contains(text, want) {
				found = text
				return true, ""
			}
		}
		return false, fmt.Sprintf("waiting for a message of %s containing %q in %s", sender, want, room)
	})
	return found
}

var pairCode = regexp.MustCompile("`!pair ([A-Z0-9]+)`")

// The authorization policy on a real homeserver: a global user named by a
// pattern runs admin commands; an agent answers only the people its
// reply_to admits (a pattern), whatever the room rules say; a person over
// the rate limit gets a notice, once, and no answer; a stranger's direct
// message with an agent whose DM policy is pairing gets a one-time code,
// and once an administrator confirms it with !pair the agent answers them.
func TestAuthorizationPolicy(t *testing.T) {
	var carol, bob, dave *hstest.User
	e := newTurnEnvWith(t, func(e *turnEnv) {
		carol, bob, dave = e.hs.RegisterUser(t, "carol"), e.hs.RegisterUser(t, "bob"), e.hs.RegisterUser(t, "dave")
		server := e.hs.ServerName
		// alice is the global user, by a pattern; helper answers carol only
		// (bob is admitted by the room rules, not by helper's reply_to).
		e.cfg = agentSetup{
			LLM: e.llm.URL, Model: "agent-model", Room: e.room,
			Admins: []id.UserID{id.UserID("@" + e.person.UserID.Localpart()[:4] + "*:" + server)},
			Top: fmt.Sprintf(`  default_room_access: true
  agents:
    helper:
      reply_to: ["@%s:%s"]
      dm: pairing
rate_limits:
  per_person: {per_minute: 1, burst: 1}
`, carol.UserID.Localpart(), server),
			Agents: []string{"helper"}, AgentYAML: "    model: agent\n",
		}.body(e.testEnv)
	}, "", []string{"helper"}, "")
	for _, u := range []*hstest.User{carol, bob} {
		if _, err := u.Client.JoinRoomByID(context.Background(), e.room); err != nil {
			t.Fatal(err)
		}
	}
	helper := e.userID("helper")
	e.llm.Script(llmtest.Text("Hello Carol."), llmtest.Text("Hello Dave, now we can talk."))

	// bob may write in the room (default_room_access) but helper answers
	// only carol; carol's answer is the barrier that bob's message was
	// handled before it.
	if _, err := bob.Client.SendText(context.Background(), e.room, "hello helper, bob here"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.Client.SendText(context.Background(), e.room, "hello helper, carol here"); err != nil {
		t.Fatal(err)
	}
	if got := e.waitTerminal(1); got[0] != "after:Hello Carol." {
		t.Fatalf("turns ended %v, want only carol's answered", got)
	}
	if r := e.results[0]; r.Envelope.SenderID != carol.UserID {
		t.Errorf("the answer is to %s, want carol", r.Envelope.SenderID)
	}

	// carol's second message within the minute: a notice, no model call.
	before := len(e.llm.Requests())
	if _, err := carol.Client.SendText(context.Background(), e.room, "and another thing"); err != nil {
		t.Fatal(err)
	}
	waitMessageFrom(t, carol, e.room, helper, "faster than hookroom allows")
	if n := len(e.llm.Requests()); n != before {
		t.Errorf("the model was called %d times for a rate-limited message", n-before)
	}

	// dave, a stranger, opens a direct message: helper's DM policy is
	// pairing, so it joins and gives him a code.
	dm := createDM(t, dave, helper)
	testkit.Eventually(t, 60*time.Second, "helper joins dave's DM", func() bool {
		return membership(dave, dm, helper) == event.MembershipJoin
	})
	if _, err := dave.Client.SendText(context.Background(), dm, "hi, can you help me?"); err != nil {
		t.Fatal(err)
	}
	offer := waitMessageFrom(t, dave, dm, helper, "!pair ")
	m := pairCode.FindStringSubmatch(offer)
	if m == nil {
		t.Fatalf("no code in %q", offer)
	}
	// alice, a global user by pattern, confirms it in the main room.
	if _, err := e.person.Client.SendText(context.Background(), e.room, "!pair "+m[1]); err != nil {
		t.Fatal(err)
	}
	waitMessageFrom(t, e.person, e.room, e.userID("router"), "Paired "+dave.UserID.String())
	waitMessageFrom(t, dave, dm, helper, "paired you")
	if _, err := dave.Client.SendText(context.Background(), dm, "thanks, here is my question"); err != nil {
		t.Fatal(err)
	}
	waitMessageFrom(t, dave, dm, helper, "Hello Dave, now we can talk.")
	// bob's message never got an answer (carol's and dave's turns are the
	// only two that ended).
	e.waitTerminal(2)
	e.mu.Lock()
	results := slices.Clone(e.results)
	e.mu.Unlock()
	for _, r := range results {
		if r.Envelope.SenderID == bob.UserID {
			t.Errorf("helper answered bob: %+v", r)
		}
	}
}
