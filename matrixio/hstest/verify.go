package hstest

import (
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

// SAS is what a client shows to compare in an emoji (SAS) verification.
type SAS struct {
	Emoji []struct {
		Emoji string `json:"emoji"`
		Name  string `json:"name"`
	} `json:"emoji"`
	Decimals []int `json:"decimals"`
}

// VerificationStatus is how a client sees another user and one of their devices.
type VerificationStatus struct {
	// UserVerified: the user's master key is signed by this client's user-signing key.
	UserVerified bool `json:"user_verified"`
	// DeviceCrossSigningVerified: the device is signed by its owner's self-signing key and the
	// owner is verified (what Element shows as a verified session).
	DeviceCrossSigningVerified bool `json:"device_cross_signing_verified"`
	// DeviceSignedByOwner: the device is signed by its owner's self-signing key.
	DeviceSignedByOwner bool `json:"device_signed_by_owner"`
}

// verifyTimeout bounds one verification step: the other side answers from its sync loop.
const verifyTimeout = 60 * time.Second

// BootstrapCrossSigning gives the client's user cross-signing keys (uploaded with the login
// password), which verifying other users needs. JS clients only.
func (c *Client) BootstrapCrossSigning(t testing.TB) {
	t.Helper()
	c.call(t, "bootstrap_cross_signing", DefaultCommandTimeout, nil, nil)
}

// VerifyUser requests verification of user in room (Element's "Verify user"), waits until the
// user accepts, starts emoji verification and returns what the client shows. VerifyConfirm
// confirms it. JS clients only.
func (c *Client) VerifyUser(t testing.TB, room id.RoomID, user id.UserID) SAS {
	t.Helper()
	var sas SAS
	c.call(t, "verify_user", verifyTimeout+5*time.Second, map[string]any{
		"room_id": room, "user_id": user, "timeout_ms": verifyTimeout.Milliseconds(),
	}, &sas)
	return sas
}

// VerifyConfirm confirms the emoji VerifyUser returned and waits until the verification is done.
func (c *Client) VerifyConfirm(t testing.TB) {
	t.Helper()
	c.call(t, "verify_confirm", verifyTimeout+5*time.Second, map[string]any{"timeout_ms": verifyTimeout.Milliseconds()}, nil)
}

// VerifyRequest requests verification of user in room and waits for the answer: it reports
// whether the request was cancelled and with which code.
func (c *Client) VerifyRequest(t testing.TB, room id.RoomID, user id.UserID) (cancelled bool, code string) {
	t.Helper()
	var res struct {
		Cancelled bool   `json:"cancelled"`
		Code      string `json:"code"`
	}
	c.call(t, "verify_request", verifyTimeout+5*time.Second, map[string]any{
		"room_id": room, "user_id": user, "timeout_ms": verifyTimeout.Milliseconds(),
	}, &res)
	return res.Cancelled, res.Code
}

// VerificationStatus returns how the client sees user and its device.
func (c *Client) VerificationStatus(t testing.TB, user id.UserID, device id.DeviceID) VerificationStatus {
	t.Helper()
	var st VerificationStatus
	c.call(t, "verification_status", DefaultCommandTimeout, map[string]any{"user_id": user, "device_id": device}, &st)
	return st
}

// VerifyDevice is VerifyUser with a to-device request to one device of user (Element's
// "Verify session"). VerifyConfirm confirms it.
func (c *Client) VerifyDevice(t testing.TB, user id.UserID, device id.DeviceID) SAS {
	t.Helper()
	var sas SAS
	c.call(t, "verify_user", verifyTimeout+5*time.Second, map[string]any{
		"user_id": user, "device_id": device, "timeout_ms": verifyTimeout.Milliseconds(),
	}, &sas)
	return sas
}
