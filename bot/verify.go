package bot

import (
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/matrixio"
)

// Reasons sent with a refused verification request; the requester's
// client shows them.
const (
	verifyOffReason      = "verifying hookroom's accounts is turned off (matrix.encryption.verification: off)"
	verifyNotAdminReason = "only hookroom's administrators (authorization.global_users) may verify its accounts"
)

// verificationPolicy is the policy every account answers interactive
// verification requests with (matrixio.Verification): with
// matrix.encryption.verification "admins" (the default) a global user's
// request is accepted, everyone else's refused; with "off" every request
// is refused. It reads the current world on each request, so a reload
// applies to the next one.
func (b *Bot) verificationPolicy() *matrixio.Verification {
	return &matrixio.Verification{Decide: func(from id.UserID) (matrixio.VerifyDecision, string) {
		return verifyDecision(b.w(), from)
	}}
}

// verifyDecision is verificationPolicy's decision for a request from from.
func verifyDecision(w *world, from id.UserID) (matrixio.VerifyDecision, string) {
	if w.cfg.Matrix.Encryption.VerificationMode() == config.VerificationOff {
		return matrixio.VerifyRefuse, verifyOffReason
	}
	if !w.isGlobal(from) {
		return matrixio.VerifyRefuse, verifyNotAdminReason
	}
	return matrixio.VerifyAccept, ""
}
