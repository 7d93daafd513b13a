package matrixio_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// TestAppServiceAccounts registers hookroom as an application service
// with Dendrite and sets up a router and an agent through it, with no
// shared secret and no password: each gets its own device (the router too,
// although it is the service's sender), cross-signing, a stored token and
// no stored password. A restart reuses the devices; a lost token logs in
// again through the service on the same device; an account outside the
// namespace is refused with ErrOutsideNamespace; and the two accounts talk
// in an encrypted room.
func TestAppServiceAccounts(t *testing.T) {
	router, agent := unique(t, "as-router"), unique(t, "as-agent")
	reg, err := matrixio.NewAppServiceRegistration(matrixio.AppServiceOptions{
		ServerName: "localhost", SenderLocalpart: router, Localparts: []string{agent},
	})
	if err != nil {
		t.Fatal(err)
	}
	data, err := reg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "registration.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := hstest.StartWith(t, hstest.Options{AppServices: []string{file}})
	ctx := t.Context()
	cfg := testConfig(srv)
	cfg.Registration = matrixio.Registration{AppServiceToken: reg.ASToken}

	dbPath := openDB(t)
	m := newManager(t, cfg, reopenDB(t, dbPath))
	r := ensure(t, m, matrixio.AccountSpec{Localpart: router, DisplayName: "AS Router"})
	a := ensure(t, m, matrixio.AccountSpec{Localpart: agent, DisplayName: "AS Agent"})
	for _, acct := range []*matrixio.Account{r, a} {
		if acct.DeviceID() == "" || acct.DeviceID() == id.DeviceID(router) {
			t.Errorf("%s is on device %q, want a device of its own", acct.UserID(), acct.DeviceID())
		}
		if pw := storedPassword(t, dbPath, acct.UserID()); pw != "" {
			t.Errorf("%s has a stored password", acct.UserID())
		}
		keys, err := acct.Client().QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{acct.UserID(): nil}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := keys.MasterKeys[acct.UserID()]; !ok {
			t.Errorf("%s has no cross-signing master key", acct.UserID())
		}
		if dev := keys.DeviceKeys[acct.UserID()][acct.DeviceID()]; len(dev.Keys) == 0 {
			t.Errorf("%s's device has no keys", acct.UserID())
		}
	}
	if name, err := a.Client().GetOwnDisplayName(ctx); err != nil || name.DisplayName != "AS Agent" {
		t.Errorf("agent display name = %+v, %v", name, err)
	}

	// A restart on the same database: the same devices.
	again := newManager(t, cfg, reopenDB(t, dbPath))
	if got := ensure(t, again, matrixio.AccountSpec{Localpart: agent}); got.DeviceID() != a.DeviceID() {
		t.Errorf("agent device after restart = %s, want %s", got.DeviceID(), a.DeviceID())
	}

	// The token revoked (logged out elsewhere would delete the device;
	// here only the token goes): the service logs the account in again on
	// the stored device.
	tmp, err := mautrix.NewClient(srv.URL, a.UserID(), a.Client().AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	relogged := ensure(t, newManager(t, cfg, reopenDB(t, dbPath)), matrixio.AccountSpec{Localpart: agent})
	if relogged.Client().AccessToken == tmp.AccessToken {
		t.Error("the revoked token is still used")
	}
	if _, err := relogged.Client().Whoami(ctx); err != nil {
		t.Errorf("after logging in again: %v", err)
	}

	// Outside the namespace.
	_, err = newManager(t, cfg, reopenDB(t, openDB(t))).EnsureAccount(ctx, matrixio.AccountSpec{Localpart: unique(t, "stranger")})
	if !errors.Is(err, matrixio.ErrOutsideNamespace) {
		t.Errorf("account outside the namespace: error = %v, want ErrOutsideNamespace", err)
	}

	// The router and the agent in an encrypted room.
	m2 := newManager(t, cfg, reopenDB(t, dbPath))
	r = ensure(t, m2, matrixio.AccountSpec{Localpart: router})
	a = ensure(t, m2, matrixio.AccountSpec{Localpart: agent})
	room, err := r.CreateRoom(ctx, matrixio.CreateRoomOptions{Encrypted: true, Invite: []id.UserID{a.UserID()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Join(ctx, room.String()); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	run(t, a, rec)
	rec.waitFor(t, 30*time.Second, "initial sync", func(b []matrixio.SyncBatch) bool { return len(b) > 0 })
	waitMember(t, r, room, a.UserID())
	msg, err := r.SendText(ctx, room, "hello through the appservice", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := decryptedEvent(t, m2, rec, room, msg)
	if got.Type != event.EventMessage || got.Content.AsMessage().Body != "hello through the appservice" {
		t.Fatalf("the router's message reads %s %+v", got.Type.Type, got.Content.Parsed)
	}
}
