package bot

import (
	"context"
	"fmt"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// withCrypto gives u's client end-to-end encryption (mautrix's crypto on a
// throwaway SQLite database), so it encrypts what it sends into encrypted
// rooms and decrypts what arrives there. Call it before arrivals.
func withCrypto(tb testing.TB, u *hstest.User) {
	tb.Helper()
	ctx := context.Background()
	u.Client.Syncer = mautrix.NewDefaultSyncer()
	helper, err := cryptohelper.NewCryptoHelper(u.Client, []byte("test pickle key"), tempSQLite(tb))
	if err != nil {
		tb.Fatal(err)
	}
	if err := helper.Init(ctx); err != nil {
		tb.Fatalf("init crypto of %s: %v", u.UserID, err)
	}
	u.Client.Crypto = helper
}

// createEncryptedRoom makes an encrypted private room of u inviting users.
func createEncryptedRoom(tb testing.TB, u *hstest.User, invite ...id.UserID) id.RoomID {
	tb.Helper()
	resp, err := u.Client.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{
		Preset: "private_chat", Invite: invite,
		InitialState: []*event.Event{{Type: event.StateEncryption, Content: event.Content{
			Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}}}},
	})
	if err != nil {
		tb.Fatalf("create encrypted room: %v", err)
	}
	return resp.RoomID
}

// BenchmarkEncryptedTurnLatency compares one turn in an encrypted room with
// one in an unencrypted room, side by side in the same run: a person with
// a crypto-enabled client (mautrix's) sends, an instant scripted model
// answers, and the time to the reply arriving (decrypted) in the person's
// sync is measured, alternating rooms turn by turn.
//
//	go test -tags goolm -run XXX -bench EncryptedTurnLatency -benchtime 1x ./bot/
func BenchmarkEncryptedTurnLatency(b *testing.B) {
	const turns = 60
	e := newEnv(b)
	llm := llmtest.NewServerWith(b, []llmtest.Option{llmtest.Instant(), llmtest.WithFallback(llmtest.Text("ok"))})
	alice := e.hs.RegisterUser(b, "alice")
	withCrypto(b, alice)
	ctx := context.Background()
	plain := createRoom(b, alice, e.userID("router"), e.userID("helper"))
	secret := createEncryptedRoom(b, alice, e.userID("router"), e.userID("helper"))
	cfg := e.configAgents(agentSetup{LLM: llm.URL, Rooms: fmt.Sprintf("  plain:\n    id: %q\n  secret:\n    id: %q\n", plain, secret),
		AgentRooms: "plain, secret", Admins: []id.UserID{alice.UserID}})
	var rec events
	e.start(cfg, &rec, Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
		return hooks.NewRegistry([]hooks.Plugin{rec.plugin()}, hooks.Options{Services: s})
	}})
	in := arrivalsKeepSyncer(b, alice)
	agent := e.userID("helper")
	// Warm up both rooms: keys are shared on the first message each way.
	for _, room := range []id.RoomID{plain, secret} {
		if _, err := alice.Client.SendText(ctx, room, "warm up"); err != nil {
			b.Fatal(err)
		}
		waitIn(b, in, room, agent)
	}
	for b.Loop() {
		lat := map[id.RoomID][]time.Duration{}
		for i := range turns {
			for _, room := range []id.RoomID{plain, secret} {
				start := time.Now()
				if _, err := alice.Client.SendText(ctx, room, fmt.Sprintf("ping %d", i)); err != nil {
					b.Fatal(err)
				}
				waitIn(b, in, room, agent)
				lat[room] = append(lat[room], time.Since(start))
			}
		}
		p50p, p50s := percentile(lat[plain], 50), percentile(lat[secret], 50)
		b.ReportMetric(float64(p50p.Microseconds())/1000, "plain-p50-ms")
		b.ReportMetric(float64(percentile(lat[plain], 95).Microseconds())/1000, "plain-p95-ms")
		b.ReportMetric(float64(p50s.Microseconds())/1000, "encrypted-p50-ms")
		b.ReportMetric(float64(percentile(lat[secret], 95).Microseconds())/1000, "encrypted-p95-ms")
		b.ReportMetric(float64(p50s)/float64(p50p), "p50-ratio")
	}
}

// arrivalsKeepSyncer is arrivals for a client whose syncer (with its crypto
// handlers) is already set: decrypted messages are dispatched to it too.
func arrivalsKeepSyncer(tb testing.TB, u *hstest.User) <-chan *event.Event {
	ch := make(chan *event.Event, 1024)
	syncer := u.Client.Syncer.(*mautrix.DefaultSyncer)
	syncer.OnEventType(event.EventMessage, func(_ context.Context, ev *event.Event) { ch <- ev })
	u.Client.Store = mautrix.NewMemorySyncStore()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = u.Client.SyncWithContext(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return ch
}

// waitIn returns when a message from sender arrives in room.
func waitIn(tb testing.TB, ch <-chan *event.Event, room id.RoomID, sender id.UserID) *event.Event {
	tb.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev := <-ch:
			if ev.Sender == sender && ev.RoomID == room {
				return ev
			}
		case <-timeout:
			tb.Fatalf("no message from %s in %s within 30s", sender, room)
		}
	}
}
