package matrixio_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// noRegistration is testConfig without a registration method: an attempt
// to create an account fails.
func noRegistration(srv *hstest.Server) matrixio.Config {
	cfg := testConfig(srv)
	cfg.Registration = matrixio.Registration{}
	return cfg
}

// TestAccessTokenAccount uses an account by the access token of a login
// made elsewhere (as Matrix Authentication Service issues them): whoami
// names the device, hookroom neither logs in nor registers (there is no
// registration method), and the device gets hookroom's encryption keys.
func TestAccessTokenAccount(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	user := srv.RegisterUser(t, "mas-user")
	spec := matrixio.AccountSpec{UserID: user.UserID, AccessToken: user.AccessToken, DisplayName: "By Token"}
	dbPath := openDB(t)
	before, err := user.Client.GetDevicesInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}

	acct := ensure(t, newManager(t, noRegistration(srv), reopenDB(t, dbPath)), spec)
	if acct.UserID() != user.UserID || acct.DeviceID() != user.DeviceID {
		t.Fatalf("account = %s on %s, want %s on the token's device %s", acct.UserID(), acct.DeviceID(), user.UserID, user.DeviceID)
	}
	devices, err := user.Client.GetDevicesInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(devices.Devices) != len(before.Devices) {
		t.Errorf("devices = %+v, want the same as before: %+v (no login happened)", devices.Devices, before.Devices)
	}
	keys, err := user.Client.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{user.UserID: nil}})
	if err != nil {
		t.Fatal(err)
	}
	if dev := keys.DeviceKeys[user.UserID][user.DeviceID]; len(dev.Keys) == 0 {
		t.Errorf("the token's device has no keys: %+v", keys.DeviceKeys[user.UserID])
	}
	if name, err := user.Client.GetOwnDisplayName(ctx); err != nil || name.DisplayName != "By Token" {
		t.Errorf("display name = %+v, %v", name, err)
	}

	// A restart on the same database keeps the device and its keys.
	again := ensure(t, newManager(t, noRegistration(srv), reopenDB(t, dbPath)), spec)
	if again.DeviceID() != user.DeviceID {
		t.Errorf("after restart device = %s, want %s", again.DeviceID(), user.DeviceID)
	}

	// The same token with a lost database: the device has keys hookroom
	// no longer holds, which is explained rather than papered over.
	_, err = newManager(t, noRegistration(srv), reopenDB(t, openDB(t))).EnsureAccount(ctx, spec)
	if !errors.Is(err, matrixio.ErrDeviceKeysUnknown) || !strings.Contains(err.Error(), string(user.UserID)) {
		t.Errorf("with a lost database: error = %v, want ErrDeviceKeysUnknown naming %s", err, user.UserID)
	}
}

// TestRejectedAccessTokenIsExplained configures a token the homeserver
// does not know: the error names the account and never the token, neither
// does the log; with a password too, hookroom logs in with it instead.
func TestRejectedAccessTokenIsExplained(t *testing.T) {
	srv := hstest.Shared(t)
	user := srv.RegisterUser(t, "revoked")
	const token = "syt_bm90LWEtcmVhbC10b2tlbg_SECRETSECRETSECRET_1a2b3c"

	var logs bytes.Buffer
	ctx := zerolog.New(&logs).Level(zerolog.DebugLevel).WithContext(t.Context())
	m := newManager(t, noRegistration(srv), reopenDB(t, openDB(t)))
	_, err := m.EnsureAccount(ctx, matrixio.AccountSpec{UserID: user.UserID, AccessToken: token})
	if !errors.Is(err, matrixio.ErrTokenRejected) {
		t.Fatalf("error = %v, want ErrTokenRejected", err)
	}
	if !strings.Contains(err.Error(), string(user.UserID)) {
		t.Errorf("error %q does not name the account", err)
	}
	if strings.Contains(err.Error(), "SECRET") || strings.Contains(logs.String(), "SECRET") {
		t.Errorf("the token is in the error or the log:\n%v\n%s", err, logs.String())
	}

	// With the password as well: logged in on a new device.
	acct, err := m.EnsureAccount(ctx, matrixio.AccountSpec{UserID: user.UserID, AccessToken: token, Password: user.Password})
	if err != nil {
		t.Fatalf("with a password: %v", err)
	}
	if acct.DeviceID() == "" || acct.DeviceID() == user.DeviceID {
		t.Errorf("device = %q, want a new one", acct.DeviceID())
	}
	// And again (a restart): the stored login is reused, no third device.
	again, err := m.EnsureAccount(ctx, matrixio.AccountSpec{UserID: user.UserID, AccessToken: token, Password: user.Password})
	if err != nil || again.DeviceID() != acct.DeviceID() {
		t.Errorf("again: device %v, %v; want %s", again.DeviceID(), err, acct.DeviceID())
	}
	if strings.Contains(logs.String(), "SECRET") || strings.Contains(logs.String(), user.Password) {
		t.Errorf("a credential is in the log:\n%s", logs.String())
	}
}

// TestAvatarUploadedOnce sets an avatar from image bytes: it is uploaded
// once, a second EnsureAccount (a restart) reuses the upload, a changed
// image is uploaded again, and an mxc:// URI is used as it is.
func TestAvatarUploadedOnce(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	observer := srv.RegisterUser(t, "observer")
	dbPath := openDB(t)
	png := func(b byte) []byte { return append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{b}, 64)...) }
	spec := matrixio.AccountSpec{Localpart: unique(t, "pictured"), Avatar: matrixio.Avatar{Data: png(1), ContentType: "image/png", FileName: "a.png"}}

	acct := ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), spec)
	first, err := observer.Client.GetAvatarURL(ctx, acct.UserID())
	if err != nil || first.IsEmpty() {
		t.Fatalf("avatar = %v, %v", first, err)
	}
	acct = ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), spec)
	if again, _ := observer.Client.GetAvatarURL(ctx, acct.UserID()); again != first {
		t.Errorf("after restart avatar = %v, want the first upload %v", again, first)
	}

	spec.Avatar.Data = png(2)
	if err := acct.SetProfile(ctx, matrixio.Profile{Avatar: spec.Avatar}); err != nil {
		t.Fatal(err)
	}
	second, _ := observer.Client.GetAvatarURL(ctx, acct.UserID())
	if second.IsEmpty() || second == first {
		t.Errorf("changed image: avatar = %v, want a new upload (not %v)", second, first)
	}
	if err := acct.SetProfile(ctx, matrixio.Profile{Avatar: matrixio.Avatar{URI: first}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := observer.Client.GetAvatarURL(ctx, acct.UserID()); got != first {
		t.Errorf("mxc avatar = %v, want %v", got, first)
	}
}

// TestPresence sets an account online and offline.
func TestPresence(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	observer := srv.RegisterUser(t, "observer")
	acct := ensure(t, newManager(t, testConfig(srv), reopenDB(t, openDB(t))), matrixio.AccountSpec{Localpart: unique(t, "present")})
	for _, want := range []event.Presence{event.PresenceOnline, event.PresenceOffline} {
		acct.SetPresence(ctx, want)
		// Dendrite applies a presence update a moment after answering it.
		testkit.Eventually(t, 10*time.Second, "presence is "+string(want), func() bool {
			got, err := observer.Client.GetPresence(ctx, acct.UserID())
			return err == nil && got.Presence == want
		})
	}
}
