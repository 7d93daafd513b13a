package bot

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// secretRoomConfig is config.yaml for one agent, "helper", on a scripted
// model, in a room "secret" that hookroom creates (encrypted, the default)
// and invites alice to; matrixExtra is added to the matrix section.
func (e *testEnv) secretRoomConfig(llm *llmtest.Server, alice *hstest.User, matrixExtra string) *config.Config {
	e.t.Helper()
	return e.config(matrixExtra + e.secretRoomSetup(llm, alice).body(e))
}

// secretRoomSetup is the agentSetup of secretRoomConfig: agent "helper" on
// llm in room "secret", which hookroom creates and invites alice (the
// administrator) to.
func (e *testEnv) secretRoomSetup(llm *llmtest.Server, alice *hstest.User) agentSetup {
	return agentSetup{
		LLM:        llm.URL,
		Rooms:      fmt.Sprintf("  secret:\n    alias: %s\n    invite: [%q]\n", e.localpart("secret"), alice.UserID),
		AgentRooms: "secret",
		Admins:     []id.UserID{alice.UserID},
	}
}

// joinEncrypted starts an independent client of kind for u that accepts
// the invite to room and waits until it sees the room as encrypted.
func (e *testEnv) joinEncrypted(t *testing.T, kind hstest.ClientKind, u *hstest.User, room id.RoomID) *hstest.Client {
	t.Helper()
	c := e.hs.StartClient(t, kind, u, hstest.ClientOptions{})
	c.SyncUntil(t, room, hstest.UntilInvited, "", 0)
	c.Join(t, room)
	c.SyncUntil(t, room, hstest.UntilEncrypted, "", 0)
	return c
}

// A person with an independent end-to-end encrypting client talks to an
// agent in a room hookroom created (encrypted by default): the person's
// encrypted message is answered, the streamed reply and its edits arrive
// encrypted and decrypt; after a hookroom restart the next exchange works
// both ways; a second device of the person that logs in later reads the
// agent's new replies. The first device is matrix-nio with libolm, the
// second matrix-js-sdk with its Rust crypto (Element's stack).
func TestEncryptedConversation(t *testing.T) {
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice := e.hs.RegisterUser(t, "alice")
	cfg := e.secretRoomConfig(llm, alice, "")
	var rec events
	opts := Options{PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond}
	r := e.start(cfg, &rec, opts)
	room := r.bot.w().rooms["secret"]
	if enc, err := r.bot.router.IsEncrypted(context.Background(), room); err != nil || !enc {
		t.Fatalf("the room hookroom created is not encrypted (%v, %v)", enc, err)
	}
	agent := e.userID("helper")

	phone := e.joinEncrypted(t, hstest.Nio, alice, room)

	// A streamed reply: a placeholder edited while the model streams.
	answer := "The first answer, streamed in several pieces to exercise the edits."
	llm.Script(llmtest.Reply{Text: llmtest.Split(answer, 6), ChunkDelay: 80 * time.Millisecond})
	q := phone.SendText(t, room, "@"+e.localpart("helper")+" hello?")
	got := phone.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: answer, ThreadRoot: q})
	// The placeholder was edited while streaming; wait for the final edit.
	testkit.Eventually(t, 30*time.Second, "the final edit of the streamed reply", func() bool {
		got = phone.WaitMessage(t, room, hstest.Match{EventID: got.EventID})
		return got.FinalBody == answer
	})
	if !got.Encrypted || got.Undecryptable {
		t.Errorf("reply encrypted=%v undecryptable=%v, want an encrypted reply that decrypts", got.Encrypted, got.Undecryptable)
	}
	if got.Edits < 1 || got.UndecryptableEdits > 0 || got.FinalBody != answer {
		t.Errorf("reply edits=%d (undecryptable %d) final %q, want streamed edits that decrypt to %q", got.Edits, got.UndecryptableEdits, got.FinalBody, answer)
	}
	prompt := lastUserMessage(t, llm)
	if !strings.Contains(prompt, "hello?") {
		t.Errorf("the model got %q, want the decrypted question", prompt)
	}

	// Restart hookroom: same devices, same sessions.
	r.stop(t)
	r2 := e.start(cfg, &rec, opts)
	llm.Script(llmtest.Text("Answer after the restart."))
	q2 := phone.SendText(t, room, "@"+e.localpart("helper")+" still there?")
	got = phone.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: "Answer after the restart.", ThreadRoot: q2})
	if !got.Encrypted || got.Undecryptable {
		t.Errorf("reply after restart encrypted=%v undecryptable=%v", got.Encrypted, got.Undecryptable)
	}
	if prompt := lastUserMessage(t, llm); !strings.Contains(prompt, "still there?") {
		t.Errorf("after the restart the model got %q, want the decrypted question", prompt)
	}

	// A second device logs in later; the agent's next reply reaches it.
	laptop := e.hs.StartClient(t, hstest.JS, alice, hstest.ClientOptions{})
	laptop.SyncUntil(t, room, hstest.UntilJoined, "", 0)
	phone.WaitDevice(t, alice.UserID, laptop.DeviceID)
	// The agent learns of the new device from its sync (device list
	// change), as any client does; a reply sent before that would not be
	// shared with it.
	testkit.Eventually(t, 30*time.Second, "the agent knows the laptop", func() bool {
		return knowsDevice(t, r2.bot.w().agents["helper"], alice.UserID, laptop.DeviceID)
	})
	llm.Script(llmtest.Text("Answer for every device."))
	q3 := phone.SendText(t, room, "@"+e.localpart("helper")+" and the laptop?")
	for _, c := range []*hstest.Client{phone, laptop} {
		got = c.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: "Answer for every device.", ThreadRoot: q3})
		if !got.Encrypted || got.Undecryptable {
			t.Errorf("%s: reply encrypted=%v undecryptable=%v", c.Kind, got.Encrypted, got.Undecryptable)
		}
	}
}

