package bot

import (
	"fmt"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// The authorization policy with the clients people use, in an encrypted
// room hookroom created: erin (matrix-js-sdk with its Rust crypto,
// Element's stack) is a global user by a pattern; helper answers only the
// people its reply_to admits (a pattern naming alice, on matrix-nio with
// libolm), not bob (js), whom the room rules admit; alice's third message
// within the minute gets the rate-limit notice and no model call; dave
// (nio), a stranger, opens an encrypted direct message with helper, whose
// DM policy is pairing: the code reaches him decrypted, erin confirms it
// with !pair, dave is told, and helper answers him.
func TestAuthorizationPolicyFromIndependentClients(t *testing.T) {
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice, bob := e.hs.RegisterUser(t, "alice"), e.hs.RegisterUser(t, "bob")
	dave, erin := e.hs.RegisterUser(t, "dave"), e.hs.RegisterUser(t, "erin")
	server := e.hs.ServerName
	// "@alice-*:server" and "@erin-*:server": patterns, not the user ids.
	pattern := func(u *hstest.User) string {
		return "@" + strings.SplitN(u.UserID.Localpart(), "-", 2)[0] + "-*:" + server
	}
	setup := agentSetup{
		LLM:        llm.URL,
		Rooms:      fmt.Sprintf("  secret:\n    alias: %s\n    invite: [%q, %q, %q]\n", e.localpart("secret"), alice.UserID, bob.UserID, erin.UserID),
		AgentRooms: "secret",
		AgentYAML:  "    model: agent\n",
		Admins:     []id.UserID{id.UserID(pattern(erin))},
		Top: fmt.Sprintf(`  default_room_access: true
  agents:
    helper:
      reply_to: [%q]
      dm: pairing
rate_limits:
  per_person: {per_minute: 2, burst: 2}
`, pattern(alice)),
	}
	var rec events
	r := e.start(e.config(setup.body(e)), &rec, Options{})
	room := r.bot.w().rooms["secret"]
	helper, router := e.userID("helper"), e.userID("router")
	mention := "@" + helper.Localpart() + " "

	cs := e.hs.StartClients(t,
		hstest.ClientSpec{Kind: hstest.Nio, User: alice}, // admitted by helper's reply_to
		hstest.ClientSpec{Kind: hstest.JS, User: bob},    // the room admits him, helper does not
		hstest.ClientSpec{Kind: hstest.JS, User: erin},   // a global user by pattern
		hstest.ClientSpec{Kind: hstest.Nio, User: dave},  // in no room yet
	)
	phone, browser, console, stranger := cs[0], cs[1], cs[2], cs[3]
	joinInvited(t, room, phone, browser, console)

	requests := func() []string {
		var out []string
		for _, req := range llm.Requests() {
			out = append(out, string(req.Raw))
		}
		return out
	}
	llm.Script(llmtest.Text("Hello Alice."), llmtest.Text("Alice again."), llmtest.Text("Hello Dave, now we can talk."))

	// bob's message comes first; alice's answer is the barrier that it was
	// handled, and the only model request is alice's.
	browser.SendText(t, room, mention+"hello helper, bob here")
	q := phone.SendText(t, room, mention+"hello helper, alice here")
	phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "Hello Alice.", ThreadRoot: q})
	if reqs := requests(); len(reqs) != 1 || !strings.Contains(reqs[0], "alice here") || strings.Contains(reqs[0], "bob here") {
		t.Fatalf("after bob's and alice's messages the model got %d requests, want alice's only:\n%s", len(reqs), strings.Join(reqs, "\n"))
	}

	// alice's second message is within the limit (2 a minute, burst 2),
	// her third is not: the notice, and no model call.
	q2 := phone.SendText(t, room, mention+"a second question")
	phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "Alice again.", ThreadRoot: q2})
	q3 := phone.SendText(t, room, mention+"and a third one")
	notice := phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "faster than hookroom allows", ThreadRoot: q3})
	if !notice.Encrypted || notice.MsgType != "m.notice" {
		t.Errorf("the rate-limit notice came as %+v, want an encrypted m.notice", notice)
	}
	if n := len(requests()); n != 2 {
		t.Errorf("%d model requests after the rate-limited message, want 2 (no call for it)", n)
	}

	// dave opens an encrypted DM with helper: a code, decrypted by nio.
	dm := stranger.CreateRoom(t, hstest.RoomOptions{Encrypted: true, Direct: true, Invite: []id.UserID{helper}})
	stranger.WaitMember(t, dm, helper)
	stranger.SendText(t, dm, "hi, can you help me?")
	offer := stranger.WaitMessage(t, dm, hstest.Match{Sender: helper, Contains: "!pair "})
	m := pairCode.FindStringSubmatch(offer.Body)
	if m == nil || !offer.Encrypted {
		t.Fatalf("the pairing offer is %+v, want an encrypted message with a code", offer)
	}
	// erin confirms it in the room, from her js client.
	pair := console.SendText(t, room, "!pair "+m[1])
	console.WaitMessage(t, room, hstest.Match{Sender: router, Contains: "Paired " + dave.UserID.String(), After: pair})
	stranger.WaitMessage(t, dm, hstest.Match{Sender: helper, Contains: "paired you"})
	stranger.SendText(t, dm, "thanks, here is my question")
	stranger.WaitMessage(t, dm, hstest.Match{Sender: helper, Contains: "Hello Dave, now we can talk."})

	reqs := requests()
	if len(reqs) != 3 || !strings.Contains(reqs[2], "here is my question") {
		t.Errorf("the model got %d requests, want 3 (alice twice, dave once):\n%s", len(reqs), strings.Join(reqs, "\n"))
	}
	for i, req := range reqs {
		if strings.Contains(req, "bob here") || strings.Contains(req, "a third one") {
			t.Errorf("model request %d holds a message helper must not answer:\n%s", i, req)
		}
	}
}

// joinInvited has each client accept its invite to room and waits until
// each sees the room encrypted (joinEncrypted for clients already started,
// e.g. together by hstest.Server.StartClients).
func joinInvited(t *testing.T, room id.RoomID, clients ...*hstest.Client) {
	t.Helper()
	for _, c := range clients {
		c.SyncUntil(t, room, hstest.UntilInvited, "", 0)
		c.Join(t, room)
		c.SyncUntil(t, room, hstest.UntilEncrypted, "", 0)
	}
}
