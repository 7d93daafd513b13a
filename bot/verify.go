package bot

import (
	"context"
	"fmt"
	"strings"

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

// e2eeExtras is the end of !e2ee's answer: who may verify the accounts,
// which accounts an administrator verified since start (their client
// signed the account's master key; signatures by someone's user-signing key
// are visible to that person only, so hookroom knows of the verifications
// it took part in), and the root space. It asks the homeserver for the
// space (alias and children) when one is configured.
func (b *Bot) e2eeExtras(ctx context.Context, w *world) string {
	var s strings.Builder
	if w.cfg.Matrix.Encryption.VerificationMode() == config.VerificationOff {
		s.WriteString("\n\nInteractive verification: off (matrix.encryption.verification).")
	} else {
		s.WriteString("\n\nInteractive verification: administrators may verify the accounts (Element: the account's profile → Verify user → emoji).")
		verified := false
		for _, acct := range b.mx.Accounts() {
			if by := acct.VerifiedBy(); len(by) > 0 {
				verified = true
				names := make([]string, len(by))
				for i, u := range by {
					names[i] = string(u)
				}
				fmt.Fprintf(&s, "\n- %s verified by %s since start", acct.UserID(), strings.Join(names, ", "))
			}
		}
		if !verified {
			s.WriteString(" No account was verified since start.")
		}
	}
	spec, ok := spaceSpec(w)
	if !ok || b.router == nil {
		return s.String()
	}
	space, err := b.router.ResolveAlias(ctx, spec.Alias)
	if err != nil {
		fmt.Fprintf(&s, "\n\nRoot space %s: not found", spec.Alias)
		return s.String()
	}
	children, err := b.router.SpaceChildren(ctx, space)
	if err != nil {
		fmt.Fprintf(&s, "\n\nRoot space %s (`%s`): its rooms could not be read", spec.Alias, space)
		return s.String()
	}
	fmt.Fprintf(&s, "\n\nRoot space %s (`%s`): %d rooms", spec.Alias, space, len(children))
	return s.String()
}