// knowsDevice reports whether acct's crypto knows device of user.
func knowsDevice(t *testing.T, acct *matrixio.Account, user id.UserID, device id.DeviceID) bool {
	t.Helper()
	helper, ok := acct.Client().Crypto.(*cryptohelper.CryptoHelper)
	if !ok {
		t.Fatalf("%s has no crypto helper", acct.UserID())
	}
	devices, err := helper.Machine().CryptoStore.GetDevices(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	_, ok = devices[device]
	return ok
}

// lastUserMessage returns the text of the last user message the scripted
// model received.
func lastUserMessage(t *testing.T, llm *llmtest.Server) string {
	t.Helper()
	req := llm.LastRequest(t)
	for i := len(req.Body.Messages) - 1; i >= 0; i-- {
		if req.Body.Messages[i].Role == "user" {
			return string(req.Body.Messages[i].Content)
		}
	}
	t.Fatalf("no user message in the last request")
	return ""
}

// secretRoom is hookroom with one agent in a room it created encrypted
// (secretRoomConfig with matrixExtra), running, and alice joined to it with
// an independent nio client.
type secretRoom struct {
	*testEnv
	llm   *llmtest.Server
	alice *hstest.User
	bot   *running
	room  id.RoomID
	phone *hstest.Client
}

func newSecretRoom(t *testing.T, matrixExtra string) *secretRoom {
	e := newEnv(t)
	s := &secretRoom{testEnv: e, llm: llmtest.NewServer(t), alice: e.hs.RegisterUser(t, "alice")}
	var rec events
	s.bot = e.start(e.secretRoomConfig(s.llm, s.alice, matrixExtra), &rec, Options{})
	s.room = s.bot.bot.w().rooms["secret"]
	s.phone = e.joinEncrypted(t, hstest.Nio, s.alice, s.room)
	return s
}

// A message hookroom cannot decrypt (its room key never comes) is answered
// once, after the grace period, with a short notice in its thread; the log
// says so. A message after it is answered normally, which proves the room's
// queue moved on and no second notice came in between.
func TestUndecryptableMessageGetsNotice(t *testing.T) {
	s := newSecretRoom(t, "  encryption:\n    decrypt_grace_ms: 1500\n")
	e, llm, alice, room, phone := s.testEnv, s.llm, s.alice, s.room, s.phone
	agent := e.userID("helper")

	// An encrypted event whose megolm session nobody shared with hookroom.
	ctx := context.Background()
	bogus := map[string]any{
		"algorithm":  id.AlgorithmMegolmV1,
		"sender_key": strings.Repeat("A", 43),
		"session_id": strings.Repeat("B", 43),
		"device_id":  "NOSUCHDEVICE",
		"ciphertext": strings.Repeat("C", 120),
	}
	sent, err := alice.Client.SendMessageEvent(ctx, room, event.EventEncrypted, bogus)
	if err != nil {
		t.Fatal(err)
	}
	// The router is in the room, so it speaks for hookroom.
	notice := phone.WaitMessage(t, room, hstest.Match{Sender: e.userID("router"), Contains: "I can't read this message"})
	if notice.MsgType != string(event.MsgNotice) || notice.ReplyTo != sent.EventID || notice.ThreadRoot != sent.EventID {
		t.Errorf("notice msgtype %s reply to %s in thread %s, want an m.notice in the thread of %s replying to it",
			notice.MsgType, notice.ReplyTo, notice.ThreadRoot, sent.EventID)
	}
	// In a thread, the notice replies to the message it is about, in that
	// thread.
	llm.Script(llmtest.Text("Root answered."))
	root := phone.SendText(t, room, "a thread root")
	phone.WaitMessage(t, room, hstest.Match{Sender: agent, Contains: "Root answered.", ThreadRoot: root})
	inThread := maps.Clone(bogus)
	inThread["session_id"] = strings.Repeat("D", 43)
	inThread["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": root}
	sentInThread, err := alice.Client.SendMessageEvent(ctx, room, event.EventEncrypted, inThread)
	if err != nil {
		t.Fatal(err)
	}
	threaded := phone.WaitMessage(t, room, hstest.Match{Sender: e.userID("router"), Contains: "I can't read this message", ThreadRoot: root})
	if threaded.ReplyTo != sentInThread.EventID {
		t.Errorf("the notice in the thread replies to %s, want the message it is about, %s", threaded.ReplyTo, sentInThread.EventID)
	}

	// Barrier: the next message is answered, and it is the agent's next
	// message after the notice (no second notice came first).
	llm.Script(llmtest.Text("I can read this one."))
	phone.SendText(t, room, "readable")
	next := phone.WaitMessage(t, room, hstest.Match{Sender: agent, After: threaded.EventID})
	if !strings.Contains(next.FinalBody, "I can read this one.") {
		t.Errorf("after the notices the agent sent %q, want the answer to the readable message", next.FinalBody)
	}
}

// A person starts an encrypted direct message with an agent, as Element
// does (is_direct, trusted_private_chat, encryption on): the agent joins,
// answers without being mentioned, still answers after a restart, sees an
// encrypted image the person sends, and leaves the room once the person
// has left.
func TestEncryptedDirectMessage(t *testing.T) {
	e, cfg, opts := newDMEnv(t)
	helper := e.userID("helper")
	phone := e.hs.StartClient(t, hstest.JS, e.person, hstest.ClientOptions{})
	room := phone.CreateRoom(t, hstest.RoomOptions{Encrypted: true, Direct: true, Invite: []id.UserID{helper}})
	phone.WaitMember(t, room, helper)
	phone.WaitDevice(t, helper, e.bot.bot.w().agents["helper"].DeviceID())

	e.llm.Script(llmtest.Text("Hello from your DM."))
	q := phone.SendText(t, room, "hi, no mention needed?")
	got := phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "Hello from your DM.", ThreadRoot: q})
	if !got.Encrypted || got.Undecryptable {
		t.Errorf("DM reply encrypted=%v undecryptable=%v", got.Encrypted, got.Undecryptable)
	}
	if prompt := lastUserMessage(t, e.llm); !strings.Contains(prompt, "no mention needed?") {
		t.Errorf("the model got %q", prompt)
	}

	// Restart, now with a model that sees images.
	e.bot.stop(t)
	cfg = e.config(strings.Replace(e.cfg, "model: agent-model", "model: agent-model\n    vision: true", 1))
	e.bot = e.start(cfg, e.rec, opts)
	e.llm.Script(llmtest.Text("Still here after the restart."))
	q = phone.SendText(t, room, "are you back?")
	phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "Still here after the restart.", ThreadRoot: q})

	// An image in an encrypted room is an encrypted file: hookroom
	// downloads and decrypts it for the model's prompt line.
	pic := testPNG(t)
	e.llm.Script(llmtest.Text("Nice picture."))
	img, _ := phone.SendImage(t, room, "dot.png", "image/png", pic)
	phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "Nice picture.", ThreadRoot: img})
	wantURL := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pic)
	var images []string
	for _, p := range e.llm.LastRequest(t).LastUserParts() {
		if p.Type == "image_url" {
			images = append(images, p.ImageURL)
		}
	}
	if len(images) != 1 || images[0] != wantURL {
		t.Errorf("image parts %d (first %.40q), want the decrypted PNG", len(images), images)
	}

	// The person leaves: nobody is left, so the agent leaves and forgets.
	if _, err := e.person.Client.LeaveRoom(context.Background(), room); err != nil {
		t.Fatal(err)
	}
	b := e.bot.bot
	testkit.Eventually(t, 30*time.Second, "the agent left the empty DM", func() bool {
		_, remembered := rememberedDM(t, b, room, helper)
		return !remembered && !b.invited.has(room, helper)
	})
}

