package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
	"github.com/hookroom/hookroom/tracking"
)

// hookroom init against the real homeserver writes a configuration that
// hookroom check accepts and that runs: hookroom run registers and logs in
// the accounts and provisions the room, the invited operator joins it, the
// agent is in it and answers the operator in the encrypted room.
func TestInitThenCheckAndRun(t *testing.T) {
	hs := hstest.Start(t) // skips under -short
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)
	localpart := func(name string) string { return name + "-" + suffix }
	op := hs.RegisterUser(t, "operator")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	t.Setenv("HOOKROOM_TEST_HS_SECRET", hs.Secret)
	code, stdout, stderr := runCLI("init", "--homeserver", hs.URL, "--server-name", hs.ServerName, "--secret-env", "HOOKROOM_TEST_HS_SECRET",
		"--agent", localpart("assistant"), "--router", localpart("router"), "--room", localpart("lobby"),
		"--invite", string(op.UserID), "--listen", "127.0.0.1:0", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("hookroom init exited %d: %s", code, stderr)
	}
	if strings.Contains(stdout+stderr, hs.Secret) {
		t.Fatal("hookroom init printed the shared secret")
	}
	// The test homeserver serves no federation API (/_matrix/key/v2/server),
	// so the server name is given; TestInitWritesAValidConfig covers asking.
	if !strings.Contains(stdout, "server name "+hs.ServerName+" (--server-name)") {
		t.Errorf("init summary:\n%s", stdout)
	}

	env := readEnvFile(t, filepath.Join(dir, initEnvFile))
	for k, v := range env {
		t.Setenv(k, v)
	}
	if code, _, stderr := runCLI("check", "--config", cfgPath); code != 0 {
		t.Fatalf("hookroom check exited %d: %s", code, stderr)
	}

	// hookroom run, in-process, until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	var logs testkit.Buffer
	exited := make(chan struct{})
	runCode := -1
	go func() {
		defer close(exited)
		runCode = runContext(ctx, []string{"run", "--config", cfgPath}, &logs, &logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
			if runCode != 0 {
				t.Errorf("hookroom run exited %d", runCode)
			}
		case <-time.After(60 * time.Second):
			t.Error("hookroom run did not stop within 60s of its context ending")
		}
		if t.Failed() {
			t.Logf("hookroom run's log:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), hs.Secret) {
			t.Error("hookroom run logged the shared secret")
		}
	})

	// The router invited the operator when it created the room.
	alias := id.NewRoomAlias(localpart("lobby"), hs.ServerName)
	var lobby id.RoomID
	testkit.Until(t, 90*time.Second, func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("hookroom run exited %d", runCode)
		default:
		}
		resp, err := op.Client.ResolveAlias(ctx, alias)
		if err != nil {
			return false, fmt.Sprintf("the room %s was not provisioned: %v", alias, err)
		}
		lobby = resp.RoomID
		_, err = op.Client.JoinRoomByID(ctx, lobby)
		return err == nil, fmt.Sprintf("the operator cannot join the room: %v", err)
	})
	agent := id.NewUserID(localpart("assistant"), hs.ServerName)
	testkit.Until(t, 60*time.Second, func() (bool, string) {
		members, err := op.Client.JoinedMembers(ctx, lobby)
		if err != nil {
			return false, err.Error()
		}
		_, ok := members.Joined[agent]
		return ok, fmt.Sprintf("the agent is not in the room: %v", members.Joined)
	})

	// The room is encrypted (hookroom init's rooms are, as Element makes
	// private rooms): the operator's client encrypts and decrypts.
	replies := encryptedClient(t, ctx, op.Client, lobby, agent)
	if _, err := op.Client.SendText(ctx, lobby, "@"+localpart("assistant")+" hello from the init test"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(90 * time.Second)
	for {
		select {
		case body := <-replies:
			if strings.Contains(body, agents.EchoPrefix) && strings.Contains(body, "hello from the init test") {
				return
			}
		case <-timeout:
			t.Fatalf("no answer from %s", agent)
		}
	}
}

// encryptedClient sets up end-to-end encryption for cli (mautrix's crypto,
// as the demo test does), syncs it until it sees room as encrypted, and
// returns the bodies of the messages from sender it decrypts from then on
// (an edit's new content).
func encryptedClient(t *testing.T, ctx context.Context, cli *mautrix.Client, room id.RoomID, sender id.UserID) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	db, err := tracking.OpenSQLite(ctx, filepath.Join(t.TempDir(), "person-crypto.db"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		db.Close()
	})
	syncer := mautrix.NewDefaultSyncer()
	cli.Syncer = syncer
	helper, err := cryptohelper.NewCryptoHelper(cli, []byte("init test pickle key"), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Init(ctx); err != nil {
		t.Fatalf("set up the person's encryption: %v", err)
	}
	cli.Crypto = helper
	bodies := make(chan string, 64)
	syncer.OnEventType(event.EventMessage, func(_ context.Context, ev *event.Event) {
		if ev.Sender != sender || ev.RoomID != room {
			return
		}
		m := ev.Content.AsMessage()
		body := m.Body
		if m.NewContent != nil {
			body = m.NewContent.Body
		}
		select {
		case bodies <- body:
		default:
		}
	})
	go func() {
		defer close(done)
		_ = cli.SyncWithContext(ctx)
	}()
	// The state store learns of the room's encryption while the first sync's events are handled,
	// after OnSync callbacks ran: waiting for a sync after which it is known would wait for the
	// next sync, a 30 s long poll in a room where nothing happens. The store is local: poll it.
	testkit.Until(t, 60*time.Second, func() (bool, string) {
		encrypted, err := cli.StateStore.IsEncrypted(ctx, room)
		return encrypted, fmt.Sprintf("the person's client does not see the room as encrypted (%v)", err)
	})
	return bodies
}
