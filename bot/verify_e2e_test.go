package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// An administrator verifies an agent as Element's "Verify user" does
// (matrix-js-sdk with its Rust crypto, in an encrypted room the router
// created, which the router is in too and must keep out of): the agent
// accepts, posts the emoji it shows, confirms; once the administrator
// confirms, the js-sdk reports the agent (its master key) and its device
// as cross-signing verified, and the agent trusts the administrator.
// Someone who is not an administrator is refused with a reason. No
// verification event reaches the agent's model.
func TestVerifyAgentWithEmoji(t *testing.T) {
	e := &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}
	alice := e.hs.RegisterUser(t, "alice")
	bob := e.hs.RegisterUser(t, "bob")
	helper := e.userID("helper")
	cfg := e.config(fmt.Sprintf(`models:
  agent:
    provider: openai
    base_url: %s
    model: agent-model
rooms:
  main:
    alias: %s
    invite: ["%s"]
agents:
  helper:
    username: %s
    model: agent
    rooms: [main]
authorization:
  global_users: ["%s"]
  invite_users: ["%s"]
`, e.llm.URL, e.localpart("main"), alice.UserID, e.localpart("helper"), alice.UserID, bob.UserID))
	e.bot = e.start(cfg, e.rec, e.turnOptions())
	agent := e.bot.bot.w().agents["helper"]

	room := e.bot.bot.w().rooms["main"]
	phone := e.joinEncrypted(t, hstest.JS, alice, room)
	phone.BootstrapCrossSigning(t)
	phone.WaitDevice(t, helper, agent.DeviceID())

	before := phone.VerificationStatus(t, helper, agent.DeviceID())
	if before.UserVerified || before.DeviceCrossSigningVerified || !before.DeviceSignedByOwner {
		t.Fatalf("before verification: %+v, want the device signed by its owner and nothing verified", before)
	}

	start := time.Now()
	sas := phone.VerifyUser(t, room, helper)
	if len(sas.Emoji) != 7 {
		t.Fatalf("the js client shows %d emoji, want 7: %+v", len(sas.Emoji), sas)
	}
	posted := phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "Verification: my side shows"})
	// The same emoji, but for the variation selector some clients add
	// (☎️ against ☎).
	plain := func(s string) string { return strings.ReplaceAll(s, "\uFE0F", "") }
	for _, em := range sas.Emoji {
		if !strings.Contains(plain(posted.FinalBody), plain(em.Emoji)+" "+em.Name) {
			t.Errorf("the agent posted %q, which lacks %s %s that the js client shows", posted.FinalBody, em.Emoji, em.Name)
		}
	}
	phone.VerifyConfirm(t)
	took := time.Since(start)
	testkit.Eventually(t, 30*time.Second, "the js client to see the agent as verified", func() bool {
		st := phone.VerificationStatus(t, helper, agent.DeviceID())
		return st.UserVerified && st.DeviceCrossSigningVerified
	})
	phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "✅ Verified with " + string(alice.UserID)})
	t.Logf("verification from request to done took %v", took.Round(time.Millisecond))
	if got := agent.VerifiedBy(); !slices.Equal(got, []id.UserID{alice.UserID}) {
		t.Errorf("the agent records verifications by %v, want [%s]", got, alice.UserID)
	}
	if report := e.bot.bot.e2eeCommand(context.Background(), e.bot.bot.w(), nil, true); !strings.Contains(report, "- "+string(helper)+" verified by "+string(alice.UserID)+" since start") {
		t.Errorf("!e2ee does not say who verified the agent:\n%s", report)
	}
	// The agent's side: alice's identity is trusted (its user-signing key
	// signed her master key).
	mach := agent.Client().Crypto.(*cryptohelper.CryptoHelper).Machine()
	testkit.Eventually(t, 30*time.Second, "the agent to trust alice", func() bool {
		ok, err := mach.IsUserTrusted(context.Background(), alice.UserID)
		return err == nil && ok
	})

	// The router's session, verified to-device (Element's "Verify
	// session"): no room to post the emoji in; the router confirms and
	// the js client then sees the router verified too.
	router := e.bot.bot.router
	phone.WaitDevice(t, router.UserID(), router.DeviceID())
	if sas := phone.VerifyDevice(t, router.UserID(), router.DeviceID()); len(sas.Emoji) != 7 {
		t.Fatalf("to-device verification: the js client shows %d emoji, want 7", len(sas.Emoji))
	}
	phone.VerifyConfirm(t)
	testkit.Eventually(t, 30*time.Second, "the js client to see the router as verified", func() bool {
		st := phone.VerificationStatus(t, router.UserID(), router.DeviceID())
		return st.UserVerified && st.DeviceCrossSigningVerified
	})
	// The router records it when the verification's done reaches it,
	// which may be a sync after the js client's side finished.
	testkit.Eventually(t, 30*time.Second, "the router to record alice's verification", func() bool {
		return slices.Equal(router.VerifiedBy(), []id.UserID{alice.UserID})
	})

	// bob is not an administrator: refused, with the reason.
	laptop := e.hs.StartClient(t, hstest.JS, bob, hstest.ClientOptions{})
	broom := laptop.CreateRoom(t, hstest.RoomOptions{Encrypted: true, Direct: true, Invite: []id.UserID{helper}})
	laptop.WaitMember(t, broom, helper)
	laptop.WaitDevice(t, helper, agent.DeviceID())
	cancelled, code := laptop.VerifyRequest(t, broom, helper)
	if !cancelled || code != "m.user" {
		t.Errorf("bob's request: cancelled=%v code=%q, want cancelled with m.user", cancelled, code)
	}
	if st := laptop.VerificationStatus(t, helper, agent.DeviceID()); st.UserVerified {
		t.Errorf("bob sees the agent verified after a refused request: %+v", st)
	}
	// Barrier: alice's next message is answered, and it is the model's
	// first request (no verification event became a turn).
	e.llm.Script(llmtest.Text("Verified and listening."))
	q := phone.SendText(t, room, "@"+e.localpart("helper")+" still there?")
	phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "Verified and listening.", ThreadRoot: q})
	if n := len(e.llm.Requests()); n != 1 {
		t.Errorf("the model got %d requests, want 1 (verification events are no messages)", n)
	}
}