// A message whose room key hookroom does not get with it (the sender
// shared the session with nobody) is not lost: hookroom asks the sender's
// device for the key, the sender's client forwards it, and the message is
// answered like any other, without a notice.
func TestLateKeyIsRequestedAndMessageAnswered(t *testing.T) {
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice := e.hs.RegisterUser(t, "alice")
	withCrypto(t, alice)
	ctx := context.Background()
	helper := e.userID("helper")
	room := createEncryptedRoom(t, alice, e.userID("router"), helper)
	cfg := e.configAgents(agentSetup{LLM: llm.URL, Rooms: fmt.Sprintf("  secret:\n    id: %q\n", room), AgentRooms: "secret",
		Admins: []id.UserID{alice.UserID}})
	var rec events
	e.start(cfg, &rec, Options{})
	in := arrivalsKeepSyncer(t, alice)

	// Alice's client answers key requests from hookroom's devices (Element
	// answers only its own user's; this stands in for a key that arrives
	// late by any route).
	mach := alice.Client.Crypto.(*cryptohelper.CryptoHelper).Machine()
	mach.AllowKeyShare = func(context.Context, *id.Device, event.RequestedKeyInfo) *crypto.KeyShareRejection { return nil }
	// A session shared with alice's own devices only. Alice's sync may
	// still be processing the agents' joins, which retire the session, so
	// share and encrypt until the encryption finds its session.
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: "a message whose key comes late"}
	var enc *event.EncryptedEventContent
	testkit.Eventually(t, 30*time.Second, "alice's client encrypted with a session nobody else has", func() bool {
		if err := mach.ShareGroupSession(ctx, room, []id.UserID{alice.UserID}); err != nil {
			t.Fatal(err)
		}
		var err error
		enc, err = mach.EncryptMegolmEvent(ctx, room, event.EventMessage, content)
		if errors.Is(err, crypto.ErrNoGroupSession) {
			return false
		} else if err != nil {
			t.Fatal(err)
		}
		return true
	})
	llm.Script(llmtest.Text("Got it, late key and all."))
	sent, err := alice.Client.SendMessageEvent(ctx, room, event.EventEncrypted, enc, mautrix.ReqSendEvent{DontEncrypt: true})
	if err != nil {
		t.Fatal(err)
	}
	reply := waitIn(t, in, room, helper)
	if body := reply.Content.AsMessage().Body; !strings.Contains(body, "Got it, late key and all.") {
		t.Errorf("the agent answered %q, want the scripted answer (not a notice)", body)
	}
	if rel := reply.Content.AsMessage().RelatesTo; rel == nil || rel.GetThreadParent() != sent.EventID {
		t.Errorf("reply relation %+v, want the thread of %s", rel, sent.EventID)
	}
	if prompt := lastUserMessage(t, llm); !strings.Contains(prompt, "a message whose key comes late") {
		t.Errorf("the model got %q", prompt)
	}
}

// With matrix.encryption.share_keys_with: cross_signed, a device its owner
// never cross-signed (the test client does not do cross-signing) gets no
// room key: the agent's reply stays unreadable there, while hookroom still
// reads and answers the person.
func TestShareKeysOnlyWithCrossSignedDevices(t *testing.T) {
	s := newSecretRoom(t, "  encryption:\n    share_keys_with: cross_signed\n")
	e, llm, room, phone := s.testEnv, s.llm, s.room, s.phone
	llm.Script(llmtest.Text("Only for signed devices."))
	q := phone.SendText(t, room, "@"+e.localpart("helper")+" can I read you?")
	got := phone.WaitMessage(t, room, hstest.Match{Sender: e.userID("helper"), ThreadRoot: q, AllowUndecryptable: true})
	if !got.Undecryptable {
		t.Errorf("an unsigned device decrypted the reply %q; want no room key for it", got.FinalBody)
	}
	if prompt := lastUserMessage(t, llm); !strings.Contains(prompt, "can I read you?") {
		t.Errorf("the model got %q, want the person's decrypted question", prompt)
	}
}
