package matrixio_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// An account with a recovery key backs up the room keys of the messages it
// receives; after its database is lost, a fresh database with the same
// recovery key restores them at EnsureAccount, so a thread sent before the
// loss reads back decrypted (ThreadEvents); a fresh database without the
// key cannot decrypt it and Decrypt counts the failure; a wrong recovery
// key leaves the backup off with the reason in EncryptionStatus.
func TestKeyBackupRestoresAfterLostDatabase(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	recoveryKey, err := matrixio.NewRecoveryKey()
	if err != nil {
		t.Fatal(err)
	}
	if !matrixio.ValidRecoveryKey(recoveryKey) || matrixio.ValidRecoveryKey(recoveryKey+"x") {
		t.Fatalf("ValidRecoveryKey disagrees with NewRecoveryKey %q", recoveryKey)
	}
	withKey := func(key string) matrixio.Config {
		cfg := testConfig(srv)
		cfg.Encryption.RecoveryKey = key
		cfg.Encryption.KeyWait = 2 * time.Second
		return cfg
	}
	sender := ensure(t, newManager(t, testConfig(srv), reopenDB(t, openDB(t))), matrixio.AccountSpec{Localpart: unique(t, "sender")})
	// After a lost database only a configured password (or an application
	// service) logs the account in again.
	user := srv.RegisterUser(t, unique(t, "agent"))
	spec := matrixio.AccountSpec{UserID: user.UserID, Password: user.Password}
	agentMgr := newManager(t, withKey(recoveryKey), reopenDB(t, openDB(t)))
	agent := ensure(t, agentMgr, spec)
	firstDevice := agent.DeviceID()
	identity := masterKey(t, agent)

	room, err := sender.CreateRoom(ctx, matrixio.CreateRoomOptions{Encrypted: true, Invite: []id.UserID{agent.UserID()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Join(ctx, room.String()); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	stop := run(t, agent, rec)
	rec.waitFor(t, 30*time.Second, "initial sync", func(b []matrixio.SyncBatch) bool { return len(b) > 0 })
	waitMember(t, sender, room, agent.UserID())
	root, err := sender.SendText(ctx, room, "the plan before the loss", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := sender.SendText(ctx, room, "and its detail", matrixio.SendOptions{ThreadRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	// Both messages decrypt (their room key may come a sync after them).
	for _, evID := range []id.EventID{root, reply} {
		if got := decryptedEvent(t, agentMgr, rec, room, evID); got.Type != event.EventMessage {
			t.Fatalf("message %s reads %s", evID, got.Type.Type)
		}
	}
	// The sync loop backs the key up by itself after the response that
	// brought it.
	var st matrixio.EncryptionStatus
	testkit.Until(t, 30*time.Second, func() (bool, string) {
		st, err = agent.EncryptionStatus(ctx)
		return err == nil && st.Backup.Enabled && st.Backup.Pending == 0 && st.Backup.Keys >= 1, strings.TrimSpace(
			"status "+st.Backup.Error) + " " + errString(err)
	})
	if st.DeviceID != firstDevice || !st.CrossSigned || st.Backup.Version == "" || st.Backup.Error != "" {
		t.Errorf("status before the loss = %+v", st)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	t.Run("fresh database with the recovery key", func(t *testing.T) {
		again := ensure(t, newManager(t, withKey(recoveryKey), reopenDB(t, openDB(t))), spec)
		if again.DeviceID() == firstDevice {
			t.Fatalf("a fresh database reused device %s", firstDevice)
		}
		st, err := again.EncryptionStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The cross-signing keys came back from the secret storage: the
		// account keeps its identity and signs the new device with it.
		if got := masterKey(t, again); got != identity || !st.CrossSigned {
			t.Errorf("after restoring: master key %s (was %s), cross-signed %v; want the same identity signing the new device", got, identity, st.CrossSigned)
		}
		if !st.Backup.Enabled || st.Backup.Version == "" || st.Backup.Restored < 1 || st.Backup.Error != "" {
			t.Errorf("status after restoring = %+v", st.Backup)
		}
		events, err := again.ThreadEvents(ctx, room, root, 10)
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for _, e := range events {
			if e.Type != event.EventMessage {
				t.Errorf("%s is still %s after restoring", e.ID, e.Type)
				continue
			}
			bodies = append(bodies, e.Content.AsMessage().Body)
		}
		if strings.Join(bodies, "|") != "the plan before the loss|and its detail" {
			t.Errorf("thread read back = %q", bodies)
		}
	})

	t.Run("fresh database without the recovery key", func(t *testing.T) {
		m := newManager(t, withKey(""), reopenDB(t, openDB(t)))
		bare := ensure(t, m, spec)
		events, err := bare.ThreadEvents(ctx, room, root, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 2 || events[0].Type != event.EventEncrypted || events[1].Type != event.EventEncrypted {
			t.Fatalf("without the recovery key the thread reads as %d events, want 2 still encrypted", len(events))
		}
		before := time.Now()
		if _, err := m.Decrypt(ctx, events[1]); !errors.Is(err, matrixio.ErrUndecryptable) {
			t.Errorf("Decrypt without the keys = %v, want ErrUndecryptable", err)
		}
		if n := m.Undecryptable(before); n != 1 {
			t.Errorf("Undecryptable = %d, want 1", n)
		}
		st, err := bare.EncryptionStatus(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Backup.Enabled {
			t.Errorf("backup enabled without a recovery key: %+v", st.Backup)
		}
	})

	t.Run("wrong recovery key", func(t *testing.T) {
		other, err := matrixio.NewRecoveryKey()
		if err != nil {
			t.Fatal(err)
		}
		wrong := ensure(t, newManager(t, withKey(other), reopenDB(t, openDB(t))), spec)
		st, err := wrong.EncryptionStatus(context.WithoutCancel(ctx))
		if err != nil {
			t.Fatal(err)
		}
		if st.Backup.Enabled || !strings.Contains(st.Backup.Error, matrixio.ErrRecoveryKeyMismatch.Error()) {
			t.Errorf("with a wrong recovery key the backup is %+v, want off with the mismatch", st.Backup)
		}
	})
}

// masterKey is the cross-signing master key the homeserver publishes for
// acct's user.
func masterKey(t *testing.T, acct *matrixio.Account) id.Ed25519 {
	t.Helper()
	resp, err := acct.Client().QueryKeys(t.Context(), &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{acct.UserID(): {}}})
	if err != nil {
		t.Fatal(err)
	}
	mk := resp.MasterKeys[acct.UserID()]
	if mk.FirstKey() == "" {
		t.Fatalf("%s publishes no master key", acct.UserID())
	}
	return mk.FirstKey()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
