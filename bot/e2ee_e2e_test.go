package bot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// Key backup end to end: hookroom with a recovery key creates its accounts
// (registered with the homeserver's shared secret, their passwords derived
// from the key), answers alice (nio) in an encrypted room and backs up the
// room keys (!e2ee shows nothing pending); its database is deleted;
// restarted with the recovery key it logs the same accounts in again,
// restores the keys (!e2ee: restored at start), reads the thread started
// before the loss decrypted, and answers alice's follow-up in it;
// restarted on a fresh database without the key (the accounts given by
// password now, as an operator who lost the key would), the thread stays
// encrypted and !e2ee says there is no backup.
func TestKeyBackupSurvivesLostDatabase(t *testing.T) {
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice := e.hs.RegisterUser(t, "alice")
	router := struct{ UserID id.UserID }{id.NewUserID(e.localpart("router"), e.hs.ServerName)}
	helper := struct{ UserID id.UserID }{id.NewUserID(e.localpart("helper"), e.hs.ServerName)}
	recoveryKey, err := matrixio.NewRecoveryKey()
	if err != nil {
		t.Fatal(err)
	}
	// With the key, hookroom registers the accounts and can log them in
	// again from the key alone. Without it, the operator gives their
	// passwords (the ones derived from the key: what an operator who
	// wrote them down would have).
	password := func(user id.UserID) string { return matrixio.DerivedPassword(recoveryKey, user) }
	cfgFor := func(key string) *config.Config {
		enc := "  registration: {shared_secret: \"${HS_SECRET}\"}\n"
		routerAccount, helperAccount := "", ""
		if key != "" {
			enc += fmt.Sprintf("  encryption:\n    recovery_key: %s\n", key)
		} else {
			routerAccount = fmt.Sprintf("    account: {user_id: %q, password: %q}\n", router.UserID, password(router.UserID))
			helperAccount = fmt.Sprintf("    account: {user_id: %q, password: %q}\n", helper.UserID, password(helper.UserID))
		}
		text := fmt.Sprintf(`data_dir: ./data
log:
  level: debug
matrix:
  homeserver: %s
  server_name: %s
  router:
    username: %s
%s%smodels:
  agent:
    provider: openai
    base_url: %s
    model: m
rooms:
  secret:
    alias: %s
    invite: [%q]
authorization:
  global_users: [%q]
agents:
  helper:
    username: %s
%s    rooms: [secret]
`, e.hs.URL, e.hs.ServerName, router.UserID.Localpart(), routerAccount, enc, llm.URL,
			e.localpart("secret"), alice.UserID, alice.UserID, helper.UserID.Localpart(), helperAccount)
		path := filepath.Join(e.dir, "config.yaml")
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(context.Background(), path, e.configOptions()...)
		if err != nil {
			t.Fatalf("config: %v", err)
		}
		return cfg
	}
	wipe := func() {
		if err := os.RemoveAll(filepath.Join(e.dir, "data")); err != nil {
			t.Fatal(err)
		}
	}
	e2ee := func(r *running) string {
		return r.bot.e2eeCommand(context.Background(), r.bot.w(), nil, true)
	}
	ctx := context.Background()
	var rec events
	cfg := cfgFor(recoveryKey)
	r := e.start(cfg, &rec, Options{})
	if r.bot.mx.Config().Encryption.RecoveryKey == "" {
		t.Fatal("matrixConfig does not pass matrix.encryption.recovery_key on: set Encryption: matrixEncryption(cfg.Matrix.Encryption)")
	}
	room := r.bot.w().rooms["secret"]
	phone := e.joinEncrypted(t, hstest.Nio, alice, room)

	llm.Script(llmtest.Text("The plan is to ship on Friday."))
	q := phone.SendText(t, room, "@"+helper.UserID.Localpart()+" what is the plan?")
	phone.WaitMessage(t, room, hstest.Match{Sender: helper.UserID, Contains: "ship on Friday", ThreadRoot: q})
	pending := regexp.MustCompile(`[1-9][0-9]* not backed up yet`)
	var report string
	testkit.Until(t, 30*time.Second, func() (bool, string) {
		report = e2ee(r)
		return strings.Count(report, ", 0 not backed up yet") == 2 && !pending.MatchString(report), report
	})
	if !strings.Contains(report, "- "+string(helper.UserID)+" — device `") || !strings.Contains(report, "cross-signed, key backup ") {
		t.Errorf("!e2ee before the loss:\n%s", report)
	}
	oldDevice := r.bot.w().agents["helper"].DeviceID()
	r.stop(t)
	wipe()

	// The database is gone; the recovery key brings the keys back.
	r = e.start(cfg, &rec, Options{})
	agent := r.bot.w().agents["helper"]
	if agent.DeviceID() == oldDevice {
		t.Fatalf("the agent kept device %s without its database", oldDevice)
	}
	if report = e2ee(r); !strings.Contains(report, "restored at start") {
		t.Errorf("!e2ee after restoring:\n%s", report)
	}
	thread, err := agent.ThreadEvents(ctx, room, q, 20)
	if err != nil {
		t.Fatal(err)
	}
	bodies := threadBodies(thread)
	if !strings.Contains(bodies, "what is the plan?") || !strings.Contains(bodies, "ship on Friday") || strings.Contains(bodies, "<encrypted>") {
		t.Errorf("the thread before the loss reads back as %q, want both messages decrypted", bodies)
	}
	// The follow-up in the old thread is answered with the thread's
	// earlier messages, read back from the room, in the model request.
	phone.WaitDevice(t, helper.UserID, agent.DeviceID())
	llm.Script(llmtest.Text("Friday still holds."))
	phone.Send(t, room, hstest.Outgoing{Body: "@" + helper.UserID.Localpart() + " still Friday?", ThreadRoot: q})
	phone.WaitMessage(t, room, hstest.Match{Sender: helper.UserID, Contains: "Friday still holds.", ThreadRoot: q})
	if sent := requestText(t, llm); !strings.Contains(sent, "what is the plan?") || !strings.Contains(sent, "ship on Friday") || !strings.Contains(sent, "still Friday?") {
		t.Errorf("after restoring, the model request lacks the thread's earlier messages:\n%s", sent)
	}
	r.stop(t)
	wipe()

	// Without the key, the earlier messages stay unreadable.
	r = e.start(cfgFor(""), &rec, Options{})
	agent = r.bot.w().agents["helper"]
	thread, err = agent.ThreadEvents(ctx, room, q, 20)
	if err != nil {
		t.Fatal(err)
	}
	if bodies := threadBodies(thread); strings.Contains(bodies, "what is the plan?") || !strings.Contains(bodies, "<encrypted>") {
		t.Errorf("without the recovery key the thread reads as %q, want it encrypted", bodies)
	}
	if report = e2ee(r); !strings.Contains(report, "no key backup (no recovery key)") {
		t.Errorf("!e2ee without a recovery key:\n%s", report)
	}
	// A follow-up in the old thread: the agent says it cannot read the
	// earlier messages, then answers this one alone.
	phone.WaitDevice(t, helper.UserID, agent.DeviceID())
	llm.Script(llmtest.Text("Only this message reached me."))
	f := phone.Send(t, room, hstest.Outgoing{Body: "@" + helper.UserID.Localpart() + " and now?", ThreadRoot: q})
	phone.WaitMessage(t, room, hstest.Match{Sender: helper.UserID, Contains: "can't read the earlier messages of this thread", ThreadRoot: q, After: f})
	phone.WaitMessage(t, room, hstest.Match{Sender: helper.UserID, Contains: "Only this message reached me.", ThreadRoot: q})
	if sent := requestText(t, llm); strings.Contains(sent, "what is the plan?") || !strings.Contains(sent, "and now?") {
		t.Errorf("without the recovery key, the model request is:\n%s", sent)
	}
}

// requestText is every message of the last request the model received.
func requestText(t *testing.T, llm *llmtest.Server) string {
	t.Helper()
	var b strings.Builder
	for _, m := range llm.LastRequest(t).Body.Messages {
		b.WriteString(string(m.Role) + ": " + string(m.Content) + "\n")
	}
	return b.String()
}

// threadBodies joins the texts of events with "|", "<encrypted>" for those
// still encrypted.
func threadBodies(events []*event.Event) string {
	var out []string
	for _, ev := range events {
		switch ev.Type {
		case event.EventEncrypted:
			out = append(out, "<encrypted>")
		case event.EventMessage:
			out = append(out, ev.Content.AsMessage().Body)
		}
	}
	return strings.Join(out, "|")
}
